"""Bounded requests, counted tokens, requests every OpenAI-compatible server understands.

The real langchain-openai client against the local OpenAI-compatible server (support/provider_server.py), through
the compiled graphs and the `reactgraph` command: what the server received (max_tokens, tool_choice, no null
content, which structured-output strategy), how many requests a failure cost, and the usage a run reports.
"""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph.graph import Context, build_plan_solve_graph, build_react_graph, build_reflexion_graph
from support.cli_env import run_in_process
from support.provider_server import ProviderServer, Reply, calls, empty_stream, error, slow, structured, text

MODEL = "openai:test-model"
VERDICT = {"enough_information": True, "tool_error": False, "need_other_tool": False, "repeated_call": False,
           "note": "The product is known.", "parts": ["the product"]}
SAMPLES = {"ReflectionVerdict": VERDICT, "Plan": {"steps": [{"goal": "Compute 6 * 7", "tool": "calculator"}],
                                                  "parts": ["6 * 7"]},
           "Evaluation": {"passed": True, "reason": "It answers."}, "Lesson": {"lesson": "Compute first."}}




def answering(body: dict) -> Reply:
    """A model for any graph: the schema asked for, one calculator call while no tool has answered, then 42."""
    if schema := (body.get("response_format") or {}).get("json_schema"):
        return structured(SAMPLES[schema["name"]])
    if body.get("tools") and not any(m["role"] == "tool" for m in body["messages"]):
        return calls(("calculator", {"expression": "6*7"}))
    return text("6 * 7 = 42.")


def run(graph, question: str = "What is 6 * 7?", **context):
    context.setdefault("closing_check", False)  # the requests counted are the ones under test
    return graph.invoke({"messages": [HumanMessage(question)]}, config={"configurable": {"thread_id": "t1"}},
                        context=Context(model=MODEL, **context))


# --- what every request says --------------------------------------------------------------------------------

@pytest.mark.parametrize("build", [build_react_graph, build_plan_solve_graph, build_reflexion_graph])
def test_every_request_is_bounded_offers_tools_with_tool_choice_auto_and_sends_no_null_content(provider, build):
    with ProviderServer(*[answering] * 20) as server:
        provider(server)
        result = run(build(), max_output_tokens=300)
    assert result["status"] in ("answered", "partial") and "42" in result["final_answer"]
    assert 2 <= len(server.requests) <= 8
    structured_calls = [r for r in server.requests if "response_format" in r]
    assert structured_calls and all(r["max_tokens"] == 150 for r in structured_calls)  # half for structured
    assert all(r["max_tokens"] == 300 for r in server.requests if "response_format" not in r)
    assert all("max_completion_tokens" not in r for r in server.requests)
    with_tools = [r for r in server.requests if r.get("tools")]
    assert with_tools and all(r["tool_choice"] == "auto" for r in with_tools)
    sent = [m for r in server.requests for m in r["messages"] if m["role"] == "assistant"]
    assert any(m.get("tool_calls") for m in sent) and all(m.get("content") is not None for m in sent)


def test_a_server_without_json_schema_gets_function_calling_from_then_on(provider):
    def no_json_schema(body: dict) -> Reply:
        if "response_format" in body:
            return error(400, "response_format of type json_schema is not supported")
        if (body.get("tool_choice") or {}) != "auto" and body.get("tools"):  # the verdict forced as a tool call
            return calls(("ReflectionVerdict", VERDICT))
        return answering(body)

    with ProviderServer(*[no_json_schema] * 10) as server:
        provider(server)
        result = run(build_react_graph())
    assert result["reflection"]["note"] == "The product is known." and "42" in result["final_answer"]
    kinds = ["json_schema" if "response_format" in r else r.get("tool_choice") for r in server.requests]
    assert kinds[0] == "auto" and kinds[1] == "json_schema"
    assert kinds[2] == "required" and server.tool_names(2) == ["ReflectionVerdict"]  # the form every server reads


def test_a_text_protocol_plan_is_asked_for_as_a_numbered_list_not_a_json_schema(provider):
    plan = "Parts: 6 * 7\nPlan:\n1. Compute 6 * 7 (tool: calculator)"
    with ProviderServer(text(plan), text("Final Answer: 6 * 7 = 42."), text("6 * 7 = 42.")) as server:
        provider(server)
        result = run(build_plan_solve_graph(), protocol="text")
    assert result["steps"][0]["status"] == "plan" and "42" in result["final_answer"]
    assert "response_format" not in server.requests[0] and "tools" not in server.requests[0]
    assert "a numbered list" in json.dumps(server.requests[0]["messages"])


# --- failures that cost a bounded number of requests ------------------------------------------------------

def test_a_timeout_at_temperature_0_is_sent_twice_at_most(provider):
    with ProviderServer(*[slow(3)] * 6) as server:
        provider(server, retries=3, timeout=0.3, node_retries=3)
        result = run(build_react_graph(), reflection="off")
    assert result["status"] == "failed" and len(server.requests) == 2
    assert result["final_answer"] == (f"model provider error: no reply from {server.openai_url} within 0.3s "
                                      "(gave up after 2 attempts)")


def test_a_server_error_that_says_the_request_is_bad_is_not_retried(provider):
    with ProviderServer(*[error(500, "Invalid request: 'messages' must be a non-empty list")] * 6) as server:
        provider(server, retries=3, node_retries=3)
        result = run(build_react_graph(), reflection="off")
    assert result["status"] == "failed" and len(server.requests) == 1
    assert result["final_answer"].startswith("model provider error: 500 Internal Server Error")


def test_a_plain_server_error_is_still_retried(provider):
    with ProviderServer(error(500, "upstream exploded"), text("Fine.")) as server:
        provider(server, retries=1)
        result = run(build_react_graph(), reflection="off")
    assert (result["status"], len(server.requests)) == ("answered", 2)


