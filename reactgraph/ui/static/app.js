// The debugger page: graphs (assistants) drawn from the compiled graph, sessions (threads) and their turns, a
// question run live on the chosen graph, the state at each checkpoint, and a pending approval answered here.
// Every request goes to the page's own origin (api.js).

import { api, stream, ApiError, setCredentials } from "./api.js";
import { h, clear, $, oneLine, shownStatus } from "./dom.js";
import { drawGraph } from "./graph.js";
import { Timeline } from "./timeline.js";
import { stateTree } from "./tree.js";
import { showApproval } from "./approval.js";
import { sideBySide, uuid4 } from "./pair.js";
import { listComparisons, showComparison } from "./comparisons.js";
import { History } from "./turns.js";

const STREAM_MODES = ["updates", "messages-tuple", "tasks", "custom"];
const PAGE = 50;  // sessions per page of the list
const SEARCH_CHARS = 200;  // the longest text the server searches for
const SEARCH_DELAY_MS = 250;  // typing pauses this long before the server is asked

// `runThread`: the session a question goes to and an approval resumes (before its first run, one not yet made)
const state = { graphs: [], graph: null, drawn: null, thread: null, runThread: null, threads: [], listText: "",
                busy: false, history: null, turn: null };

function setStatus(text, kind) {
  const status = $("#run-status");
  status.textContent = text;
  status.dataset.state = kind;
}

function showUsage(usage) {
  const cost = usage.cost_usd ? ` · $${usage.cost_usd.toFixed(4)}` : "";
  $("#usage").textContent = `tokens ${usage.input_tokens} in · ${usage.output_tokens} out · `
    + `tool calls ${usage.tool_calls}${cost}`;
}

function problem(error) {
  const line = error instanceof ApiError ? error.detail : error?.message ?? String(error);
  $("#problem").textContent = oneLine(line, 500);
  $("#problem").hidden = false;
  if (error instanceof ApiError && error.status === 401) toggleAuth(true);
}

function clearProblem() {
  $("#problem").hidden = true;
}

const timeline = new Timeline($("#timeline"), {
  status: setStatus, usage: showUsage, interrupt: (found) => pending(found),
  get graph() { return state.drawn; },
});

// --- graphs -----------------------------------------------------------------------------------------------------
async function loadGraphs() {
  state.graphs = await api("assistants/search", { limit: 100, sort_by: "name", sort_order: "asc" });
  const list = clear($("#graphs"));
  for (const assistant of state.graphs) {
    list.append(h("li", {}, h("button", { type: "button", class: "graph-choice", "data-graph": assistant.graph_id,
                                          "data-assistant": assistant.assistant_id, "aria-pressed": "false",
                                          onclick: () => chooseGraph(assistant, true) },
      h("span", { class: "name", text: assistant.name || assistant.graph_id }),
      assistant.name !== assistant.graph_id ? h("span", { class: "meta", text: assistant.graph_id }) : null)));
  }
  const first = state.graphs.find((a) => a.assistant_id === "react" || a.graph_id === "react") || state.graphs[0];
  if (first) await chooseGraph(first, false);
}

async function chooseGraph(assistant, byHand) {
  if (byHand && state.thread && state.thread.metadata?.graph_id !== assistant.graph_id) newSession();
  state.graph = assistant;
  for (const button of document.querySelectorAll(".graph-choice")) {
    button.setAttribute("aria-pressed", String(button.dataset.assistant === assistant.assistant_id));
  }
  const graph = await api(`assistants/${encodeURIComponent(assistant.assistant_id)}/graph`);
  state.drawn = drawGraph($("#graph-view"), graph, assistant.graph_id);
  $("#graph-name").textContent = `${assistant.name || assistant.graph_id} · ${graph.nodes.length - 2} nodes`;
}

// --- sessions: listed and searched by the server, a page at a time (titles: their first questions) -----------
let listing = 0;  // the latest list asked for: an older answer that arrives after it is dropped
let searchTimer = null;

async function loadThreads(more = false) {
  const asked = ++listing;
  const text = $("#thread-search").value.trim().slice(0, SEARCH_CHARS);
  const page = await api("threads/search", {
    limit: PAGE, offset: more ? state.threads.length : 0, sort_by: "updated_at", sort_order: "desc",
    select: ["thread_id", "updated_at", "status", "metadata", "title"], ...(text ? { text } : {}),
  });
  if (asked !== listing) return;
  state.threads = more ? [...state.threads, ...page] : page;
  state.listText = text;
  $("#more-threads").hidden = page.length < PAGE;
  renderThreads();
}

