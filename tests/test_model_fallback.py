"""`Context.fallback_models`: when the model in use fails for good (after the retry policy), the next one in the
list answers, and the run says so (a `model_fallback` step, `active_model`, a span event).

Through the compiled graphs: the real langchain-openai client against the local OpenAI-compatible server (a
primary that fails for good, a fallback on the same server), scripted chat models that raise, and the schema
test model (`test`) as a fallback needing no key; the service's allow-list applies to each fallback; the CLI's
`--fallback-model offline` end to end.
"""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph.graph import Context, build_plan_solve_graph, build_react_graph, build_reflexion_graph
from reactgraph.nodes.context import InvalidContext
from reactgraph.service.run_request import PolicyRefusal, RunPolicy
from reactgraph.tools import default_gateway
from support.provider_server import ProviderServer, Reply, calls, closing_check, error, structured, text
from support.scripted import ScriptedChatModel

QUESTION = "What is 17 * 23?"


@pytest.fixture
def provider(monkeypatch):
    def use(server: ProviderServer, node_retries: int = 0) -> None:
        for name in [n for n in os.environ if n.startswith("REACTGRAPH_")]:
            monkeypatch.delenv(name)
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("REACTGRAPH_MODEL_RETRIES", "0")
        monkeypatch.setenv("REACTGRAPH_NODE_RETRIES", str(node_retries))
        monkeypatch.setenv("REACTGRAPH_NODE_RETRY_DELAY", "0.01")

    return use


SAMPLES = {"ReflectionVerdict": {"enough_information": True, "tool_error": False, "need_other_tool": False,
                                 "repeated_call": False, "note": "The product is known.", "parts": ["17 * 23"]},
           "Plan": {"steps": [{"goal": "Compute 17 * 23", "tool": "calculator"}], "parts": ["17 * 23"]},
           "Evaluation": {"passed": True, "reason": "It gives the product."}, "Lesson": {"lesson": "Compute first."},
           "ClosingCheck": {"parts": ["17 * 23"], "missing": []}}


def answering(body: dict) -> Reply:
    """A fallback on the local server for any graph: the schema asked for, one calculator call while no tool has
    answered, then the product."""
    if schema := (body.get("response_format") or {}).get("json_schema"):
        return structured(SAMPLES[schema["name"]])
    if body.get("tools") and not any(m["role"] == "tool" for m in body["messages"]):
        return calls(("calculator", {"expression": "17 * 23"}))
    return text("17 * 23 = 391.")


def switches(result: dict) -> list[dict]:
    return [step for step in result["steps"] if step["status"] == "model_fallback"]


def test_a_provider_that_fails_for_good_is_replaced_after_its_retries(provider):
    # The primary's 503 is transient: the node runs again once (the retry policy), then the fallback answers.
    with ProviderServer(error(503), error(503), text("17 * 23 = 391.")) as server:
        provider(server, node_retries=1)
        result = build_react_graph(default_gateway()).invoke(
            {"messages": [HumanMessage(QUESTION)]},
            context=Context(model="openai:down", fallback_models=["openai:up"], reflection="off",
                            closing_check=False))
    assert [request["model"] for request in server.requests] == ["down", "down", "up"]
    assert result["status"] == "answered" and result["final_answer"] == "17 * 23 = 391."
    (switch,) = switches(result)
    assert switch["node"] == "think" and switch["thought"].startswith("openai:down failed: ")
    assert "503" in switch["thought"] and switch["observation"] == "openai:up answers from here on"
    assert result["active_model"]["model"] == "openai:up"


def test_a_bad_key_is_not_retried_and_the_fallback_stands_in_for_the_rest_of_the_turn(provider):
    with ProviderServer(error(401, "invalid api key"), text("17 * 23 = 391."), closing_check(["17 * 23"])) as server:
        provider(server, node_retries=2)
        result = build_react_graph(default_gateway()).invoke(
            {"messages": [HumanMessage(QUESTION)]}, context=Context(model="openai:m", fallback_models=["openai:up"]))
        # no retry of a 401, and no later node (here the closing check) asks the failed model again
        assert [request["model"] for request in server.requests] == ["m", "up", "up"]
    assert result["status"] == "answered" and "391" in result["final_answer"]
    assert [s["node"] for s in switches(result)] == ["think"] and "401" in switches(result)[0]["thought"]


def test_fallbacks_are_tried_in_order_and_the_last_failure_ends_the_turn(monkeypatch):
    for name in [n for n in os.environ if n.startswith(("OPENAI_", "ANTHROPIC_"))]:
        monkeypatch.delenv(name)  # neither fallback can be loaded: each fails as an unreachable one would
    primary = ScriptedChatModel.of(RuntimeError("primary down"))
    graph = build_react_graph(default_gateway(), model=primary)
    result = graph.invoke({"messages": [HumanMessage(QUESTION)]},  # a spec named twice is tried once
                          context=Context(fallback_models=["openai:x", "anthropic:y", "openai:x"], reflection="off"))
    assert result["status"] == "failed"
    assert [s["observation"] for s in switches(result)] == ["openai:x answers from here on",
                                                            "anthropic:y answers from here on"]
    assert "OPENAI_API_KEY" in switches(result)[1]["thought"]  # why the first fallback failed, in one line
    assert "ANTHROPIC_API_KEY" in result["final_answer"]  # the turn ends with the last model's failure


