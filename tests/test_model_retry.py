"""A provider outage: transient model errors re-run the node (LangGraph's RetryPolicy), so a run survives it,
resumes from its checkpoint if the process dies meanwhile, and ends `failed` with one line when it outlasts
the retries. Scripted chat models; no network."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph.graph import (
    Context,
    ModelConfigError,
    build_plan_solve_graph,
    build_react_graph,
    build_reflexion_graph,
    is_transient_model_error,
    model_retry_policy,
)
from reactgraph.tools import ToolGateway
from support.scripted import ScriptedChatModel, call, notes_gateway, tool_reply

FAST = model_retry_policy(retries=2, delay_s=0)  # three attempts, no pause: the suite stays fast
RULES = Context(reflection="rules", closing_check=False)  # the requests counted are the retried calls


class ProviderError(Exception):
    """What a provider SDK raises: the HTTP status and the provider's error body on the exception."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = {"error": {"message": message}}


class ProcessKilled(BaseException):
    """Stands in for the process dying mid-run (not an Exception: nothing in the graph may handle it)."""


@pytest.fixture
def gateway() -> ToolGateway:
    return notes_gateway()


def ask(graph, question: str = "q", context: Context = RULES, thread: str = "t1"):
    return graph.invoke({"messages": [HumanMessage(question)]}, config={"configurable": {"thread_id": thread}},
                        context=context)


def nodes_of(result) -> list[tuple[str, str]]:
    return [(s["node"], s["status"]) for s in result["steps"]]


def test_a_model_that_fails_twice_with_transient_errors_then_answers_answers(gateway):
    # The timeout first: at temperature 0 a timeout is worth one more run of the node, not a third
    model = ScriptedChatModel.of(TimeoutError("read timed out"), ProviderError(503, "overloaded"),
                                 AIMessage("The answer."))
    result = ask(build_react_graph(gateway, model=model, model_retry=FAST))
    assert (result["status"], result["final_answer"]) == ("answered", "The answer.")
    assert len(model.requests) == 3 and nodes_of(result) == [("finalize", "answered")]


def test_an_outage_that_outlasts_the_retries_fails_the_run_with_one_line(gateway):
    model = ScriptedChatModel.of(*[ProviderError(503, "upstream overloaded")] * 3)
    result = ask(build_react_graph(gateway, model=model, model_retry=FAST))
    assert result["status"] == "failed" and len(model.requests) == 3
    assert result["final_answer"] == ("model provider error: 503 Service Unavailable from the provider: "
                                      "upstream overloaded (gave up after 3 attempts)")
    assert nodes_of(result) == [("think", "model_error"), ("finalize", "failed")]


@pytest.mark.parametrize("error", [ProviderError(401, "invalid api key"),
                                   ProviderError(400, "messages must not be empty"),
                                   ValueError("not a provider's fault")])
def test_a_permanent_error_fails_the_run_at_once(gateway, error):
    model = ScriptedChatModel.of(error, AIMessage("never reached"))
    result = ask(build_react_graph(gateway, model=model, model_retry=FAST))
    assert result["status"] == "failed" and len(model.requests) == 1
    assert str(error) in result["final_answer"] and "gave up" not in result["final_answer"]


def test_the_async_path_retries_the_same_way(gateway):
    model = ScriptedChatModel.of(ConnectionError("connection refused"), tool_reply("look", call("lookup", topic="x")),
                                 ProviderError(429, "slow down"), AIMessage("Done."))
    graph = build_react_graph(gateway, model=model, model_retry=FAST)
    result = asyncio.run(graph.ainvoke({"messages": [HumanMessage("q")]}, context=RULES))
    assert (result["status"], result["final_answer"]) == ("answered", "Done.") and len(model.requests) == 4
    assert [node for node, _ in nodes_of(result)] == ["act", "reflect", "finalize"]


