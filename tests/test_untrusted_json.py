"""JSON nested deeper than Python's parser goes (it raises RecursionError, not ValueError) and values that are JSON
but not what was stored, from each place the product reads untrusted JSON: a tool's output, a model's reply, Redis.
Each is read as text or refused with a warning; none stops a run or a tool's calls."""

from __future__ import annotations

import logging

import pytest
import redis
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph.graph import Context, build_plan_solve_graph, build_react_graph
from reactgraph.models.structured_output import MAX_OBJECT_STARTS, TolerantJsonParser
from reactgraph.testing import FunctionModel, RequestInfo, ScriptedChatModel
from reactgraph.tools import ToolGateway
from reactgraph.tools.resilience import RedisBreakerStore

# Past the parser's ~1,000 levels: an object 2,000 deep (8,000 characters: the tests raise the observation budget
# from 4,000) and an array 4,000 deep (the default budget's length)
DEEP_OBJECT = '{"":' * 2000 + "1" + "}" * 2000
DEEP_ARRAY = "[" * 4000


def deep_object() -> str:
    """A tool whose output is a JSON object nested 2,000 deep."""
    return DEEP_OBJECT


def deep_array() -> str:
    """A tool whose output is 4,000 opening brackets."""
    return DEEP_ARRAY


def run(graph, question: str = "go", **context):
    return graph.invoke({"messages": [HumanMessage(question)]}, config={"configurable": {"thread_id": "t"}},
                        context=Context(**context))


@pytest.mark.parametrize("tool", [deep_object, deep_array])
def test_a_tools_deeply_nested_output_is_judged_as_text_by_the_rules(tool):
    model = ScriptedChatModel.of(AIMessage("", tool_calls=[{"name": tool.__name__, "args": {}, "id": "c1"}]),
                                 AIMessage("done"))
    graph = build_react_graph(ToolGateway([tool]), checkpointer=InMemorySaver(), model=model)
    result = run(graph, reflection="rules", observation_budget=20_000)
    assert result["status"] == "answered" and result["final_answer"] == "done"
    assert result["reflection"] is not None and not result["reflection"]["tool_error"]


def test_plan_and_solve_reads_a_deeply_nested_step_result_as_text():
    def reply(messages, info: RequestInfo):
        if info.purpose == "plan":
            return {"steps": [{"goal": "fetch the data", "tool": "deep_object"}], "parts": ["the data"]}
        if info.purpose == "step" and not any(m.type == "tool" for m in messages):
            return AIMessage("", tool_calls=[{"name": "deep_object", "args": {}, "id": "c1"}])
        return "the data is nested"
    graph = build_plan_solve_graph(ToolGateway([deep_object]), checkpointer=InMemorySaver(),
                                   model=FunctionModel(function=reply))
    result = run(graph, observation_budget=20_000)
    assert result["status"] == "answered" and result["final_answer"] == "the data is nested"
    assert ("act", "deep_object", "ok") in [(s["node"], s["action"], s["status"]) for s in result["steps"]]


def test_the_offline_model_reads_a_deeply_nested_tool_result_as_text():
    graph = build_react_graph(ToolGateway([deep_array]), checkpointer=InMemorySaver(),
                              model=ScriptedChatModel.of(
                                  AIMessage("", tool_calls=[{"name": "deep_array", "args": {}, "id": "c1"}]),
                                  AIMessage("done")))
    assert run(graph, reflection="rules")["status"] == "answered"
    # the offline model reads tool results itself: the same output through it
    offline = build_react_graph(ToolGateway([deep_array]), checkpointer=InMemorySaver())
    result = run(offline, "deep_array", allowed_tools=["deep_array"])
    assert result["status"] is not None and result["final_answer"] is not None


def test_an_inline_verdict_nested_past_the_parser_is_defaulted_and_the_run_goes_on():
    def reply(messages, info: RequestInfo) -> str:
        if info.purpose != "think":
            return "It is 126."
        if "126" not in messages[-1].text:
            return ('<reflection>' + "[" * 3000 + '</reflection>\nThought: compute it\nAction: calculator\n'
                    'Action Input: {"expression": "(15 + 27) * 3"}')
        return "<reflection>" + DEEP_OBJECT + "</reflection>\nThought: done\nFinal Answer: It is 126."
    graph = build_react_graph(checkpointer=InMemorySaver(), model=FunctionModel(function=reply))
    result = run(graph, "计算 (15 + 27) * 3 等于多少", reflection="inline", protocol="text")
    assert result["status"] == "answered" and "126" in result["final_answer"]


@pytest.mark.parametrize("text", [DEEP_OBJECT, "[" * 5000, "Here it is: " + DEEP_OBJECT, "```json\n" + DEEP_OBJECT])
def test_a_structured_reply_nested_past_the_parser_is_read_or_refused_as_a_parse_failure(text):
    """The parser takes the first `{…}` that parses (an inner object, here) or refuses the reply; the parser's
    RecursionError never escapes."""
    from langchain_core.exceptions import OutputParserException

    try:
        value = TolerantJsonParser().parse(text)
    except OutputParserException:
        value = None
    assert value is None or isinstance(value, dict)


@pytest.mark.parametrize(("braces", "found"), [(MAX_OBJECT_STARTS - 1, True), (MAX_OBJECT_STARTS, False)])
def test_a_structured_reply_is_looked_for_among_the_first_places_an_object_may_start(braces, found):
    """Each place tried may be read to the reply's end: a reply of thousands of `{` would cost time growing with
    its length squared (3.8 s for 220 KB before this bound), so only the first MAX_OBJECT_STARTS are tried."""
    from langchain_core.exceptions import OutputParserException

    text = "Template: {name} " * braces + '{"city": "Oslo"}'
    if found:
        assert TolerantJsonParser().parse(text) == {"city": "Oslo"}
    else:
        with pytest.raises(OutputParserException, match="no JSON object"):
            TolerantJsonParser().parse(text)
    with pytest.raises(OutputParserException):  # 32,000 starts, nested: refused after the first hundred
        TolerantJsonParser().parse('{"a":1' + ' {"a":[' * 32_000)


@pytest.mark.parametrize("planted", [b"not json", b'{"state": "weird", "consecutive_failures": 0, "opened_at": 0, '
                                     b'"probe_started_at": null}', b"[" * 5000, b'{"state": "open"}',
                                     b'{"state": "open", "consecutive_failures": -1, "opened_at": 0, '
                                     b'"probe_started_at": null}', b'{"state": "open", "consecutive_failures": 2, '
                                     b'"opened_at": NaN, "probe_started_at": null}', b"x" * 100_000])
async def test_a_breaker_state_in_redis_that_is_no_snapshot_reads_as_closed_once(planted, redis_url, redis_prefix,
                                                                                 caplog):
    store = RedisBreakerStore.from_url(redis_url, prefix=redis_prefix)
    gateway = ToolGateway([deep_object], breaker_store=store)
    raw = redis.Redis.from_url(redis_url)
    try:
        raw.set(f"{redis_prefix}deep_object", planted)
        with caplog.at_level(logging.WARNING, logger="reactgraph.tools"):
            first = await gateway.execute({"name": "deep_object", "args": {}, "id": "c1"})
            second = await gateway.execute({"name": "deep_object", "args": {}, "id": "c2"})
        assert first.status == second.status == "ok"
        warnings = [r.getMessage() for r in caplog.records if "breaker state" in r.getMessage()]
        assert len(warnings) == 1 and "read as closed" in warnings[0], warnings
        assert raw.get(f"{redis_prefix}deep_object") != planted  # replaced by a snapshot
    finally:
        raw.close()
        await store.client.aclose()
