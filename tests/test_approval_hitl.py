"""Approvals in LangChain's human-in-the-loop format (HumanInTheLoopMiddleware's request and decisions), batched
and per call: approve, edit, reject and respond; the edit's re-check; bad answers asked again with one line; the
old format still read with a DeprecationWarning."""

from __future__ import annotations

import io
import warnings
from contextlib import nullcontext
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from reactgraph.cli.approval_prompt import make_approver
from reactgraph.graph import build_react_graph
from reactgraph.nodes.approval import MAX_ASKS
from reactgraph.nodes.context import Context
from reactgraph.tools import ToolRegistrationError, ToolSession
from support.approval_tools import risky_gateway
from support.scripted import ScriptedChatModel, call, tool_reply

BATCHED = Context(reflection="rules", closing_check=False)
PER_CALL = Context(reflection="rules", closing_check=False, approval_mode="per_call")


def graph_of(ran: list[str], *calls: dict[str, Any]) -> tuple[Any, ScriptedChatModel]:
    """A ReAct graph whose model makes `calls` in one reply, then answers "Done."."""
    model = ScriptedChatModel.of(tool_reply("Working.", *calls), AIMessage("Done."))
    return build_react_graph(risky_gateway(ran), checkpointer=InMemorySaver(), model=model), model


def start(graph: Any, context: Context, thread: str = "t") -> tuple[Any, dict]:
    config = {"configurable": {"thread_id": thread}}
    return graph.invoke({"messages": [HumanMessage("go")]}, config, context=context), config


def pause_of(result: dict) -> Any:
    (pause,) = result["__interrupt__"]
    return pause


def steps(result: dict, node: str) -> list[tuple[str, str]]:
    return [(s["action"], s["status"]) for s in result["steps"] if s["node"] == node]


def results_seen(model: ScriptedChatModel) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in model.requests[-1]["messages"] if isinstance(m, ToolMessage)}


@pytest.fixture
def ran() -> list[str]:
    return []


# --- batched ---------------------------------------------------------------------------------------------------

def test_batched_decisions_in_order_approve_edit_reject_and_respond(ran):
    graph, model = graph_of(ran, call("delete_file", "c1", path="/a"), call("send_mail", "c2", to="bob"),
                            call("delete_file", "c3", path="/b"), call("send_mail", "c4", to="eve"),
                            call("lookup", "c5", topic="x"))
    paused, config = start(graph, BATCHED)
    value = pause_of(paused).value
    assert [a["name"] for a in value["action_requests"]] == ["delete_file", "send_mail", "delete_file", "send_mail"]
    assert ran == []
    result = graph.invoke(Command(resume={"decisions": [
        {"type": "approve"},
        {"type": "edit", "edited_action": {"name": "send_mail", "args": {"to": "carol"}}},
        {"type": "reject", "message": "keep /b"},
        {"type": "respond", "message": "Eve is on holiday; I told her myself."}]}), config, context=BATCHED)
    assert sorted(ran) == ["delete:/a", "lookup:x", "mail:carol"] and result["status"] == "answered"
    assert steps(result, "approve") == [("delete_file", "approved"), ("send_mail", "edited"),
                                        ("delete_file", "rejected"), ("send_mail", "responded")]
    seen = results_seen(model)
    assert seen["c4"].status == "success" and "Eve is on holiday; I told her myself." in seen["c4"].text
    assert "keep /b" in seen["c3"].text and seen["c3"].status == "error"
    assert ("send_mail", "responded") in steps(result, "act")


def test_a_run_whose_only_call_was_answered_by_a_person_is_answered_not_failed(ran):
    graph, _model = graph_of(ran, call("send_mail", "c1", to="bob"))
    _, config = start(graph, BATCHED)
    result = graph.invoke(Command(resume={"decisions": [{"type": "respond", "message": "sent by hand"}]}), config,
                          context=BATCHED)
    assert ran == [] and result["status"] == "answered" and steps(result, "act") == [("send_mail", "responded")]


