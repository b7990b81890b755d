// Building the page's elements. Text is only ever a text node (or textContent): tool output, model text and
// every other value from the API is data, never markup. The page's Content-Security-Policy enforces it too:
// Trusted Types with no policy make HTML sinks such as innerHTML throw.

const SVG_NS = "http://www.w3.org/2000/svg";

function fill(node, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "text") node.textContent = String(value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** An HTML element: h("li", {class: "entry"}, "text", otherNode). */
export function h(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

/** An SVG element. */
export function s(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

export function clear(node) {
  node.replaceChildren();
  return node;
}

export function $(selector) {
  return document.querySelector(selector);
}

/** A value as one line of JSON for display (bounded: a huge argument must not freeze the page). */
export function oneLine(value, max = 400) {
  let text;
  try {
    text = typeof value === "string" ? value : JSON.stringify(value);
  } catch {
    text = String(value);
  }
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/** Long text folded: the first lines shown, the whole in a <details> (keyboard reachable). */
export function foldable(text, className, limit = 600) {
  const value = String(text ?? "");
  if (value.length <= limit) return h("pre", { class: className, text: value });
  return h("details", { class: `${className} long` },
    h("summary", { text: `${value.slice(0, 200)}… (${value.length} characters)` }),
    h("pre", { text: value }));
}

// A run's status as a person is shown it: "answered · coverage unchecked" when no model's account of the question's
// parts backs it, as the CLI says it (nodes/closing.py shown_status, docs/statuses.md).
export function shownStatus(status, coverage) {
  return coverage?.by === "unchecked" && status ? `${status} · coverage unchecked` : status;
}
