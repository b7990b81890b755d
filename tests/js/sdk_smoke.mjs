// LangChain's JS client (@langchain/langgraph-sdk) against `reactgraph serve`: what a JS program written for
// `langgraph dev` calls. Run by tests/test_js_clients.py, which starts the service and a loopback page server:
//   node sdk_smoke.mjs SERVICE_URL PAGE_URL
// Prints one JSON object of what the client saw; the pytest test asserts on it (so the checks live in one place).
import { Client } from "@langchain/langgraph-sdk";

const [serviceUrl, pageUrl] = process.argv.slice(2);
const client = new Client({ apiUrl: serviceUrl, defaultHeaders: {} });
const seen = {};

async function collect(threadId, input, options = {}) {
  const parts = [];
  const stream = client.runs.stream(threadId, "react", { input, ...options });
  for await (const part of stream) parts.push(part);
  return parts;
}

const ask = (question) => ({ messages: [{ role: "human", content: question }] });
const lastValues = (parts) => parts.filter((p) => p.event === "values").at(-1)?.data;
const approvals = (values) => (values.steps ?? []).filter((s) => s.node === "approve").map((s) => [s.action, s.status]);

async function pauseOn(path) {
  // a new thread asks for one http_get of the loopback page; the run stops at the approval
  const thread = await client.threads.create();
  const parts = await collect(thread.thread_id, ask(`Fetch ${pageUrl}${path}`), { streamMode: ["values", "updates"] });
  const state = await client.threads.getState(thread.thread_id);
  return { thread, parts, state };
}

async function resume(threadId, decision) {
  const parts = await collect(threadId, null, {
    command: { resume: { decisions: [decision] } }, streamMode: ["values", "messages-tuple"],
  });
  const values = lastValues(parts);
  return { status: values?.status, answer: values?.final_answer ?? "", approvals: approvals(values ?? {}),
           thread: (await client.threads.get(threadId)).status };
}

// assistants: the graphs, found as langgraph dev's clients find them
seen.assistants = (await client.assistants.search({ limit: 10 })).map((a) => a.graph_id).sort();

// a question answered, streamed as values + messages-tuple (what LangChain's JS examples ask for)
{
  const thread = await client.threads.create();
  const parts = await collect(thread.thread_id, ask("计算 2 + 3 等于多少"), { streamMode: ["values", "messages-tuple"] });
  const tuples = parts.filter((p) => p.event === "messages");
  seen.question = {
    events: [...new Set(parts.map((p) => p.event))],
    answer: lastValues(parts)?.final_answer,
    tuplesWellFormed: tuples.length > 0 && tuples.every((p) => Array.isArray(p.data) && p.data.length === 2
                                                              && p.data[0].type && p.data[1].langgraph_node),
    threadStatus: (await client.threads.get(thread.thread_id)).status,
  };
}

// the `messages` mode, as LangChain's older JS clients ask for it
{
  const thread = await client.threads.create();
  const parts = await collect(thread.thread_id, ask("现在几点了？"), { streamMode: "messages" });
  seen.messagesMode = [...new Set(parts.map((p) => p.event))].sort();
}

// an interrupt read back (from the stream and from the thread's state), then approve / edit / reject
{
  const { thread, parts, state } = await pauseOn("/approved");
  const streamed = parts.filter((p) => p.event === "updates" && p.data.__interrupt__).flatMap((p) => p.data.__interrupt__);
  const inValues = parts.filter((p) => p.event === "values" && p.data.__interrupt__).flatMap((p) => p.data.__interrupt__);
  seen.interrupt = {
    streamed: streamed.map((i) => i.value),
    inValues: inValues.map((i) => i.value),
    inState: state.interrupts.map((i) => i.value),
    inTasks: state.tasks.flatMap((t) => t.interrupts ?? []).map((i) => i.value),
    next: state.next,
    threadStatus: (await client.threads.get(thread.thread_id)).status,
  };
  seen.approve = await resume(thread.thread_id, { type: "approve" });
}
{
  const { thread } = await pauseOn("/as-asked");
  seen.edit = await resume(thread.thread_id, {
    type: "edit", edited_action: { name: "http_get", args: { url: `${pageUrl}/as-edited` } },
  });
  // the offline model, still reading its question, asks for the original page again: a person turns it down
  const again = await client.threads.getState(thread.thread_id);
  seen.editAskedAgain = again.interrupts.flatMap((i) => i.value.action_requests.map((r) => r.args.url));
  if (seen.editAskedAgain.length) seen.editThen = await resume(thread.thread_id, { type: "reject", message: "done" });
}
{
  const { thread } = await pauseOn("/rejected");
  seen.reject = await resume(thread.thread_id, { type: "reject", message: "not that page" });
}

console.log(JSON.stringify(seen));
