"""Gateway tools inside LangChain's `create_agent` with `HumanInTheLoopMiddleware`: the middleware asks the person,
and the gateway takes its approval (`as_langchain_tools(approved_by=middleware)`), so each call is asked about
once; everything else the gateway checks still applies."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from support.approval_tools import risky_gateway
from support.scripted import ScriptedChatModel, call, tool_reply


def agent_of(ran: list[str], *calls: dict[str, Any], approved_by: bool = True, **hitl: Any) -> Any:
    gateway = risky_gateway(ran)
    middleware = HumanInTheLoopMiddleware(interrupt_on=hitl.pop("interrupt_on", None) or gateway.interrupt_on(),
                                          **hitl)
    model = ScriptedChatModel.of(tool_reply("On it.", *calls), AIMessage("Done."))
    tools = gateway.as_langchain_tools(approved_by=middleware if approved_by else None)
    return create_agent(model, tools, middleware=[middleware], checkpointer=InMemorySaver())


CONFIG = {"configurable": {"thread_id": "t"}}


def interrupts(result: dict) -> list[Any]:
    return list(result.get("__interrupt__") or ())


def tool_results(result: dict) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}


@pytest.fixture
def ran() -> list[str]:
    return []


def test_an_approved_call_runs_once_asked_once(ran):
    agent = agent_of(ran, call("delete_file", "c1", path="/a"), call("lookup", "c2", topic="x"))
    paused = agent.invoke({"messages": [HumanMessage("clean up")]}, CONFIG)
    (pause,) = interrupts(paused)
    (asked,) = pause.value["action_requests"]
    assert asked == {"name": "delete_file", "args": {"path": "/a"}, "description": "delete_file needs a person's "
                     'approval for each call\n\nTool: delete_file\nArgs: {"path": "/a"}'} and ran == []
    result = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), CONFIG)
    assert interrupts(result) == [] and sorted(ran) == ["delete:/a", "lookup:x"]
    assert tool_results(result)["c1"].status == "success" and tool_results(result)["c1"].text == "deleted /a"


def test_a_call_changes_no_tool_that_the_calls_beside_it_read(ran):
    """A host ToolNode runs a reply's calls on threads at once, and each call's input text is the repr of a
    ToolRuntime listing every tool: a first call that added an attribute to its tool broke the repr of the call
    beside it ("dictionary changed size during iteration", a run failed once in the suite). The tools are
    complete before their first call, so the race has nothing to race on."""
    gateway = risky_gateway(ran)
    tools = gateway.as_langchain_tools()
    before = {tool.name: set(vars(tool)) for tool in tools}
    model = ScriptedChatModel.of(tool_reply("On it.", call("lookup", "c1", topic="x"), call("lookup", "c2", topic="y"),
                                            call("delete_file", "c3", path="/a")), AIMessage("Done."))
    result = create_agent(model, tools).invoke({"messages": [HumanMessage("look up")]})
    assert [m.status for m in tool_results(result).values()] == ["success", "success", "error"]
    assert {tool.name: set(vars(tool)) for tool in tools} == before


def test_without_approved_by_the_gateway_still_refuses_what_the_middleware_approved(ran):
    agent = agent_of(ran, call("delete_file", "c1", path="/a"), approved_by=False)
    agent.invoke({"messages": [HumanMessage("clean up")]}, CONFIG)
    result = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), CONFIG)
    assert ran == [] and "needs a person's approval" in tool_results(result)["c1"].text


def test_an_edit_runs_the_edited_call_through_the_gateway_checks(ran):
    agent = agent_of(ran, call("delete_file", "c1", path="/a"), call("delete_file", "c2", path="/b"))
    agent.invoke({"messages": [HumanMessage("clean up")]}, CONFIG)
    result = agent.invoke(Command(resume={"decisions": [
        {"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": "/copy"}}},
        {"type": "edit", "edited_action": {"name": "delete_file", "args": {"where": "/b"}}}]}), CONFIG)
    assert ran == ["delete:/copy"]
    invalid = tool_results(result)["c2"]
    assert invalid.status == "error" and "where" in invalid.text  # validation ran again on the edited call


def test_reject_and_respond_never_reach_the_tool(ran):
    agent = agent_of(ran, call("delete_file", "c1", path="/a"), call("send_mail", "c2", to="bob"))
    agent.invoke({"messages": [HumanMessage("clean up")]}, CONFIG)
    result = agent.invoke(Command(resume={"decisions": [{"type": "reject", "message": "keep it"},
                                                        {"type": "respond", "message": "mailed by hand"}]}), CONFIG)
    assert ran == [] and tool_results(result)["c2"].text == "mailed by hand"


def test_per_call_mode_is_asked_once_per_call_too(ran):
    agent = agent_of(ran, call("send_mail", "c1", to="bob"), interrupt_mode="per_call")
    (pause,) = interrupts(agent.invoke({"messages": [HumanMessage("mail bob")]}, CONFIG))
    assert pause.value["type"] == "tool_approval" and ran == []
    result = agent.invoke(Command(resume={pause.id: {"type": "approve"}}), CONFIG)
    assert interrupts(result) == [] and ran == ["mail:bob"]


def test_a_tool_the_middleware_does_not_gate_still_needs_the_gateways_approval(ran):
    # The middleware asks only about delete_file: send_mail's call was never put to anyone, so it is not run.
    agent = agent_of(ran, call("delete_file", "c1", path="/a"), call("send_mail", "c2", to="bob"),
                     interrupt_on={"delete_file": True})
    agent.invoke({"messages": [HumanMessage("clean up")]}, CONFIG)
    result = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), CONFIG)
    assert ran == ["delete:/a"] and "needs a person's approval" in tool_results(result)["c2"].text
