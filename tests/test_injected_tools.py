"""LangChain tools whole: injected arguments (`InjectedToolCallId`, `InjectedState`, `InjectedStore`,
`ToolRuntime`) hidden from the model and filled in by the gateway, `content_and_artifact` artifacts kept, and
`build_*_graph(tools=[...])` as LangChain users write it — through the compiled graphs and LangChain's own
standard tool tests."""

from __future__ import annotations

import functools
from typing import Annotated, Any

import pytest
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.prebuilt import InjectedState, InjectedStore
from langgraph.store.memory import InMemoryStore

from reactgraph.graph import build_plan_solve_graph, build_react_graph
from reactgraph.tools import ToolGateway
from support.scripted import ScriptedChatModel, call, tool_reply
from support.standard_tool_suites import standard_tool_suites


@tool
def whoami(question: str, this_call: Annotated[str, InjectedToolCallId]) -> str:
    """Say which tool call this is.

    Args:
        question: What to answer.
    """
    return f"call {this_call}: {question}"


@tool
def count_messages(unit: str, messages: Annotated[list, InjectedState("messages")]) -> str:
    """Count the conversation's messages.

    Args:
        unit: The word to count in.
    """
    return f"{len(messages)} {unit}"


@tool
def recall(key: str, store: Annotated[Any, InjectedStore()]) -> str:
    """Read a remembered value.

    Args:
        key: The value's key.
    """
    item = store.get(("notes",), key) if store is not None else None
    return str(item.value["text"]) if item else "nothing remembered"


@tool
def runtime_facts(topic: str, runtime: ToolRuntime) -> str:
    """Report what the runtime offers.

    Args:
        topic: Any topic.
    """
    model = getattr(runtime.context, "model", None)
    runtime.stream_writer({"progress": topic})
    return f"{topic}: call={runtime.tool_call_id} messages={len(runtime.state.get('messages', []))} model={model}"


@tool(response_format="content_and_artifact")
def table(rows: int) -> tuple[str, dict]:
    """Build a table.

    Args:
        rows: How many rows.
    """
    return f"a table of {rows} rows", {"rows": list(range(rows))}


INJECTED = [whoami, count_messages, recall, runtime_facts, table]


def ask(graph) -> dict:
    return graph.invoke({"messages": [HumanMessage("use the tools")]}, {"configurable": {"thread_id": "inj"}},
                        context={"reflection": "off"})


def test_the_model_sees_no_injected_argument_and_the_tools_get_them_from_the_run():
    model = ScriptedChatModel.of(
        tool_reply("all of them", call("whoami", "call-A", question="who", this_call="forged"),
                   call("count_messages", "call-B", unit="messages"), call("recall", "call-C", key="colour"),
                   call("runtime_facts", "call-D", topic="t")),
        AIMessage("done"))
    store = InMemoryStore()
    store.put(("notes",), "colour", {"text": "teal"})
    graph = build_react_graph(tools=INJECTED, model=model, store=store)
    result = ask(graph)
    schemas = {t["function"]["name"]: t["function"]["parameters"]["properties"] for t in model.requests[0]["tools"]}
    assert schemas["whoami"].keys() == {"question"} and schemas["count_messages"].keys() == {"unit"}
    assert schemas["recall"].keys() == {"key"} and schemas["runtime_facts"].keys() == {"topic"}
    answers = {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}
    assert answers["call-A"].text == "call call-A: who"  # the model's forged call_id was not taken
    assert answers["call-B"].text == "2 messages"  # the question and the reply with the calls
    assert answers["call-C"].text == "teal"
    assert answers["call-D"].text.startswith("t: call=call-D messages=2 model=")  # the run's Context
    assert all(m.status == "success" for m in answers.values())


