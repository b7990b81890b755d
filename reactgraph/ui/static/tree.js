// A state as a folding JSON tree: objects and arrays are <details> (keyboard: Tab to a summary, Enter or Space
// folds it), their children made only when first opened, so a state with a long history opens at once.

import { h } from "./dom.js";

function kind(value) {
  return value === null ? "null" : Array.isArray(value) ? "array" : typeof value;
}

function summaryOf(value) {
  if (Array.isArray(value)) return `[${value.length}]`;
  return `{${Object.keys(value).length}}`;
}

function leaf(key, value) {
  const type = kind(value);
  const shown = type === "string" ? JSON.stringify(value) : String(value);
  return h("li", { class: "leaf" }, key === null ? null : h("span", { class: "key", text: `${key}: ` }),
    h("span", { class: `value ${type}`, text: shown }));
}

/** The tree of `value` under `key` (null: the root), open to `depth` levels. */
export function jsonTree(value, key = null, depth = 1) {
  if (value === null || typeof value !== "object") return leaf(key, value);
  const children = h("ul", { class: "children" });
  let made = false;
  const make = () => {
    if (made) return;
    made = true;
    const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
    for (const [k, v] of entries) children.append(jsonTree(v, k, depth - 1));
  };
  const details = h("details", { ontoggle: make },
    h("summary", {}, key === null ? null : h("span", { class: "key", text: `${key}: ` }),
      h("span", { class: "count", text: summaryOf(value) })),
    children);
  if (depth > 0) {
    make();
    details.open = true;
  }
  return h("li", { class: "branch" }, details);
}

/** The whole tree, as a list to put on the page. */
export function stateTree(value, label) {
  return h("ul", { class: "json-tree", "aria-label": label }, jsonTree(value, null, 1));
}