function searchSoon() {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => loadThreads().catch(problem), SEARCH_DELAY_MS);
}

function renderThreads() {
  const text = state.listText;
  const list = clear($("#threads"));
  for (const thread of state.threads) {
    list.append(h("li", {}, h("button", {
      type: "button", class: "thread", "data-thread": thread.thread_id,
      "aria-current": thread.thread_id === state.thread?.thread_id ? "true" : "false",
      onclick: () => openThread(thread.thread_id).catch(problem),
    }, h("span", { class: "name", text: oneLine(thread.title || thread.thread_id, 90) }),
    h("span", { class: "meta", text: `${thread.metadata?.graph_id ?? "?"} · ${thread.status} · `
                                    + `${(thread.updated_at || "").slice(0, 16).replace("T", " ")}` }))));
  }
  if (!list.children.length) list.append(h("li", { class: "empty", text: text ? "no session matches" : "no sessions yet" }));
  list.dataset.text = text;  // what the list shows the answer to (the tests wait for it)
}

function newSession() {
  state.thread = null;
  state.runThread = null;
  state.history = null;
  state.turn = null;
  $("#session-label").textContent = "(a new session)";
  delete $("#session-label").dataset.thread;
  timeline.reset();
  clear($("#turns"));
  $("#more-turns").hidden = true;
  clear($("#checkpoints"));
  clear($("#state-view"));
  $("#turn-question").textContent = "";
  $("#approval").hidden = true;
  setStatus("idle", "idle");
  renderThreads();
}

async function openThread(threadId, keepTimeline = false) {
  clearProblem();
  const history = new History(threadId);
  // the session and the newest page of its history together: one round trip's wait, whatever its length
  const [thread] = await Promise.all([api(`threads/${encodeURIComponent(threadId)}`), history.next()]);
  state.thread = thread;
  state.history = history;
  state.runThread = threadId;
  $("#session-label").textContent = `(session ${threadId.slice(0, 8)}…)`;
  $("#session-label").dataset.thread = threadId;
  const graphId = thread.metadata?.graph_id;
  const assistant = state.graphs.find((a) => a.assistant_id === thread.metadata?.assistant_id)
    || state.graphs.find((a) => a.graph_id === graphId);
  if (assistant && assistant !== state.graph) await chooseGraph(assistant, false);
  renderThreads();
  renderTurns();
  const turns = history.list();
  if (turns.length) await showTurn(turns[turns.length - 1][0], keepTimeline);
  const waiting = Object.values(thread.interrupts || {}).flat();
  if (waiting.length && !state.busy) pending(waiting);
}

// --- turns, checkpoints and state (turns.js reads the history a page at a time) -------------------------------
function questionOf(values, turn) {
  const question = (values?.messages || []).find((m) => m.id === turn)?.content;
  return typeof question === "string" ? question : null;
}

function renderTurns() {
  const history = state.history;
  const list = clear($("#turns"));
  const turns = history.list();
  turns.forEach(([turn], index) => {
    const latest = history.latest(turn);
    const values = latest.values;
    const number = history.more ? "" : `${index + 1}. `;  // counted once the session's start is read
    list.append(h("li", {}, h("button", { type: "button", class: "turn", "data-turn": turn,
                                          "aria-current": String(turn === state.turn),
                                          onclick: () => showTurn(turn, false).catch(problem) },
      h("span", { class: "name", text: `${number}${oneLine(questionOf(values, turn) ?? turn, 90)}` }),
      h("span", { class: "meta", text: `${values.status ? shownStatus(values.status, values.coverage)
                                                        : (latest.next?.length ? "unfinished" : "")} · `
                                      + `${(latest.created_at || "").slice(0, 19).replace("T", " ")}` }))));
  });
  $("#more-turns").hidden = !history.more;
}

async function earlierTurns() {
  if (!state.history) return;
  await state.history.next();
  renderTurns();
}