@pytest.mark.parametrize("builder", [build_plan_solve_graph, build_reflexion_graph], ids=lambda b: b.__name__)
def test_every_graph_falls_back(builder, provider):
    primary = ScriptedChatModel.of(*[RuntimeError("primary down")] * 20)
    with ProviderServer(*[answering] * 20) as server:
        provider(server)
        result = builder(default_gateway(), model=primary).invoke(
            {"messages": [HumanMessage(QUESTION)]}, context=Context(fallback_models=["openai:up"]))
    assert result["status"] == "answered" and "391" in result["final_answer"]
    assert switches(result) and switches(result)[0]["observation"] == "openai:up answers from here on"
    assert len(primary.requests) == 1  # once the fallback took over, the failed model is not asked again this turn


def test_async_runs_fall_back_too(provider):
    primary = ScriptedChatModel.of(RuntimeError("primary down"))
    with ProviderServer(*[answering] * 10) as server:
        provider(server)
        result = asyncio.run(build_react_graph(default_gateway(), model=primary).ainvoke(
            {"messages": [HumanMessage(QUESTION)]}, context=Context(fallback_models=["openai:up"])))
    assert result["status"] == "answered" and len(switches(result)) == 1


def test_the_next_question_starts_with_the_primary_again():
    primary = ScriptedChatModel.of(RuntimeError("blip"), AIMessage("Hello again."))
    graph = build_react_graph(default_gateway(), model=primary, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    context = Context(fallback_models=["test"], reflection="off", closing_check=False)  # the schema test model
    first = graph.invoke({"messages": [HumanMessage(QUESTION)]}, config=config, context=context)
    assert len(switches(first)) == 1
    second = graph.invoke({"messages": [HumanMessage("Say hello.")]}, config=config, context=context)
    assert second["final_answer"] == "Hello again." and not switches(second)


def test_fallback_models_are_validated_like_model():
    assert Context(fallback_models=[" offline "]).fallback_models == ("offline",)
    for bad in (["x" * 201], [""], "offline", ["offline"] * 6):
        with pytest.raises(InvalidContext, match="fallback_models"):
            Context(fallback_models=bad)


def test_the_service_offers_only_its_models_as_fallbacks():
    policy = RunPolicy(models=("offline", "openai:small"))
    chosen = policy.run_context({"fallback_models": ["openai:small"]}, default_gateway())
    assert chosen["fallback_models"] == ["openai:small"]
    with pytest.raises(PolicyRefusal, match=r"'context.fallback_models\[1\]' 'openai:big' is not offered") as refused:
        policy.run_context({"fallback_models": ["offline", "openai:big"]}, default_gateway())
    assert refused.value.status == 403
    with pytest.raises(PolicyRefusal, match=r"context.fallback_models\[0\]") as refused:
        policy.run_context({"fallback_models": ["evil:x"]}, default_gateway())
    assert refused.value.status == 422


# The command as a user runs it: no key for the primary, the default offline model standing in, end to end.
def test_ask_fallback_model(monkeypatch, capfd, redis_url):  # run_in_process clears OPENAI_*
    from support.cli_env import run_in_process

    done = run_in_process(monkeypatch, capfd, ["ask", QUESTION, "--model", "openai:gpt-4o-mini", "--fallback-model",
                                               "offline", "--json"], REDIS_URL=redis_url)
    payload = json.loads(done.stdout)
    assert done.returncode == 0 and payload["status"] == "answered" and "391" in payload["answer"]
    (switch,) = switches(payload)
    assert "OPENAI_API_KEY is not set" in switch["thought"] and switch["observation"] == "offline answers from here on"
    done = run_in_process(monkeypatch, capfd, ["ask", QUESTION, "--fallback-model", "evil:x"], REDIS_URL=redis_url)
    assert done.returncode == 2 and "'--fallback-model'" in done.stderr and "evil:x" in done.stderr


def test_a_fallback_retries_only_the_failed_request_not_the_whole_node(provider):
    # think's first reply is empty, and its nudged second request fails for good: the fallback is asked that
    # second request, once; the first (already answered) is not asked again.
    primary = ScriptedChatModel.of(AIMessage(""), ProviderError401())
    with ProviderServer(text("17 * 23 = 391.")) as server:
        provider(server)
        result = build_react_graph(default_gateway(), model=primary).invoke(
            {"messages": [HumanMessage(QUESTION)]},
            context=Context(fallback_models=["openai:up"], reflection="off", closing_check=False))
    assert len(primary.requests) == 2 and len(server.requests) == 1
    system = server.requests[0]["messages"][0]["content"]
    assert "Your previous reply was empty" in (system if isinstance(system, str) else json.dumps(system))
    assert result["status"] == "answered" and result["final_answer"] == "17 * 23 = 391."
    assert [s["node"] for s in switches(result)] == ["think"] and result["active_model"]["model"] == "openai:up"


class ProviderError401(Exception):
    """A provider's refusal of the key: not transient, so the fallback takes over at once."""

    status_code = 401