def test_an_edit_goes_through_validation_again(ran):
    graph, _model = graph_of(ran, call("delete_file", "c1", path="/a"))
    _, config = start(graph, BATCHED)
    result = graph.invoke(Command(resume={"decisions": [
        {"type": "edit", "edited_action": {"name": "delete_file", "args": {"where": "/a"}}}]}), config,
        context=BATCHED)
    assert ran == [] and steps(result, "act") == [("delete_file", "invalid_args")]


def test_review_configs_carry_each_tools_allowed_decisions_and_others_are_refused(ran):
    graph, _model = graph_of(ran, call("pay", "c1", amount=5))
    paused, config = start(graph, BATCHED)
    assert pause_of(paused).value["review_configs"] == [{"action_name": "pay",
                                                         "allowed_decisions": ["approve", "reject"]}]
    again = graph.invoke(Command(resume={"decisions": [{"type": "respond", "message": "paid"}]}), config,
                         context=BATCHED)
    assert pause_of(again).value["error"] == "decision 1 (pay): respond is not allowed for pay (allowed: approve, " \
                                             "reject)"
    assert ran == [] and graph.get_state(config).next == ("approve",)  # still paused, nothing lost
    result = graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config, context=BATCHED)
    assert ran == ["pay:5"] and result["status"] == "answered"


@pytest.mark.parametrize(("answer", "problem"), [
    ({"decisions": [{"type": "approve"}]}, "1 decision(s) for 2 action request(s) (delete_file, send_mail): give "
                                           "one per request, in order"),
    ({"decisions": {"type": "approve"}}, "'decisions' must be a list, one decision per action request in order, "
                                         "not dict"),
    ({"decisions": [{"type": "approve"}, {"type": "ok"}]}, "decision 2 (send_mail): type 'ok' is not approve, "
                                                           "edit, reject or respond"),
    ({"decisions": [{"type": "approve"}, "approve"]}, "decision 2 (send_mail): a decision must be an object with "
                                                      "a 'type', not str"),
    ({"decisions": [{"type": "approve"}, {"type": "respond"}]}, "decision 2 (send_mail): respond needs message, "
                                                                "text (the call's result)"),
    ({"decisions": [{"type": "reject", "message": 3}, {"type": "approve"}]}, "decision 1 (delete_file): reject "
                                                                             "needs message, text"),
    ({"decisions": [{"type": "edit", "edited_action": {"args": {}}}, {"type": "approve"}]},
     "decision 1 (delete_file): edited_action's name must be a tool name"),
    ({"type": "approve"}, 'an answer must be {"decisions": [...]} with one decision per action request, in order, '
                          'not a single decision'),
    (42, 'an answer must be {"decisions": [...]} with one decision per action request, in order, not int'),
])
def test_a_bad_batched_answer_is_asked_again_with_one_line_and_nothing_is_lost(ran, answer, problem):
    graph, _model = graph_of(ran, call("delete_file", "c1", path="/a"), call("send_mail", "c2", to="bob"))
    first, config = start(graph, BATCHED)
    again = pause_of(graph.invoke(Command(resume=answer), config, context=BATCHED)).value
    assert again["error"].startswith(problem) and "\n" not in again["error"]
    assert again["action_requests"][0]["description"].startswith(f"The last answer was not understood: {problem}")
    assert again["action_requests"] != pause_of(first).value["action_requests"]  # the problem is shown …
    assert [a["args"] for a in again["action_requests"]] == [{"path": "/a"}, {"to": "bob"}]  # … the calls the same
    assert ran == [] and graph.get_state(config).next == ("approve",)
    result = graph.invoke(Command(resume={"decisions": [{"type": "approve"}] * 2}), config, context=BATCHED)
    assert sorted(ran) == ["delete:/a", "mail:bob"] and result["status"] == "answered"


# --- per call --------------------------------------------------------------------------------------------------

