// Two paradigms side by side: one question sent to two graphs at once, each on a session of its own, both
// timelines streamed live next to each other with each run's status, tokens, tool calls and cost — where ReAct
// and Plan-and-Solve (or Reflexion) reason differently on the same question, and what each costs.

import { stream } from "./api.js";
import { h, clear, oneLine } from "./dom.js";
import { Timeline } from "./timeline.js";

const STREAM_MODES = ["updates", "messages-tuple", "tasks", "custom"];

/** A new session's id (crypto.randomUUID needs a secure context: a plain-http host name off loopback is none). */
export function uuid4() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

function usageLine(usage) {
  const cost = usage.cost_usd ? ` · $${usage.cost_usd.toFixed(4)}` : "";
  return `tokens ${usage.input_tokens} in · ${usage.output_tokens} out · tool calls ${usage.tool_calls}${cost}`;
}

/** One side: its graph, status, usage and timeline; `run(question)` streams the graph's answer into it. */
class Side {
  constructor(column, assistant) {
    this.assistant = assistant;
    this.status = h("p", { class: "pair-status", role: "status", "data-state": "idle", text: "idle" });
    this.usage = h("p", { class: "pair-usage" });
    this.list = h("ol", { class: "pair-timeline", "aria-label": `Timeline of ${assistant.graph_id}` });
    clear(column).append(h("h3", { text: assistant.name || assistant.graph_id }), this.status, this.usage, this.list);
    column.dataset.graph = assistant.graph_id;
    this.timeline = new Timeline(this.list, {
      status: (text, state) => this.setStatus(text, state),
      usage: (usage) => { this.usage.textContent = usageLine(usage); },
      interrupt: () => this.setStatus("waiting for approval: open its session to decide", "waiting"),
      graph: null,
    });
  }

  setStatus(text, state) {
    this.status.textContent = text;
    this.status.dataset.state = state;
  }

  async run(question) {
    this.thread = uuid4();
    this.setStatus("running", "running");
    const body = { input: { messages: [{ role: "human", content: question }] }, if_not_exists: "create",
                   assistant_id: this.assistant.assistant_id, stream_mode: STREAM_MODES };
    try {
      await stream(`threads/${encodeURIComponent(this.thread)}/runs/stream`, body,
                   (name, data) => this.timeline.event(name, data));
      if (this.status.dataset.state === "running") this.setStatus("ended", "done");
    } catch (error) {
      this.setStatus(`failed: ${oneLine(error?.detail ?? error?.message ?? error, 120)}`, "failed");
    }
  }
}

/** Run `question` on the two assistants at once, into the two columns; resolves when both have ended. */
export async function sideBySide(question, assistants, columns) {
  const sides = assistants.map((assistant, i) => new Side(columns[i], assistant));
  await Promise.all(sides.map((side) => side.run(question)));
  return sides.map((side) => side.thread);
}
