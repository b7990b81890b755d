// A minimal chat page on LangChain's React hook `useStream` (@langchain/langgraph-sdk/react), as LangChain's
// frontend docs write one: messages, the answer, and a human-in-the-loop request (LangChain's HITL format:
// action_requests / review_configs) with Approve, Edit and Reject. Bundled by browser_use_stream.mjs with esbuild;
// the service's URL is the page's ?api= parameter.
import React, { useState } from "react";
import { createRoot } from "react-dom/client";
import { useStream } from "@langchain/langgraph-sdk/react";

const apiUrl = new URLSearchParams(window.location.search).get("api");

function text(message) {
  return typeof message.content === "string" ? message.content : JSON.stringify(message.content);
}

function Approval({ request, config, decide }) {
  const [url, setUrl] = useState(request.args?.url ?? "");
  const allowed = config?.allowed_decisions ?? [];
  return (
    <div className="approval">
      <div className="action">{request.name} {JSON.stringify(request.args)}</div>
      <div className="description">{request.description}</div>
      {allowed.includes("approve") && <button id="approve" onClick={() => decide({ type: "approve" })}>Approve</button>}
      {allowed.includes("edit") && <>
        <input id="edit-url" value={url} onChange={(e) => setUrl(e.target.value)} />
        <button id="edit" onClick={() => decide({ type: "edit", edited_action: { name: request.name,
                                                                                 args: { ...request.args, url } } })}>
          Edit
        </button>
      </>}
      {allowed.includes("reject") &&
        <button id="reject" onClick={() => decide({ type: "reject", message: "a person said no" })}>Reject</button>}
    </div>
  );
}

function App() {
  const stream = useStream({ apiUrl, assistantId: "react", messagesKey: "messages" });
  const [question, setQuestion] = useState("");
  const hitl = stream.interrupt?.value;
  // an empty input beside the command, as agent-chat-ui resumes
  const decide = (decision) => stream.submit({}, { command: { resume: { decisions: [decision] } } });
  return (
    <main>
      <div id="messages">
        {stream.messages.map((m, i) => <div key={m.id ?? i} className={`message ${m.type}`}>{text(m)}</div>)}
      </div>
      {hitl?.action_requests && <div id="interrupt">
        {hitl.action_requests.map((request, i) =>
          <Approval key={i} request={request} config={hitl.review_configs?.[i]} decide={decide} />)}
      </div>}
      <div id="answer">{stream.values?.final_answer ?? ""}</div>
      <div id="state">{stream.isLoading ? "loading" : "ready"}</div>
      {stream.error && <div id="error">{String(stream.error?.message ?? stream.error)}</div>}
      <form onSubmit={(e) => {
        e.preventDefault();
        stream.submit({ messages: [{ type: "human", content: question }] });
        setQuestion("");
      }}>
        <input id="question" value={question} onChange={(e) => setQuestion(e.target.value)} />
        <button id="send" type="submit">Send</button>
      </form>
    </main>
  );
}

createRoot(document.getElementById("root")).render(<App />);