def test_a_closing_call_that_keeps_failing_still_answers_from_the_records(gateway):
    model = ScriptedChatModel.of(tool_reply("look", call("lookup", topic="x")), *[TimeoutError("no reply")] * 3)
    result = ask(build_react_graph(gateway, model=model, model_retry=FAST), context=Context(reflection="rules",
                                                                                            max_iterations=1))
    # the tool round, then the closing call twice: at temperature 0 a timeout is retried once, not twice
    assert result["status"] == "failed" and len(model.requests) == 3
    assert "gave up after 2 attempts" in result["final_answer"] and "notes on x" in result["final_answer"]


def test_plan_and_solve_steps_survive_an_outage(gateway):
    plan = AIMessage("", tool_calls=[call("Plan", "p1", steps=[{"goal": "look x up", "tool": "lookup"}])])
    model = ScriptedChatModel.of(ProviderError(502, "bad gateway"), plan, ProviderError(500, "oops"),
                                 tool_reply("look", call("lookup", topic="x")), AIMessage("x is noted."),
                                 TimeoutError("no reply"), AIMessage("Final: x is noted."))
    result = ask(build_plan_solve_graph(gateway, model=model, model_retry=FAST))
    assert (result["status"], result["final_answer"]) == ("answered", "Final: x is noted.")
    assert [s["status"] for s in result["step_results"]] == ["done"] and len(model.requests) == 7


def test_reflexion_judges_and_reflects_through_an_outage(gateway):
    verdict = AIMessage("", tool_calls=[call("Evaluation", "e1", passed=True, reason="complete")])
    model = ScriptedChatModel.of(AIMessage("An answer."), ConnectionError("reset"), verdict)
    result = build_reflexion_graph(gateway, model=model, model_retry=FAST).invoke(
        {"messages": [HumanMessage("q")]}, context=RULES)
    assert result["evaluation"] == {"passed": True, "reason": "complete", "by": "model"}


def test_a_run_killed_while_waiting_out_an_outage_resumes_from_its_checkpoint(gateway):
    def killed(_messages):
        raise ProcessKilled

    saver = InMemorySaver()
    dying = build_react_graph(gateway, checkpointer=saver, model=ScriptedChatModel.of(
        tool_reply("look", call("lookup", topic="x")), ProviderError(503, "down"), killed), model_retry=FAST)
    with pytest.raises(ProcessKilled):
        ask(dying)
    config = {"configurable": {"thread_id": "t1"}}
    assert dying.get_state(config).next == ("think",)  # the first round is saved; think is still to run
    # A new process: a fresh graph on the same checkpoints, with the provider back.
    revived = build_react_graph(gateway, checkpointer=saver, model=ScriptedChatModel.of(AIMessage("Back: x.")))
    result = revived.invoke(None, config=config, context=RULES)
    assert (result["status"], result["final_answer"]) == ("answered", "Back: x.")
    assert [node for node, _ in nodes_of(result)] == ["act", "reflect", "finalize"]


def test_transient_means_rate_limits_overload_server_errors_timeouts_and_refused_connections():
    transient = [ProviderError(429, ""), ProviderError(500, ""), ProviderError(503, ""), ProviderError(529, ""),
                 ProviderError(408, ""), TimeoutError(), ConnectionRefusedError()]
    permanent = [ProviderError(400, ""), ProviderError(401, ""), ProviderError(404, ""), ValueError(), KeyError()]
    assert all(map(is_transient_model_error, transient))
    assert not any(map(is_transient_model_error, permanent))


def test_the_default_policy_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("REACTGRAPH_NODE_RETRIES", raising=False)
    monkeypatch.delenv("REACTGRAPH_NODE_RETRY_DELAY", raising=False)
    default = model_retry_policy()
    assert (default.max_attempts, default.initial_interval, default.jitter) == (3, 2.0, True)
    monkeypatch.setenv("REACTGRAPH_NODE_RETRIES", "5")
    monkeypatch.setenv("REACTGRAPH_NODE_RETRY_DELAY", "0.05")
    configured = model_retry_policy()
    assert (configured.max_attempts, configured.initial_interval, configured.jitter) == (6, 0.05, False)
    monkeypatch.setenv("REACTGRAPH_NODE_RETRIES", "often")
    with pytest.raises(ModelConfigError, match="REACTGRAPH_NODE_RETRIES must be a non-negative int"):
        model_retry_policy()
