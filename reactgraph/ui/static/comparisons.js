// `reactgraph compare` results (the folder `reactgraph ui --results DIR` names): each comparison's tables — per
// graph its success with the interval, calls, tokens and what was left out as plumbing; per pair the difference,
// its test and verdict, and the smallest difference the run could detect — and its plots.

import { api, blobUrl } from "./api.js";
import { h, clear } from "./dom.js";

const percent = (x) => (typeof x === "number" ? `${(100 * x).toFixed(1)} %` : "–");
const number = (x, digits = 2) => (typeof x === "number" ? x.toFixed(digits) : "–");

function table(caption, head, rows) {
  return h("table", {}, h("caption", { text: caption }),
    h("thead", {}, h("tr", {}, head.map((cell) => h("th", { scope: "col", text: cell })))),
    h("tbody", {}, rows.map((row) => h("tr", {}, row.map((cell, i) => (i === 0 ? h("th", { scope: "row", text: cell })
                                                                                 : h("td", { text: cell })))))));
}

function graphRows(graphs) {
  return Object.entries(graphs || {}).map(([name, g]) => [
    name, `${g.runs ?? "–"}${g.left_out ? ` (${g.left_out} left out)` : ""}`,
    `${percent(g.success_rate)} [${percent(g.success_low)}, ${percent(g.success_high)}]`,
    number(g.model_calls), number(g.tool_calls), number(g.tokens, 0), number(g.wall_s, 3),
    String(g.fallback_plans ?? 0), String(g.unchecked ?? 0)]);
}

function pairRows(pairs) {
  return (pairs || []).map((p) => [
    `${p.a} vs ${p.b}`, `${percent(p.rate_a)} vs ${percent(p.rate_b)}`, percent(p.difference),
    `${p.test ?? ""} p=${number(p.p_holm ?? p.p_value, 3)}`, p.verdict ?? "",
    p.detectable ? `${percent(p.detectable.floor)} (80 % power: ${percent(p.detectable.at_power)})` : "–"]);
}

/** The comparisons, as buttons in `list`; `open(name)` shows one. */
export async function listComparisons(list, open) {
  const found = await api("comparisons");
  clear(list);
  if (!found.folder) list.append(h("li", { class: "meta", text: "start with --results DIR to see comparisons" }));
  else if (!found.comparisons.length) list.append(h("li", { class: "meta", text: "no comparison in the folder" }));
  for (const c of found.comparisons) {
    list.append(h("li", {}, h("button", { type: "button", class: "comparison", "data-name": c.name,
                                          onclick: () => open(c) },
      h("span", { class: "name", text: c.graphs.join(" · ") }),
      h("span", { class: "meta", text: `${c.suite ?? ""} · ${(c.started_at ?? "").slice(0, 16)} · ${c.name}` }))));
  }
}

/** One comparison's tables and plots in `view`. */
export async function showComparison(view, comparison) {
  const path = `comparisons/${encodeURIComponent(comparison.name)}`;
  const summary = await api(`${path}/summary.json`);
  const config = summary.config || {};
  clear(view).append(
    h("h2", { text: `Comparison: ${Object.keys(summary.graphs || {}).join(" vs ")}` }),
    h("p", { class: "meta", text: `suite ${config.suite ?? "?"} · model ${(summary.models || []).join(", ")} · `
                                  + `seeds ${(summary.seeds || []).length} · started ${config.started_at ?? "?"}` }),
    table("Per graph (success with its 95 % interval; runs left out as plumbing are not judged)",
          ["graph", "runs", "success", "model calls", "tool calls", "tokens", "wall s", "fallback plans",
           "unchecked"], graphRows(summary.graphs)),
    table("Pairs (the same tasks; the smallest difference this run could detect)",
          ["pair", "success", "difference", "test", "verdict", "detectable"], pairRows(summary.pairs)),
    ...(summary.notices || []).map((notice) => h("p", { class: "meta", text: String(notice) })));
  const figures = h("div", { class: "plots" });
  view.append(figures);
  for (const plot of comparison.plots || []) {
    const src = await blobUrl(`${path}/${encodeURIComponent(plot)}`);
    figures.append(h("figure", {}, h("img", { src, alt: `${plot} of the comparison` }),
                     h("figcaption", { text: plot })));
  }
  view.hidden = false;
}