def test_per_call_asks_one_call_at_a_time_in_order_each_answered_with_one_decision(ran):
    graph, model = graph_of(ran, call("delete_file", "c1", path="/a"), call("lookup", "c2", topic="x"),
                            call("send_mail", "c3", to="bob"))
    paused, config = start(graph, PER_CALL)
    first = pause_of(paused)
    assert first.value == {"type": "tool_approval", "tool_call_id": "c1", "name": "delete_file",
                           "args": {"path": "/a"}, "description": "delete_file needs a person's approval for each "
                                                                  "call\n\nTool: delete_file\nArgs: {\"path\": \"/a\"}"}
    # As LangChain's per-call mode, its response_schema shows the decisions allowed, an edit pinned to the tool.
    (edit,) = [b for b in first.response_schema["oneOf"] if b["properties"]["type"] == {"const": "edit"}]
    action = edit["properties"]["edited_action"]["properties"]
    assert action["name"] == {"const": "delete_file"} and action["args"]["required"] == ["path"]
    assert [b["properties"]["type"]["const"] for b in first.response_schema["oneOf"]] == [
        "approve", "edit", "reject", "respond"]
    second = pause_of(graph.invoke(Command(resume={first.id: {"type": "approve"}}), config, context=PER_CALL))
    assert (second.value["tool_call_id"], second.value["name"]) == ("c3", "send_mail") and ran == []
    result = graph.invoke(Command(resume={"type": "respond", "message": "done by hand"}), config, context=PER_CALL)
    assert sorted(ran) == ["delete:/a", "lookup:x"] and result["status"] == "answered"
    assert steps(result, "approve") == [("delete_file", "approved"), ("send_mail", "responded")]
    assert "done by hand" in results_seen(model)["c3"].text


def test_a_per_call_edit_keeps_the_tool_and_is_checked_again(ran):
    graph, _model = graph_of(ran, call("delete_file", "c1", path="/a"))
    _, config = start(graph, PER_CALL)
    again = pause_of(graph.invoke(Command(resume={"type": "edit", "edited_action": {
        "name": "archive", "args": {"path": "/a"}}}), config, context=PER_CALL)).value
    assert again["error"] == ("the decision: an edit of one call keeps its tool: edited_action's name is "
                              "'archive', the call is delete_file's")
    result = graph.invoke(Command(resume={"type": "edit", "edited_action": {"name": "delete_file",
                                                                            "args": {"path": "/copy"}}}),
                          config, context=PER_CALL)
    assert ran == ["delete:/copy"] and steps(result, "approve") == [("delete_file", "edited")]


def test_per_call_bad_answers_are_asked_again_then_the_call_is_rejected(ran):
    graph, _model = graph_of(ran, call("pay", "c1", amount=9), call("delete_file", "c2", path="/a"))
    paused, config = start(graph, PER_CALL)
    assert [b["title"] for b in pause_of(paused).response_schema["oneOf"]] == ["ApproveDecision", "RejectDecision"]
    for answer, problem in [({"type": "edit", "edited_action": {"name": "pay", "args": {"amount": 1}}},
                             "the decision: edit is not allowed for pay (allowed: approve, reject)"),
                            ({"decisions": [{"type": "approve"}] * 2}, "2 decision(s) for 1 action request(s)"),
                            ({"type": "later"}, "the decision: type 'later' is not approve, edit, reject or respond"),
                            ("yes", "the answer: decision 'yes' is not approve, edit or reject")]:
        with pytest.warns(DeprecationWarning) if answer == "yes" else nullcontext():
            again = pause_of(graph.invoke(Command(resume=answer), config, context=PER_CALL)).value
        assert again["tool_call_id"] == "c1" and again["error"].startswith(problem), again["error"]
    second = pause_of(graph.invoke(Command(resume=[]), config, context=PER_CALL)).value  # the MAX_ASKS-th
    assert MAX_ASKS == 5 and second["tool_call_id"] == "c2" and "error" not in second
    result = graph.invoke(Command(resume={"type": "reject"}), config, context=PER_CALL)
    assert ran == [] and steps(result, "approve") == [("pay", "rejected"), ("delete_file", "rejected")]
    assert "no valid decision after 5 answers" in result["steps"][0]["observation"]


# --- the old format, for one release ---------------------------------------------------------------------------

@pytest.mark.parametrize("answer", [{"decision": "approve"}, "approve",
                                    {"c1": "approve", "c2": {"decision": "reject", "reason": "no"}}],
                         ids=["decision", "word", "by-call-id"])