def stream(graph, **context) -> dict:
    context.setdefault("closing_check", False)  # the requests counted are the ones under test
    config = {"configurable": {"thread_id": "t1"}}
    list(graph.stream({"messages": [HumanMessage("hi")]}, config, context=Context(model=MODEL, **context),
                      stream_mode="messages"))
    return graph.get_state(config).values


def test_an_empty_stream_is_retried_once(provider):
    with ProviderServer(empty_stream(), text("Fine.")) as server:
        provider(server, node_retries=3)
        result = stream(build_react_graph(checkpointer=InMemorySaver()), reflection="off")
    assert (result["status"], result["final_answer"], len(server.requests)) == ("answered", "Fine.", 2)
    with ProviderServer(*[empty_stream()] * 4) as server:
        provider(server, node_retries=3)
        result = stream(build_react_graph(checkpointer=InMemorySaver()), reflection="off")
    assert result["status"] == "failed" and len(server.requests) == 2
    assert "No generations found in stream" in result["final_answer"]


@pytest.mark.parametrize("build", [build_plan_solve_graph, build_reflexion_graph])
def test_every_graph_ends_budget_exhausted_when_the_model_time_is_used_up(provider, build):
    def slowly(body: dict) -> Reply:
        reply = answering(body)
        reply.delay_s = 0.6
        return reply

    with ProviderServer(*[slowly] * 10) as server:
        provider(server)
        result = run(build(), max_model_seconds=0.5)
    assert result["status"] == "budget_exhausted" and result["budget"]["kind"] == "max_model_seconds"
    assert len(server.requests) <= 2 and "model-time budget of 0.5s" in result["final_answer"]


def test_the_model_time_budget_ends_the_run_budget_exhausted_with_what_was_gathered(provider):
    looking = slow(1.0, calls(("calculator", {"expression": "6*7"})))
    with ProviderServer(*[looking] * 6) as server:
        provider(server)
        result = run(build_react_graph(), reflection="off", max_iterations=10, max_model_seconds=1.5)
    assert result["status"] == "budget_exhausted" and result["budget"]["kind"] == "max_model_seconds"
    assert 1 <= len(server.requests) <= 2 and result["usage"]["model_seconds"] >= 1.0
    assert "model-time budget of 1.5s" in result["final_answer"] and "42" in result["final_answer"]


# --- every token counted ----------------------------------------------------------------------------------

def test_a_direct_answer_counts_the_tokens_the_server_reported_in_json_output(monkeypatch, capfd):
    with ProviderServer(text("Hello! How can I help?")) as server:
        done = run_in_process(monkeypatch, capfd, ["ask", "hi", "--json", "--store", "memory", "--model", MODEL,
                                                   "--reflection", "off"],
                              OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.openai_url)
    payload = json.loads(done.stdout)
    reported = server.usage_sent[0]
    assert payload["status"] == "answered" and payload["usage"]["total_tokens"] == reported["total_tokens"] > 0
    assert payload["usage"]["input_tokens"] == reported["prompt_tokens"]
    assert [s["tokens"] for s in payload["steps"]] == [reported["total_tokens"]]


def test_a_server_that_reports_no_usage_is_counted_by_the_estimate(provider, monkeypatch):
    with ProviderServer(text("Hello! How can I help?")) as server:
        provider(server)
        monkeypatch.setenv("REACTGRAPH_STREAM_USAGE", "0")
        result = stream(build_react_graph(checkpointer=InMemorySaver()), reflection="off")
    assert server.usage_sent == [] and result["usage"]["input_tokens"] > 0 and result["usage"]["output_tokens"] > 0
    assert result["steps"][-1]["tokens"] == result["usage"]["input_tokens"] + result["usage"]["output_tokens"]


def test_a_structured_reply_cut_at_max_tokens_is_a_parse_failure_whose_tokens_count(provider):
    long_plan = {"steps": [{"goal": f"Step number {i} of a long plan", "tool": "calculator"} for i in range(40)]}
    with ProviderServer(structured(long_plan), *[answering] * 6) as server:
        provider(server)
        result = run(build_plan_solve_graph(), max_output_tokens=64)
    plan = result["steps"][0]
    assert plan["status"] == "plan_fallback" and plan["tokens"] == server.usage_sent[0]["total_tokens"] > 0
    assert server.requests[0]["max_tokens"] == 32


# On the offline model on purpose: what it is tested for is the default model's own reply bound.
def test_the_offline_model_honours_max_tokens(monkeypatch):
    monkeypatch.delenv("REACTGRAPH_MODEL", raising=False)
    graph = build_react_graph()
    full = graph.invoke({"messages": [HumanMessage("What is LangGraph?")]}, context=Context(reflection="off"))
    cut = graph.invoke({"messages": [HumanMessage("What is LangGraph?")]},
                       context=Context(reflection="off", max_output_tokens=16))
    assert len(cut["final_answer"]) < len(full["final_answer"])
    replies = [m for m in cut["messages"] if m.type == "ai"]
    assert any(m.response_metadata.get("finish_reason") == "length" for m in replies)


def test_a_text_protocol_reply_in_the_wrong_format_counts_its_tokens(provider):
    with ProviderServer(text("Sure! Let me think about it."), text("Final Answer: 42.")) as server:
        provider(server)
        result = run(build_react_graph(), protocol="text", reflection="off")
    malformed = result["steps"][0]
    assert malformed["status"] == "format_error" and malformed["tokens"] == server.usage_sent[0]["total_tokens"] > 0
    assert result["usage"]["input_tokens"] + result["usage"]["output_tokens"] == sum(
        u["total_tokens"] for u in server.usage_sent)
