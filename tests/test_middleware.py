"""LangChain agent middleware on the ReAct graph, held to `create_agent`: the same scripted model, tools and
middleware run through LangChain's `create_agent(..., middleware=[m])` and `build_react_graph(..., middleware=[m])`,
and the conversations they leave (each message's kind, text, calls and status) must match, or differ only as
docs/middleware.md declares (our closing check words an answer no tool result backs)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, NotRequired

import pytest
from langchain.agents import AgentState, create_agent
from langchain.agents import middleware as lc
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from reactgraph.graph import build_plan_solve_graph, build_reflexion_graph
from reactgraph.graph.middleware import MiddlewareError
from reactgraph.graph.react import build_react_graph
from reactgraph.testing import FunctionModel, ScriptedChatModel

CONTEXT = {"reflection": "rules"}  # no model call of ours between the agent's: the scripts are the agent's alone
NO_BACKING = "(Every tool call failed: no tool result backs this answer.)"
flaky_calls = {"n": 0}


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two numbers."""
    return a * b


@tool
def flaky(x: str) -> str:
    """Fails on every other call, starting with the first."""
    flaky_calls["n"] += 1
    if flaky_calls["n"] % 2:
        raise ValueError("boom")
    return f"ok {x}"


def calls(*specs: tuple[str, dict[str, Any]]) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"c{i}"}
                                             for i, (name, args) in enumerate(specs, 1)])


def shape(messages: Sequence[Any]) -> list[tuple[Any, ...]]:
    return [(type(m).__name__, str(m.text), [(c["name"], c["args"]) for c in getattr(m, "tool_calls", None) or []],
             m.status if isinstance(m, ToolMessage) else None) for m in messages]