def test_the_old_answers_still_work_with_a_deprecation_warning(ran, answer):
    graph, _model = graph_of(ran, call("delete_file", "c1", path="/a"), call("send_mail", "c2", to="bob"))
    _, config = start(graph, BATCHED)
    with pytest.warns(DeprecationWarning, match=r"old format .* deprecated .* answer \{\"decisions\""):
        result = graph.invoke(Command(resume=answer), config, context=BATCHED)
    assert "delete:/a" in ran and result["status"] == "answered"
    assert ("mail:bob" in ran) == (not isinstance(answer, dict) or "c2" not in answer)


def test_the_new_format_warns_of_nothing(ran):
    graph, _model = graph_of(ran, call("delete_file", "c1", path="/a"))
    _, config = start(graph, BATCHED)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config, context=BATCHED)
    assert ran == ["delete:/a"]


# --- the tools' settings and the clients -------------------------------------------------------------------------

def test_approval_decisions_are_checked_when_a_tool_is_registered(ran):
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    gateway = risky_gateway(ran)
    for bad in ((), ("approve", "ignore"), "approve"):
        with pytest.raises(ToolRegistrationError, match="approval_decisions must be some of approve, edit, reject"):
            gateway.register(echo, name="t", approval_decisions=bad)
    meta = gateway.register(echo, name="u", approval="always", approval_decisions=["approve", "reject"])
    assert meta.approval_decisions == ("approve", "reject")


def test_interrupt_on_lists_the_tools_that_ask_in_a_session(ran):
    gateway = risky_gateway(ran)
    asking = gateway.interrupt_on()
    assert {name: config["allowed_decisions"] for name, config in asking.items()} == {
        "delete_file": ["approve", "edit", "reject", "respond"], "send_mail": ["approve", "edit", "reject", "respond"],
        "pay": ["approve", "reject"]}
    # The description says what the graphs' approve step says: why the tool asks, then the call.
    assert asking["pay"]["description"](call("pay", amount=3), {}, None) == \
        "pay needs a person's approval for each call\n\nTool: pay\nArgs: {\"amount\": 3}"
    session = ToolSession.of(deny=["send_mail"], approval={"files": "never", "lookup": "always"})
    assert sorted(gateway.interrupt_on(session)) == ["lookup", "pay"]


def test_a_description_shows_control_and_bidi_characters_escaped_as_the_cli_shows_them(ran):
    from reactgraph.nodes.approval import hitl_request, tool_approval_request
    from reactgraph.tools.untrusted import terminal_safe

    # a model-written argument that would read "invoice.pdf" reversed on a page, and a problem quoting one
    argument, problem = "invoice\u202efdp.exe\u0085", "not JSON: \u2066\x9b2J"
    request = {"id": "c1", "name": "pay", "args": {"to": argument}, "reason": "pay needs a person's approval",
               "decisions": ["approve"]}
    shown = [hitl_request([request], problem)["action_requests"][0]["description"],
             tool_approval_request(request, problem)["description"],
             risky_gateway(ran).interrupt_on()["pay"]["description"](call("pay", to=argument), {}, None)]
    for description in shown:
        assert not any(c in description for c in "\u202e\u0085\u2066\x9b"), description
        assert "\\u202e" in description and "\\x85" in description and terminal_safe(description) == description
    assert "\\u2066" in shown[0] and "\\x9b" in shown[1]


def test_the_cli_approver_answers_both_shapes(ran):
    batched = {"action_requests": [{"name": "delete_file", "args": {}, "description": ""},
                                   {"name": "lookup", "args": {}, "description": ""}],
               "review_configs": [{"action_name": "delete_file", "allowed_decisions": ["approve", "reject"]},
                                  {"action_name": "lookup", "allowed_decisions": ["approve", "reject"]}]}
    per_call = {"type": "tool_approval", "tool_call_id": "c1", "name": "delete_file", "args": {}, "description": ""}
    files = make_approver(["files"], lambda name: ("files",) if name == "delete_file" else (), interactive=False)
    assert files(batched) == {"decisions": [{"type": "approve"},
                                            {"type": "reject", "message": "not among --approve files"}]}
    assert files(per_call) == {"type": "approve"}
    typed = iter(["s", "it is done"])
    answer = make_approver([], lambda name: (), interactive=True, ask=lambda prompt: next(typed), out=io.StringIO())
    assert answer(per_call) == {"type": "respond", "message": "it is done"}
