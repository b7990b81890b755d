// A turn's timeline: thoughts, tool calls (status, latency, attempts, observation), reflection verdicts, plan
// steps, approvals, trials, the final answer and its status — from a run's stream as it comes (`updates`,
// `messages-tuple`, `tasks`, `custom`), or from a checkpoint's step records. Step records (ExecutionStep) are
// the same in every graph, so one reading of them serves ReAct, Plan-and-Solve and Reflexion.

import { h, clear, oneLine, foldable, shownStatus } from "./dom.js";

const FINAL_NODES = ["finalize", "solve"];  // their message is the final answer, shown as such
const STATUSES = ["answered", "partial", "no_answer", "limit_reached", "budget_exhausted", "failed"];

function parsed(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

function badge(status) {
  return h("span", { class: `badge status-${String(status).replace(/[^a-z_]/gi, "")}`, text: status });
}

export class Timeline {
  constructor(list, hooks) {
    this.list = list;
    this.hooks = hooks;  // {status(text, state), usage(totals), interrupt(value), graph}
    this.reset();
  }

  reset() {
    clear(this.list);
    this.entries = new Map();  // key → li: thoughts by message id, calls by call id
    this.unbound = new Map();  // tool + args → call ids whose step record has not come yet
    this.usage = { input_tokens: 0, output_tokens: 0, cost_usd: 0, tool_calls: 0 };
    this.lastThought = null;
  }

  add(kind, ...children) {
    const li = h("li", { class: `entry ${kind}` }, ...children);
    this.list.append(li);
    li.scrollIntoView?.({ block: "nearest" });
    return li;
  }

  // --- the stream -----------------------------------------------------------------------------------------
  event(name, data) {
    if (name === "metadata" && data?.attempt > 1) this.add("note", `resumed by another worker (attempt ${data.attempt})`);
    else if (name === "tasks") this.task(data);
    else if (name === "messages" && Array.isArray(data)) this.message(data[0], true, data[1]?.langgraph_node);
    else if (name === "updates") for (const [node, update] of Object.entries(data || {})) this.update(node, update);
    else if (name === "custom") this.custom(data);
    else if (name === "error") {
      this.add("error", h("strong", { text: "error " }), oneLine(data?.message ?? data?.error ?? data, 2000));
      this.hooks.status(`failed: ${oneLine(data?.error ?? "error", 80)}`, "failed");
    }
  }

  task(data) {
    if (!data?.name) return;
    if ("input" in data) {
      this.hooks.graph?.running(data.name);
      const call = data.input?.call;
      if (data.name === "act" && call?.id) this.callEntry(call).dataset.status = "running";
    } else {
      this.hooks.graph?.done(data.name);
      if (data.error) this.add("error", `${data.name}: ${oneLine(data.error, 2000)}`);
    }
  }

  update(node, update) {
    if (node === "__interrupt__") {
      this.hooks.graph?.waiting("approve");
      this.hooks.interrupt(update);
      return;
    }
    if (!update || typeof update !== "object") return;
    for (const message of update.messages || []) this.message(message, false, node);
    this.values(update);
    for (const [key, value] of Object.entries(update.usage || {})) {
      if (typeof value === "number" && key in this.usage) this.usage[key] += value;
    }
    this.hooks.usage(this.usage);
  }

  /** What a node wrote (or a checkpoint holds): its step records, and the answer with its status. */
  values(values) {
    for (const step of values.steps || []) this.step(step);
    if (values.final_answer) this.final(values.final_answer, values.status, values.coverage);
    else if (STATUSES.includes(values.status)) this.hooks.status(values.status, "done");
  }

  custom(data) {
    if (data?.type !== "gateway") return;
    const li = this.entries.get(`call:${data.call_id}`);
    if (data.event === "retry" && li) {
      li.querySelector(".notes").append(h("li", { text: `retry ${data.attempt}/${data.max_attempts}: ${data.error}` }));
    } else if (data.event === "approval_requested") {
      this.add("note", `${data.tool} asks for a person's approval: ${data.reason ?? ""}`);
    }
  }

  // --- entries ----------------------------------------------------------------------------------------------
  message(message, streaming, node) {
    if (!message || FINAL_NODES.includes(node)) return;
    const type = message.type;
    if (type === "tool") {
      const gateway = message.response_metadata?.gateway || {};
      this.callResult(message.tool_call_id, gateway.status || message.status, gateway.latency_ms,
                      gateway.attempts, message.content);
      return;
    }
    if (type !== "ai" && type !== "AIMessageChunk") return;
    const text = typeof message.content === "string" ? message.content
      : (message.content || []).map((part) => part?.text ?? "").join("");
    if (text) this.thought(text, message.id, streaming ? "model (streaming)" : "model");
    // a whole reply's calls (a chunk's are still partial): what a subgraph's run (a Reflexion trial) tells only here
    if (type === "ai") for (const call of message.tool_calls || []) this.callEntry(call);
  }

  thought(text, id, who = "model") {
    const key = `thought:${id ?? this.list.children.length}`;
    let li = this.entries.get(key);
    if (!li) {
      li = this.add("thought", h("span", { class: "who", text: "thought" }), h("p", { class: "text" }));
      this.entries.set(key, li);
    }
    li.querySelector(".text").textContent = text;
    li.dataset.from = who;
    this.lastThought = text;
  }

  callEntry(call) {
    const key = `call:${call.id}`;
    const signature = `${call.name}|${JSON.stringify(call.args ?? {})}`;
    let li = this.entries.get(key);
    if (li) {
      if (li.dataset.signature !== signature) this.rebind(li, call, signature);
      return li;
    }
    li = this.add("call",
      h("span", { class: "who", text: "tool call" }), h("strong", { class: "tool", text: call.name }),
      h("code", { class: "args", text: oneLine(call.args ?? call.action_input ?? {}) }),
      h("span", { class: "status" }), h("span", { class: "latency" }), h("ul", { class: "notes" }),
      h("div", { class: "observation" }));
    li.dataset.tool = call.name;
    li.dataset.status = "asked";
    li.querySelector(".status").append(badge("asked"));
    this.entries.set(key, li);
    li.dataset.signature = signature;
    this.unbound.set(signature, [...(this.unbound.get(signature) || []), call.id]);
    return li;
  }

  /** A call a person edited (its reply rewritten, same id): its new arguments, and the record it waits for. */
  rebind(li, call, signature) {
    const waiting = this.unbound.get(li.dataset.signature) || [];
    const at = waiting.indexOf(call.id);
    if (at >= 0) {
      waiting.splice(at, 1);
      this.unbound.set(signature, [...(this.unbound.get(signature) || []), call.id]);
    }
    li.dataset.signature = signature;
    li.dataset.tool = call.name;
    li.querySelector(".tool").textContent = call.name;
    li.querySelector(".args").textContent = oneLine(call.args ?? {});
  }

  callResult(id, status, latency, attempts, content) {
    const li = this.entries.get(`call:${id}`);
    if (!li) return;
    li.dataset.status = status || "done";
    li.querySelector(".status").replaceChildren(badge(status || "done"));
    if (latency !== undefined) {
      const tries = attempts > 1 ? ` · ${attempts} attempts` : "";
      li.querySelector(".latency").textContent = `${Number(latency).toFixed(1)} ms${tries}`;
    }
    if (content !== undefined) {
      const text = typeof content === "string" ? content : JSON.stringify(content);
      li.querySelector(".observation").replaceChildren(h("span", { class: "who", text: "observation" }),
                                                        foldable(text, "text"));
    }
  }

  step(step) {
    const node = step.node;
    if (node === "act" && step.action) return this.actStep(step);
    if (FINAL_NODES.includes(node)) return undefined;  // the final answer shows it
    if (node === "reflect" || step.status === "reflection") return this.verdict(step);
    if (node === "plan" || node === "replan") {
      return this.add("plan", h("span", { class: "who", text: node === "plan" ? "plan" : "replan" }),
        h("span", { class: "thought-line", text: step.thought }), foldable(step.observation, "text"));
    }
    if (node === "execute_step") {
      return this.add("plan-step", h("span", { class: "who", text: "plan step" }), badge(step.status),
        h("span", { class: "thought-line", text: step.thought }), foldable(step.observation, "text"));
    }
    if (node === "approve") {
      return this.add("approval-step", h("span", { class: "who", text: "approval" }), badge(step.status),
        h("strong", { text: step.action ?? "" }), h("code", { text: oneLine(step.action_input ?? {}) }),
        step.observation && step.observation !== step.status ? h("p", { text: step.observation }) : null);
    }
    const who = { evaluate: "trial verdict", self_reflect: "lesson" }[node] ?? node;
    return this.add(`step ${node}`, h("span", { class: "who", text: who }), badge(step.status),
      step.thought ? h("span", { class: "thought-line", text: step.thought }) : null,
      foldable(step.observation, "text"));
  }

  actStep(step) {
    const signature = `${step.action}|${JSON.stringify(step.action_input ?? {})}`;
    const waiting = this.unbound.get(signature) || [];
    let id = waiting.shift();
    if (id === undefined) {  // no stream told of this call (a checkpoint's records, or a Reflexion trial)
      if (step.thought && step.thought !== this.lastThought) this.thought(step.thought, `step-${this.list.children.length}`);
      id = `step-${this.list.children.length}`;
      this.callEntry({ id, name: step.action, args: step.action_input });
      this.unbound.get(signature)?.pop();
    }
    this.callResult(id, step.status, step.latency_ms, undefined, step.observation);
    const li = this.entries.get(`call:${id}`);
    if (step.tokens) li.querySelector(".latency").append(` · ${step.tokens} tokens`);
  }

  verdict(step) {
    const v = parsed(step.observation) || {};
    const enough = v.enough_information;
    return this.add("verdict", h("span", { class: "who", text: "reflection" }),
      badge(enough === undefined ? step.status : enough ? "enough" : "not enough"),
      h("span", { class: "thought-line", text: v.note ?? step.thought }),
      v.missing?.length ? h("p", { class: "missing", text: `missing: ${v.missing.join("; ")}` }) : null,
      v.tool_error ? h("p", { class: "missing", text: "a tool failed" }) : null);
  }

  final(answer, status, coverage) {
    for (const [key, entry] of this.entries) {  // the reply that is the answer: shown once, as the answer
      if (key.startsWith("thought:") && entry.querySelector(".text").textContent === answer) {
        entry.remove();
        this.entries.delete(key);
      }
    }
    let li = this.entries.get("final");
    if (!li) {
      li = this.add("final", h("span", { class: "who", text: "final answer" }), h("span", { class: "status" }),
        h("pre", { class: "text", id: "final-answer" }), h("p", { class: "coverage" }));
      this.entries.set("final", li);
    }
    this.list.append(li);  // last: a later answer (a Reflexion trial after a failed one) replaces it there
    li.querySelector(".status").replaceChildren(badge(status ?? "answered"));
    li.querySelector(".text").textContent = answer;
    const missing = coverage?.missing?.length ? ` · missing: ${coverage.missing.join("; ")}` : "";
    li.querySelector(".coverage").textContent = coverage?.by === "unchecked"
      ? "coverage unchecked: no model's account of the question's parts backs this status"
      : coverage?.parts ? `covered: ${coverage.parts.join("; ")}${missing}` : "";
    this.hooks.status(shownStatus(status ?? "answered", coverage), "done");
  }
}