async function showTurn(turn, keepTimeline) {
  const history = state.history;
  state.turn = turn;
  if (await history.complete(turn)) renderTurns();  // its first checkpoints were on an older page
  if (history !== state.history) return;  // another session was opened meanwhile
  const checkpoints = history.turns.get(turn) || [];
  const latest = history.latest(turn);
  for (const button of document.querySelectorAll(".turn")) {
    button.setAttribute("aria-current", String(button.dataset.turn === turn));
  }
  if (!keepTimeline && latest) {
    timeline.reset();
    $("#turn-question").textContent = questionOf(latest.values, turn) ?? "";
    timeline.values(latest.values);
    if (!latest.values.status) setStatus(latest.next?.length ? `stopped before ${latest.next.join(", ")}` : "idle", "idle");
  }
  const list = clear($("#checkpoints"));
  for (const checkpoint of [...checkpoints].reverse()) {
    const step = checkpoint.metadata?.step ?? "?";
    const next = checkpoint.next?.length ? checkpoint.next.join(", ") : "end";
    list.append(h("li", {}, h("button", { type: "button", class: "checkpoint", "data-checkpoint": checkpoint.checkpoint_id,
                                          onclick: () => showState(checkpoint) },
      h("span", { class: "name", text: `step ${step} → ${next}` }),
      h("span", { class: "meta", text: `${checkpoint.metadata?.source ?? ""} · ${(checkpoint.created_at || "").slice(11, 19)}` }))));
  }
  if (latest) showState(latest);
}

function showState(checkpoint) {
  for (const button of document.querySelectorAll(".checkpoint")) {
    button.setAttribute("aria-current", String(button.dataset.checkpoint === checkpoint.checkpoint_id));
  }
  clear($("#state-view")).append(
    h("p", { class: "meta", text: `checkpoint ${checkpoint.checkpoint_id} · step ${checkpoint.metadata?.step ?? "?"}` }),
    stateTree(checkpoint.values ?? {}, "state values"),
    h("details", { class: "checkpoint-meta" }, h("summary", { text: "metadata" }),
      stateTree(checkpoint.metadata ?? {}, "checkpoint metadata")),
    timeTravel(checkpoint));
}

// --- time travel: a new branch from any checkpoint (the session's other branches stay in its history) ------------
function timeTravel(checkpoint) {
  const threadId = state.thread?.thread_id;
  const values = h("textarea", { class: "fork-values", rows: "3", spellcheck: "false",
                                 "aria-label": "state values to set (JSON)", placeholder: '{"final_answer": "…"}' });
  const asNode = h("input", { class: "fork-as-node", type: "text", "aria-label": "as node (optional)",
                              placeholder: "as node (optional), e.g. finalize" });
  return h("section", { class: "time-travel", "aria-label": "time travel" },
    h("button", { type: "button", class: "fork-ask", onclick: () => askFrom(threadId, checkpoint) },
      "Ask the question box's question from here"),
    h("details", { class: "fork-edit" }, h("summary", { text: "Edit the state here and run on" }), values, asNode,
      h("button", { type: "button", class: "fork-run", onclick: () => editAndRun(threadId, checkpoint, values.value,
                                                                                  asNode.value.trim()) },
        "Save as a new checkpoint and run from it")));
}

function askFrom(threadId, checkpoint) {
  const question = $("#question").value.trim();
  if (!threadId || state.busy) return;
  if (!question) return problem(new Error("type the question to ask from this checkpoint in the question box"));
  $("#question").value = "";
  run(threadId, { input: { messages: [{ role: "human", content: question }] }, checkpoint_id: checkpoint.checkpoint_id },
      question);
}

async function editAndRun(threadId, checkpoint, text, asNode) {
  if (!threadId || state.busy) return;
  let values;
  try {
    values = JSON.parse(text || "{}");
  } catch (error) {
    return problem(new Error(`the state values are not JSON: ${error.message}`));
  }
  try {
    const saved = await api(`threads/${encodeURIComponent(threadId)}/state`,
                            { values, checkpoint_id: checkpoint.checkpoint_id, ...(asNode ? { as_node: asNode } : {}) });
    await run(threadId, { input: null, checkpoint_id: saved.checkpoint.checkpoint_id },
              `(run on from an edited checkpoint of step ${checkpoint.metadata?.step ?? "?"})`);
  } catch (error) {
    problem(error);
  }
}

// --- runs ---------------------------------------------------------------------------------------------------
async function run(threadId, body, question) {
  state.busy = true;
  state.runThread = threadId;
  $("#ask").disabled = true;
  clearProblem();
  if (question !== null) {
    timeline.reset();
    $("#turn-question").textContent = question;
  }
  state.drawn?.reset();
  $("#approval").hidden = true;
  setStatus("running", "running");
  try {
    await stream(`threads/${encodeURIComponent(threadId)}/runs/stream`,
                 { ...body, assistant_id: state.graph.assistant_id, stream_mode: STREAM_MODES }, (name, data) => {
      if (name === "metadata" && data?.run_id) $("#run-status").dataset.run = data.run_id;
      timeline.event(name, data);
    });
    if ($("#run-status").dataset.state === "running") setStatus("ended", "done");
  } catch (error) {
    setStatus("failed", "failed");
    problem(error);
  }
  state.busy = false;
  // the session as saved (its turns, checkpoints, a pending approval), before the next question may go
  await Promise.all([openThread(threadId, true), loadThreads()]).catch(problem);
  $("#ask").disabled = false;
}