def run_both(make: Callable[[], Any], replies: list[Any], tools: Sequence[Any] = (add,), question: str = "2+3?",
             resume: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The final states of create_agent and of our ReAct graph, each with a fresh middleware and model."""
    states = []
    for kind in ("create_agent", "react"):
        flaky_calls["n"] = 0
        model, config = ScriptedChatModel(replies=list(replies)), {"configurable": {"thread_id": kind}}
        build: Any = create_agent if kind == "create_agent" else build_react_graph
        graph = build(model=model, tools=list(tools), middleware=[make()], checkpointer=InMemorySaver())
        extra: dict[str, Any] = {} if kind == "create_agent" else {"context": CONTEXT}
        state = graph.invoke({"messages": [HumanMessage(question)]}, config, **extra)
        if resume is not None:
            state = graph.invoke(Command(resume=resume), config, **extra)
        states.append(state)
    return states[0], states[1]


def same_conversation(theirs: dict[str, Any], ours: dict[str, Any], *, our_closing_note: bool = False) -> None:
    expected = shape(theirs["messages"])
    got = shape(ours["messages"])
    if our_closing_note:  # declared: our closing check says when no tool result backs the answer
        assert got[-1][1].endswith(NO_BACKING) and ours["status"] == "no_answer"
        got = got[:-1]
    assert got == expected


CASES: dict[str, tuple[Callable[[], Any], list[Any], Sequence[Any], bool]] = {
    "ModelCallLimitMiddleware": (lambda: lc.ModelCallLimitMiddleware(run_limit=1, exit_behavior="end"),
                                 [calls(("add", {"a": 2, "b": 3})), AIMessage("5")], (add,), False),
    "ToolCallLimitMiddleware": (lambda: lc.ToolCallLimitMiddleware(run_limit=1),
                                [calls(("add", {"a": 2, "b": 3}), ("add", {"a": 1, "b": 1})), AIMessage("5")],
                                (add,), False),
    "ModelRetryMiddleware": (lambda: lc.ModelRetryMiddleware(max_retries=2, initial_delay=0.0, jitter=False),
                             [ValueError("transient"), AIMessage("5")], (add,), False),
    "ModelFallbackMiddleware": (lambda: lc.ModelFallbackMiddleware(ScriptedChatModel(replies=["from the fallback"])),
                                [ValueError("down for good")], (add,), False),
    "ToolRetryMiddleware": (lambda: lc.ToolRetryMiddleware(max_retries=2, initial_delay=0.0, jitter=False),
                            [calls(("flaky", {"x": "a"})), AIMessage("done")], (flaky,), False),
    "ToolErrorMiddleware": (lambda: lc.ToolErrorMiddleware(on_error=lambda exc, request: f"handled: {exc}"),
                            [calls(("flaky", {"x": "a"})), AIMessage("done")], (flaky,), True),
    "PIIMiddleware": (lambda: lc.PIIMiddleware("email", strategy="redact", apply_to_output=True),
                      [AIMessage("write to bob@example.com")], (add,), False),
    "SummarizationMiddleware": (
        lambda: lc.SummarizationMiddleware(model=ScriptedChatModel(replies=["SUMMARY"] * 4), trigger=("messages", 3),
                                           keep=("messages", 2)),
        [calls(("add", {"a": 2, "b": 3})), calls(("add", {"a": 5, "b": 3})), AIMessage("8")], (add,), False),
    "ContextEditingMiddleware": (lambda: lc.ContextEditingMiddleware(edits=[lc.ClearToolUsesEdit(trigger=1, keep=0)]),
                                 [calls(("add", {"a": 2, "b": 3})), AIMessage("5")], (add,), False),
    "LLMToolSelectorMiddleware": (
        lambda: lc.LLMToolSelectorMiddleware(model=ScriptedChatModel(replies=[{"tools": ["multiply"]}] * 3),
                                             max_tools=1),
        [calls(("multiply", {"a": 2, "b": 3})), AIMessage("6")], (add, multiply), False),
}


@pytest.mark.parametrize("name", list(CASES))
def test_langchains_middleware_leaves_the_conversation_create_agent_leaves(name: str) -> None:
    make, replies, tools, closing_note = CASES[name]
    theirs, ours = run_both(make, replies, tools)
    same_conversation(theirs, ours, our_closing_note=closing_note)


@pytest.mark.parametrize("decision", [{"type": "approve"},
                                      {"type": "edit", "edited_action": {"name": "add", "args": {"a": 10, "b": 1}}},
                                      {"type": "reject", "message": "no adding"}], ids=["approve", "edit", "reject"])
def test_human_in_the_loop_middleware_interrupts_and_resumes_as_in_create_agent(decision: dict[str, Any]) -> None:
    def make() -> Any:
        return lc.HumanInTheLoopMiddleware(interrupt_on={"add": True})

    replies = [calls(("add", {"a": 2, "b": 3})), AIMessage("done")]
    asked = []
    for kind in ("create_agent", "react"):
        model, config = ScriptedChatModel(replies=list(replies)), {"configurable": {"thread_id": kind}}
        graph: Any = (create_agent(model=model, tools=[add], middleware=[make()], checkpointer=InMemorySaver())
                      if kind == "create_agent" else
                      build_react_graph(tools=[add], model=model, middleware=[make()], checkpointer=InMemorySaver()))
        extra = {} if kind == "create_agent" else {"context": CONTEXT}
        first = graph.invoke({"messages": [HumanMessage("2+3?")]}, config, **extra)
        asked.append([interrupt.value for interrupt in first["__interrupt__"]])
    assert asked[0] == asked[1]
    theirs, ours = run_both(make, replies, resume={"decisions": [decision]})
    same_conversation(theirs, ours, our_closing_note=decision["type"] == "reject")


# --- a user's own middleware, one of each hook kind ---------------------------------------------------------

def recording_middleware(log: list[str]) -> list[Any]:
    @lc.before_agent
    def opening(state: Any, runtime: Any) -> None:
        log.append("before_agent")

    @lc.before_model
    def counting(state: Any, runtime: Any) -> None:
        log.append("before_model")

    @lc.after_model
    def checking(state: Any, runtime: Any) -> None:
        log.append("after_model")

    @lc.after_agent
    def closing(state: Any, runtime: Any) -> None:
        log.append("after_agent")

    @lc.wrap_model_call
    def around_model(request: Any, handler: Any) -> Any:
        log.append(f"wrap_model_call tools={[t.name for t in request.tools if not isinstance(t, dict)]}")
        return handler(request)

    @lc.wrap_tool_call
    def around_tool(request: Any, handler: Any) -> Any:
        log.append(f"wrap_tool_call {request.tool_call['name']}{request.tool_call['args']}")
        result = handler(request)
        log.append(f"tool said {result.content}")
        return result

    @lc.dynamic_prompt
    def prompt(request: Any) -> str:
        log.append("dynamic_prompt")
        return "Answer in one word."

    return [opening, counting, checking, closing, around_model, around_tool, prompt]


def test_each_hook_kind_runs_where_and_when_create_agent_runs_it() -> None:
    replies = [calls(("add", {"a": 2, "b": 3})), AIMessage("five")]
    logs: list[list[str]] = []
    models = []
    for kind in ("create_agent", "react"):
        log: list[str] = []
        model = ScriptedChatModel(replies=list(replies))
        if kind == "create_agent":
            graph: Any = create_agent(model=model, tools=[add], middleware=recording_middleware(log))
            graph.invoke({"messages": [HumanMessage("2+3?")]})
        else:
            graph = build_react_graph(tools=[add], model=model, middleware=recording_middleware(log))
            graph.invoke({"messages": [HumanMessage("2+3?")]}, context=CONTEXT)
        logs.append(log)
        models.append(model)
    assert logs[1] == logs[0]
    assert "wrap_tool_call add{'a': 2, 'b': 3}" in logs[1] and "tool said 5" in logs[1]
    # The dynamic prompt is the agent's system prompt in both: it replaces ours, as it replaces create_agent's
    # (the requests of our own closing check are not the agent's request: no middleware wraps them).
    for model in models:
        agents = [request for request in model.requests if request.purpose in (None, "think")]
        assert len(agents) == 2 and all(request.messages[0].text == "Answer in one word." for request in agents)


def test_the_hooks_run_under_ainvoke_too_and_an_async_only_hook_is_refused_under_invoke() -> None:
    log: list[str] = []

    @lc.before_model
    async def awaited(state: Any, runtime: Any) -> None:
        log.append("async before_model")

    model = ScriptedChatModel(replies=[AIMessage("done")])
    graph = build_react_graph(tools=[add], model=model, middleware=[awaited])
    state = asyncio.run(graph.ainvoke({"messages": [HumanMessage("hi")]}, context=CONTEXT))
    assert state["status"] == "answered" and log == ["async before_model"]
    with pytest.raises(MiddlewareError, match=r"awaited\.before_model is defined only as a coroutine"):
        build_react_graph(tools=[add], model=ScriptedChatModel(replies=["x"]), middleware=[awaited]).invoke(
            {"messages": [HumanMessage("hi")]}, context=CONTEXT)


class Flagged(AgentState):
    flagged: NotRequired[bool]


class FlagAndStop(lc.AgentMiddleware):
    """A middleware with a state field of its own that ends the loop before any model call."""

    state_schema = Flagged

    @lc.hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return {"flagged": True, "jump_to": "end", "messages": [AIMessage("stopped by policy")]}


def test_a_middlewares_state_field_joins_the_state_and_its_jump_to_end_ends_the_loop() -> None:
    theirs, ours = run_both(FlagAndStop, [AIMessage("never asked")])
    same_conversation(theirs, ours)
    assert theirs["flagged"] is True and ours["flagged"] is True
    assert ours["final_answer"] == "stopped by policy"


def test_arguments_a_wrapper_changes_are_checked_against_the_tools_schema_before_the_tool_runs() -> None:
    ran = []

    @tool
    def echo(n: int) -> str:
        """Echo a number."""
        ran.append(n)
        return str(n)

    @lc.wrap_tool_call
    def garble(request: Any, handler: Any) -> Any:
        return handler(request.override(tool_call={**request.tool_call, "args": {"n": "not a number"}}))

    model = ScriptedChatModel(replies=[calls(("echo", {"n": 1})), AIMessage("done")])
    state = build_react_graph(tools=[echo], model=model, middleware=[garble]).invoke(
        {"messages": [HumanMessage("echo 1")]}, context=CONTEXT)
    result = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert ran == [] and result.status == "error" and "n" in result.text


@pytest.mark.parametrize(("middleware", "message"), [
    ([object()], r"middleware= holds a object: give LangChain AgentMiddleware"),
    ([lc.ModelCallLimitMiddleware(run_limit=1), lc.ModelCallLimitMiddleware(run_limit=2)],
     "two middleware are named 'ModelCallLimitMiddleware'"),
])
def test_a_middleware_list_the_graph_cannot_take_is_refused_in_one_line(middleware: list[Any], message: str) -> None:
    with pytest.raises(MiddlewareError, match=message):
        build_react_graph(tools=[add], model=ScriptedChatModel(replies=["x"]), middleware=middleware)


# --- Plan-and-Solve and Reflexion take the same list --------------------------------------------------------

def hook_log_middleware(log: list[str]) -> list[Any]:
    """The recording middleware's model and tool hooks (a paradigm's own turn hooks are tested above)."""
    return [m for m in recording_middleware(log) if m.name in ("counting", "checking", "around_model", "around_tool")]


def scripted_by_purpose(log: list[str]) -> FunctionModel:
    """The agent's request (think, or a plan's step) calls add once, then answers; the graph's own requests
    (plan, answer, evaluate, check) answer as a capable model would."""
    def reply(messages: list[Any], info: Any) -> Any:
        log.append(f"model {info.purpose}")
        if info.purpose == "plan":
            return {"steps": ["add 2 and 3"]}
        if info.purpose == "evaluate":
            return {"passed": True, "reason": "the tool's sum answers it"}
        if info.purpose in ("think", "step") and not any(isinstance(m, ToolMessage) for m in messages):
            return calls(("add", {"a": 2, "b": 3}))
        return AIMessage("2 + 3 = 5")
    return FunctionModel(function=reply)


def test_plan_and_solve_wraps_each_steps_request_and_its_tool_calls() -> None:
    log: list[str] = []
    graph = build_plan_solve_graph(tools=[add], model=scripted_by_purpose(log), middleware=hook_log_middleware(log))
    state = graph.invoke({"messages": [HumanMessage("2+3?")]}, context=CONTEXT)
    assert state["status"] == "answered"
    agent_round = ["before_model", "wrap_model_call tools=['add']", "model step", "after_model"]
    assert log[:1] == ["model plan"]  # the plan is the graph's own request: no middleware sees it
    assert log[1:11] == [*agent_round, "wrap_tool_call add{'a': 2, 'b': 3}", "tool said 5", *agent_round]
    assert not any(entry.startswith("wrap_model_call") for entry in log[11:])  # nor the solver's, the check


def test_reflexion_runs_the_middleware_in_each_trial_and_carries_their_state_fields() -> None:
    log: list[str] = []
    limit = lc.ModelCallLimitMiddleware(thread_limit=10)
    graph = build_reflexion_graph(tools=[add], model=scripted_by_purpose(log),
                                  middleware=[*hook_log_middleware(log), limit])
    state = graph.invoke({"messages": [HumanMessage("2+3?")]}, context=CONTEXT)
    assert state["status"] == "answered"
    assert log.count("wrap_tool_call add{'a': 2, 'b': 3}") == 1 and log.count("wrap_model_call tools=['add']") == 2
    assert state["thread_model_call_count"] == 2  # the trial's count, taken back into the run's state


def test_the_todo_list_middlewares_tool_sets_its_state_field_as_in_create_agent() -> None:
    todos = [{"content": "add the numbers", "status": "in_progress"}]
    theirs, ours = run_both(lc.TodoListMiddleware, [calls(("write_todos", {"todos": todos})), AIMessage("done")])
    same_conversation(theirs, ours)
    assert ours["todos"] == theirs["todos"] == todos
