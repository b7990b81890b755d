// A pending approval, in LangChain's human-in-the-loop format: the interrupt's value holds `action_requests`
// (name, args, description) and `review_configs` (the decisions each tool allows); the answer is
// {decisions: [...]}, one per request, in order. A per-call request ({type: "tool_approval", name, args, …}) is
// answered with one decision. Each request gets the buttons its tool allows; once every request has a decision,
// the decisions go back as the resume of the run.

import { h, clear, oneLine } from "./dom.js";

const LABELS = { approve: "Approve", edit: "Edit", reject: "Reject", respond: "Respond" };

/** The requests of an interrupt's value, each with its allowed decisions; and whether it is per call. */
export function requestsOf(value) {
  if (Array.isArray(value?.action_requests)) {
    const configs = value.review_configs || [];
    return { perCall: false, requests: value.action_requests.map((request, i) => ({
      ...request,
      allowed: (configs.find((c) => c.action_name === request.name) || configs[i] || {}).allowed_decisions
        || ["approve", "reject"],
    })) };
  }
  if (value?.type === "tool_approval") {
    return { perCall: true, requests: [{ name: value.name, args: value.args, description: value.description,
                                         allowed: ["approve", "edit", "reject", "respond"] }] };
  }
  return { perCall: false, requests: [] };
}

function decisionOf(kind, request, form) {
  const message = form.querySelector(".message").value.trim();
  if (kind === "approve") return { type: "approve" };
  if (kind === "reject") return message ? { type: "reject", message } : { type: "reject" };
  if (kind === "respond") {
    if (!message) throw new Error("a response needs a message: write it in the message field");
    return { type: "respond", message };
  }
  let args;
  try {
    args = JSON.parse(form.querySelector(".edit-args").value);
  } catch (error) {
    throw new Error(`the edited arguments are not JSON: ${error.message}`);
  }
  return { type: "edit", edited_action: { name: request.name, args } };
}

function requestForm(request, index, decide) {
  const form = h("div", { class: "action-request", "data-tool": request.name, role: "group",
                          "aria-label": `approval of ${request.name}` },
    h("p", {}, h("strong", { class: "tool", text: request.name }), " ",
      h("code", { class: "args", text: oneLine(request.args ?? {}, 2000) })),
    request.description ? h("pre", { class: "description", text: request.description }) : null,
    h("label", {}, "message (reject, respond) ", h("input", { class: "message", type: "text", autocomplete: "off" })),
    request.allowed.includes("edit")
      ? h("details", { class: "edit" }, h("summary", { text: "edit the arguments" }),
        h("textarea", { class: "edit-args", rows: 4, spellcheck: "false",
                        "aria-label": `arguments of ${request.name}` }))
      : null,
    h("p", { class: "problem", role: "alert" }),
    h("div", { class: "buttons" }, request.allowed.filter((k) => LABELS[k]).map((kind) =>
      h("button", { type: "button", "data-decision": kind, onclick: () => {
        try {
          decide(index, decisionOf(kind, request, form), form);
        } catch (error) {
          form.querySelector(".problem").textContent = error.message;
        }
      } }, LABELS[kind]))));
  const editor = form.querySelector(".edit-args");
  if (editor) editor.value = JSON.stringify(request.args ?? {}, null, 2);
  return form;
}

/** Show `value` in `panel`; `send(resume)` resumes the run once every request has its decision. */
export function showApproval(panel, value, send) {
  const { perCall, requests } = requestsOf(value);
  clear(panel);
  if (!requests.length) {
    panel.hidden = true;
    return;
  }
  const decisions = new Array(requests.length);
  const decide = (index, decision, form) => {
    decisions[index] = decision;
    form.dataset.decided = decision.type;
    for (const button of form.querySelectorAll("button")) button.setAttribute("aria-pressed", String(button.dataset.decision === decision.type));
    if (decisions.filter(Boolean).length < requests.length) return;
    for (const button of panel.querySelectorAll("button")) button.disabled = true;
    send(perCall ? decisions[0] : { decisions });
  };
  panel.append(h("h2", { text: requests.length > 1 ? `${requests.length} calls wait for your approval`
                                                    : "A call waits for your approval" }));
  if (value?.error) panel.append(h("p", { class: "problem", text: value.error }));  // the last answer's fault
  panel.append(...requests.map((request, i) => requestForm(request, i, decide)));
  panel.hidden = false;
  panel.querySelector("button")?.focus();
}