function pending(interrupts) {
  const found = (Array.isArray(interrupts) ? interrupts : [interrupts]).find((i) => i?.value);
  if (!found || !state.runThread) return;
  setStatus("waiting for approval", "waiting");
  const threadId = state.runThread;
  showApproval($("#approval"), found.value, (resume) => run(threadId, { command: { resume } }, null));
}

function ask(event) {
  event.preventDefault();
  const question = $("#question").value.trim();
  if (!question || state.busy || !state.graph) return;
  const threadId = state.runThread ?? uuid4();
  $("#question").value = "";
  run(threadId, { input: { messages: [{ role: "human", content: question }] }, if_not_exists: "create" }, question);
}

// --- two graphs side by side (pair.js) --------------------------------------------------------------------------
function fillPairChoices() {
  for (const [id, preferred] of [["#pair-a", "react"], ["#pair-b", "plan_solve"]]) {
    const select = clear($(id));
    for (const assistant of state.graphs) {
      select.append(h("option", { value: assistant.assistant_id, text: assistant.name || assistant.graph_id,
                                  selected: assistant.graph_id === preferred }));
    }
  }
}

function togglePair() {
  const pair = $("#pair");
  pair.hidden = !pair.hidden;
  $("#pair-toggle").setAttribute("aria-expanded", String(!pair.hidden));
  if (!pair.hidden) fillPairChoices();
}

async function askBoth() {
  const question = $("#question").value.trim();
  if (!question) return problem(new Error("type the question to ask both graphs in the question box"));
  if (state.busy) return;
  const chosen = ["#pair-a", "#pair-b"].map((id) => state.graphs.find((a) => a.assistant_id === $(id).value));
  if (chosen.some((a) => !a)) return problem(new Error("choose a graph for each side"));
  clearProblem();
  state.busy = true;
  $("#ask").disabled = $("#pair-run").disabled = true;
  $("#pair").dataset.state = "running";
  try {
    await sideBySide(question, chosen, [$("#pair-left"), $("#pair-right")]);
    await loadThreads();
  } catch (error) {
    problem(error);
  }
  state.busy = false;
  $("#ask").disabled = $("#pair-run").disabled = false;
  $("#pair").dataset.state = "done";
}

// --- wiring ---------------------------------------------------------------------------------------------------
function toggleAuth(show) {
  const form = $("#auth");
  form.hidden = show === undefined ? !form.hidden : !show;
  $("#auth-toggle").setAttribute("aria-expanded", String(!form.hidden));
  if (!form.hidden) $("#auth-key").focus();
}

function openComparison(comparison) {
  for (const button of document.querySelectorAll(".comparison")) {
    button.setAttribute("aria-current", String(button.dataset.name === comparison.name));
  }
  showComparison($("#comparison-view"), comparison)
    .then(() => $("#comparison-view").scrollIntoView?.({ block: "start" })).catch(problem);
}

async function start() {
  clearProblem();
  try {
    await loadGraphs();
    await loadThreads();
    await listComparisons($("#comparisons"), openComparison);
    setStatus("idle", "idle");
    document.body.dataset.ready = "true";
  } catch (error) {
    problem(error);
  }
}

$("#ask-form").addEventListener("submit", ask);
$("#question").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) ask(event);
});
$("#new-session").addEventListener("click", newSession);
$("#pair-toggle").addEventListener("click", togglePair);
$("#pair-run").addEventListener("click", askBoth);
$("#thread-search").addEventListener("input", searchSoon);
$("#more-threads").addEventListener("click", () => loadThreads(true).catch(problem));
$("#more-turns").addEventListener("click", () => earlierTurns().catch(problem));
$("#auth-toggle").addEventListener("click", () => toggleAuth());
$("#auth").addEventListener("submit", (event) => {
  event.preventDefault();
  setCredentials($("#auth-header").value, $("#auth-key").value.trim());
  toggleAuth(false);
  start();
});
newSession();
start();
