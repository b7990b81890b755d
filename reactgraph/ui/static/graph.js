// A graph as LangGraph draws it (GET /assistants/{id}/graph: nodes and edges, conditional ones marked), laid out
// in layers and drawn as SVG. The loops are found first (a depth-first walk from __start__: an edge back to a
// node still on the walk closes one); without them each node sits one layer below the lowest node that leads
// to it, so every forward edge points down. An edge to the next layer is drawn straight down; one that skips
// layers runs in a lane on the left, and one that goes back up (a loop) in a lane on the right, each in its
// own lane so that none hides another.

import { s, clear } from "./dom.js";

const NODE_W = 116, NODE_H = 26, GAP_X = 20, GAP_Y = 22, LANE = 11, MARGIN = 10;

/** The edges that close a loop: found by a depth-first walk from __start__ in the graph's own edge order. */
export function loopEdges(graph) {
  const next = new Map(graph.nodes.map((n) => [n.id, []]));
  for (const e of graph.edges) next.get(e.source)?.push(e);
  const state = new Map();  // id → "open" while on the walk, "done" after
  const back = new Set();
  const visit = (id) => {
    state.set(id, "open");
    for (const e of next.get(id) || []) {
      const seen = state.get(e.target);
      if (seen === "open") back.add(e);
      else if (!seen) visit(e.target);
    }
    state.set(id, "done");
  };
  for (const id of ["__start__", ...next.keys()]) if (next.has(id) && !state.has(id)) visit(id);
  return back;
}

/** Each node's layer: one below the lowest node leading to it (loop edges left out); __end__ last. */
export function layers(graph) {
  const back = loopEdges(graph);
  const forward = graph.edges.filter((e) => !back.has(e));
  const layer = new Map(graph.nodes.map((n) => [n.id, 0]));
  for (let changed = true, rounds = 0; changed && rounds <= graph.nodes.length; rounds += 1) {
    changed = false;  // longest path by relaxation: at most one round per node without loops
    for (const e of forward) {
      if (layer.has(e.source) && layer.has(e.target) && layer.get(e.target) < layer.get(e.source) + 1) {
        layer.set(e.target, layer.get(e.source) + 1);
        changed = true;
      }
    }
  }
  if (layer.has("__end__")) {
    layer.set("__end__", Math.max(...[...layer].filter(([id]) => id !== "__end__").map(([, d]) => d)) + 1);
  }
  return { layer, back };
}

function place(graph) {
  const { layer, back } = layers(graph);
  const rows = [];
  for (const n of graph.nodes) (rows[layer.get(n.id)] ||= []).push(n.id);
  const widest = Math.max(...rows.filter(Boolean).map((r) => r.length));
  const core = widest * NODE_W + (widest - 1) * GAP_X;
  const skips = graph.edges.filter((e) => !back.has(e) && layer.get(e.target) - layer.get(e.source) > 1);
  const loops = graph.edges.filter((e) => back.has(e) || layer.get(e.target) <= layer.get(e.source));
  const left = MARGIN + skips.length * LANE;
  const at = new Map();
  let y = MARGIN;
  for (const row of rows.filter(Boolean)) {
    const span = row.length * NODE_W + (row.length - 1) * GAP_X;
    row.forEach((id, i) => at.set(id, { x: left + (core - span) / 2 + i * (NODE_W + GAP_X), y }));
    y += NODE_H + GAP_Y;
  }
  return { at, layer, skips, loops, left, right: left + core,
           width: left + core + loops.length * LANE + MARGIN + 4, height: y - GAP_Y + MARGIN };
}

function edgePath(e, p) {
  const from = p.at.get(e.source), to = p.at.get(e.target);
  const mid = (n) => n.y + NODE_H / 2;
  if (e.source === e.target) {  // a node that runs again: a small loop on its right
    const x = from.x + NODE_W, y = mid(from);
    return `M${x},${y - 6} C${x + 22},${y - 16} ${x + 22},${y + 16} ${x},${y + 6}`;
  }
  const skip = p.skips.indexOf(e), loop = p.loops.indexOf(e);
  if (skip >= 0) {
    const lane = p.left - (skip + 1) * LANE;
    return `M${from.x},${mid(from)} H${lane} V${mid(to)} H${to.x}`;
  }
  if (loop >= 0) {
    const lane = p.right + (loop + 1) * LANE;
    return `M${from.x + NODE_W},${mid(from)} H${lane} V${mid(to)} H${to.x + NODE_W}`;
  }
  const x1 = from.x + NODE_W / 2, x2 = to.x + NODE_W / 2, y1 = from.y + NODE_H, y2 = to.y, m = (y1 + y2) / 2;
  return `M${x1},${y1} C${x1},${m} ${x2},${m} ${x2},${y2}`;
}

function label(id) {
  return id === "__start__" ? "start" : id === "__end__" ? "end" : id;
}

/** Draw `graph` into `container`; the handle marks nodes running, done, or waiting (an approval). */
export function drawGraph(container, graph, name) {
  const p = place(graph);
  const svg = s("svg", { viewBox: `0 0 ${p.width} ${p.height}`, width: p.width, height: p.height, role: "img",
                         class: "graph",
                         "aria-label": `graph ${name}: ${graph.nodes.map((n) => label(n.id)).join(", ")}` },
    s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7,
                                markerHeight: 7, orient: "auto-start-reverse" },
      s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }))));
  for (const e of graph.edges) {
    if (!p.at.has(e.source) || !p.at.has(e.target)) continue;
    svg.append(s("path", { d: edgePath(e, p), "marker-end": "url(#arrow)",
                           class: e.conditional ? "edge conditional" : "edge", "data-edge": `${e.source}->${e.target}` }));
  }
  const nodes = new Map();
  for (const n of graph.nodes) {
    const at = p.at.get(n.id);
    const terminal = n.id === "__start__" || n.id === "__end__";
    const g = s("g", { class: terminal ? "node terminal" : "node", "data-node": n.id,
                       transform: `translate(${at.x},${at.y})` },
      s("rect", { width: NODE_W, height: NODE_H, rx: terminal ? NODE_H / 2 : 5 }),
      s("text", { x: NODE_W / 2, y: NODE_H / 2 + 4, "text-anchor": "middle", text: label(n.id) }));
    nodes.set(n.id, g);
    svg.append(g);
  }
  clear(container).append(svg);
  return {
    running(id) { nodes.get(id)?.classList.add("running"); },
    done(id) {
      const g = nodes.get(id);
      g?.classList.remove("running");
      g?.classList.add("visited");
    },
    waiting(id) { nodes.get(id)?.classList.add("waiting"); },
    reset() {
      for (const g of nodes.values()) g.classList.remove("running", "visited", "waiting");
    },
  };
}