def test_an_artifact_stays_on_the_tool_message_and_the_model_reads_the_content():
    model = ScriptedChatModel.of(tool_reply("a table", call("table", "call-T", rows=3)), AIMessage("done"))
    result = ask(build_react_graph([table], model=model))  # a list where the gateway goes: the tools
    (message,) = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert message.text == "a table of 3 rows" and message.artifact == {"rows": [0, 1, 2]}
    assert message.response_metadata["gateway"]["status"] == "ok"


def test_tools_go_to_every_builder_as_langchain_users_write_them():
    graph = build_plan_solve_graph(tools=[whoami])
    assert graph is not None
    with pytest.raises(TypeError, match="not both"):
        build_react_graph(ToolGateway(), tools=[whoami])
    with pytest.raises(TypeError, match="ToolGateway or a list of tools"):
        build_react_graph("calculator")  # type: ignore[arg-type]


def test_bad_arguments_are_still_the_gateways_invalid_args():
    model = ScriptedChatModel.of(tool_reply("oops", call("count_messages", "call-X", unit=["not", "a", "string"])),
                                 AIMessage("done"))
    result = ask(build_react_graph(tools=INJECTED, model=model))
    (message,) = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert message.status == "error" and message.response_metadata["gateway"]["status"] == "invalid_args"


# -- LangChain's standard tool tests over the gateway's versions of these tools ---------------------------------

_EXAMPLES = {"whoami": {"question": "who"}, "count_messages": {"unit": "messages"}, "recall": {"key": "colour"},
             "runtime_facts": {"topic": "t"}, "table": {"rows": 2}}


@functools.cache
def _exported() -> dict[str, BaseTool]:
    return {t.name: t for t in ToolGateway(INJECTED).as_langchain_tools()}


# count_messages reads the graph state, which a call from outside a graph has not: unit tests only
standard_tool_suites(globals(), _exported, {name: (lambda args=args: dict(args)) for name, args in _EXAMPLES.items()},
                     unit_only=["count_messages"])


def test_a_state_reading_tool_called_outside_a_graph_is_refused_in_one_line_not_counted_as_a_failure():
    exported = ToolGateway(INJECTED).as_langchain_tools()
    counter = next(t for t in exported if t.name == "count_messages")
    for _ in range(3):  # past the breaker's threshold: still the same refusal, never "circuit open"
        message = counter.invoke({"name": "count_messages", "args": {"unit": "m"}, "id": "x", "type": "tool_call"})
        assert message.status == "error" and "reads the graph state (messages: InjectedState)" in message.text


def test_gateway_tools_inside_create_agent_get_the_host_graphs_runtime_and_call_id():
    """Exported with `as_langchain_tools()` into LangChain's `create_agent`, a tool with injected arguments gets
    them from the host's `ToolNode` (its state, context, store, the call's id), still through the gateway."""
    from langchain.agents import create_agent
    from langchain_core.utils.function_calling import convert_to_openai_tool

    model = ScriptedChatModel.of(
        tool_reply("all of them", call("whoami", "call-A", question="who"), call("count_messages", "call-B",
                                                                                  unit="messages"),
                   call("recall", "call-C", key="colour"), call("runtime_facts", "call-D", topic="t")),
        AIMessage("done"))
    store = InMemoryStore()
    store.put(("notes",), "colour", {"text": "teal"})
    tools = ToolGateway(INJECTED).as_langchain_tools()
    agent = create_agent(model, tools, store=store)
    result = agent.invoke({"messages": [HumanMessage("use the tools")]})
    bound = [convert_to_openai_tool(t)["function"] for t in model.requests[0]["tools"]]  # what the model is sent
    assert {f["name"]: set(f["parameters"]["properties"]) for f in bound} == {
        "whoami": {"question"}, "count_messages": {"unit"}, "recall": {"key"}, "runtime_facts": {"topic"},
        "table": {"rows"}}
    answers = {m.tool_call_id: m.text for m in result["messages"] if isinstance(m, ToolMessage)}
    assert answers == {"call-A": "call call-A: who", "call-B": "2 messages", "call-C": "teal",
                       "call-D": "t: call=call-D messages=2 model=None"}
