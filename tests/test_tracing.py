"""OpenTelemetry traces as an operator sees them: one trace per run, node spans, model spans, tool spans under the
act node that made the call (with retry and breaker events, never argument values), the trace context on
`http_get`'s requests, and the CLI's `ask --otel` delivering OTLP/HTTP to a collector."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from reactgraph.graph import Context, build_react_graph
from reactgraph.graph.tracing import disable_tracing, enable_tracing, endpoint_from_env, tracing_requested
from reactgraph.tools import BreakerConfig, ToolGateway, default_gateway
from reactgraph.tools.builtin.http_get import http_get_tool
from reactgraph.tools.telemetry import trace_headers
from support.flaky_tools import FLAKY, reset
from support.local_servers import http_recorder
from support.scripted import by_purpose, call, verdict

WEATHER = "北京和上海的天气分别怎么样？哪个城市更热？"


class _Broken(BaseChatModel):
    """A model whose every call fails."""

    @property
    def _llm_type(self) -> str:
        return "broken"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        raise RuntimeError("model down")
CITIES = ("北京", "上海")


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on for one test, every span kept in memory as it ends."""
    exporter = InMemorySpanExporter()
    enable_tracing(exporter=exporter, batch=False)
    try:
        yield exporter
    finally:
        disable_tracing()


def run_spans_handler() -> Any:
    """Our span-making callback handler, as every LangChain callback manager gets it while tracing is on
    (through langchain-core's configure hook)."""
    from langchain_core.callbacks.manager import CallbackManager

    from reactgraph.graph.run_spans import RunSpans

    (handler,) = [h for h in CallbackManager.configure().handlers if isinstance(h, RunSpans)]
    return handler


def tree(exporter: InMemorySpanExporter) -> tuple[list[Any], dict[int, Any], dict[int | None, list[Any]]]:
    """(spans, by span id, children by parent span id; None holds the roots)."""
    finished = list(exporter.get_finished_spans())
    by_id = {s.context.span_id: s for s in finished}
    children: dict[int | None, list[Any]] = {}
    for s in finished:
        children.setdefault(s.parent.span_id if s.parent else None, []).append(s)
    return finished, by_id, children


def named(finished: list[Any], name: str) -> list[Any]:
    return [s for s in finished if s.name == name]


def as_provider_reply(reply: Any, info: Any) -> AIMessage:
    """A test model's reply as a provider's: the structured value as the call of the asked schema, with the usage
    and the finish reason a provider reports."""
    if isinstance(reply, dict):
        reply = AIMessage("", tool_calls=[call(info.schema["name"], "s1", **reply)])
    reply = AIMessage(reply) if isinstance(reply, str) else reply
    reply.usage_metadata = {"input_tokens": 40, "output_tokens": 8, "total_tokens": 48}
    reply.response_metadata = {"finish_reason": "tool_calls" if reply.tool_calls else "stop"}
    return reply


def weather_model() -> Any:
    """A test model for WEATHER: think calls get_weather for both cities in one round (whatever comes back),
    reflection finds enough, and the answer compares them."""
    def think(messages, info):
        if messages[-1].type == "tool":
            return as_provider_reply("上海更热。", info)
        return as_provider_reply(AIMessage("", tool_calls=[call("get_weather", "c1", city="北京"),
                                                           call("get_weather", "c2", city="上海")]), info)
    return by_purpose(
        think=think,
        reflect=lambda m, info: as_provider_reply(verdict(parts=["北京的天气", "上海的天气", "哪个更热"]), info),
        answer=lambda m, info: as_provider_reply("北京 3°C，上海 12°C：上海更热。", info),
        check=lambda m, info: as_provider_reply({"parts": ["北京的天气", "上海的天气"], "missing": []}, info))


def run_weather(gateway: ToolGateway, mode: str) -> dict[str, Any]:
    graph = build_react_graph(gateway, checkpointer=InMemorySaver(), model=weather_model())
    args = ({"messages": [HumanMessage(WEATHER)]},)
    kwargs = {"config": {"configurable": {"thread_id": f"trace-{mode}"}}, "context": Context()}
    if mode == "sync":
        return graph.invoke(*args, **kwargs)
    return asyncio.run(graph.ainvoke(*args, **kwargs))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_one_trace_per_run_with_node_model_and_tool_spans(spans, mode):
    result = run_weather(default_gateway(), mode)
    assert result["status"] == "answered"
    finished, by_id, children = tree(spans)
    assert len({s.context.trace_id for s in finished}) == 1, "one run, one trace"
    (root,) = children[None]
    assert root.name == "invoke_agent react" and root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "react"
    assert root.attributes["gen_ai.conversation.id"] == f"trace-{mode}"
    # Every node run is a child of the run's span, in the order the nodes ran.
    nodes = sorted(children[root.context.span_id], key=lambda s: s.start_time)
    assert [s.name for s in nodes] == [f"execute_task {n}" for n in (
        "load_memory", "think", "act", "act", "observe", "reflect", "finalize", "save_memory")]
    assert all(s.attributes["gen_ai.operation.name"] == "execute_task" for s in nodes)

    model = [s for s in finished if s.attributes.get("gen_ai.operation.name") == "chat"]
    # reflect's model call is a child of reflect: its structured-output chain (sequence, parsers, …) has no spans
    assert sorted(by_id[s.parent.span_id].name for s in model) == [
        "execute_task finalize", "execute_task reflect", "execute_task think"]
    # each model call says what it was for (the gateway's declared purpose), never read from its prompt
    assert {by_id[s.parent.span_id].name: s.attributes["reactgraph.model.purpose"] for s in model} == {
        "execute_task think": "think", "execute_task reflect": "reflect", "execute_task finalize": "answer"}
    assert not [s.name for s in finished if s.name.startswith(("execute_task Runnable", "execute_task Pydantic"))]
    for span in model:
        attrs = span.attributes
        assert span.name == "chat test" and span.kind.name == "CLIENT"
        assert attrs["gen_ai.request.model"] == attrs["gen_ai.response.model"] == "test"
        assert attrs["gen_ai.usage.input_tokens"] > 0 and attrs["gen_ai.usage.output_tokens"] > 0
    assert {("tool_call",), ("stop",)} <= {s.attributes["gen_ai.response.finish_reasons"] for s in model}

    tools = named(finished, "execute_tool get_weather")
    assert len(tools) == 2
    for span in tools:  # each call under its own act task's span
        assert by_id[span.parent.span_id].name == "execute_task act"
        attrs = span.attributes
        assert attrs["gen_ai.operation.name"] == "execute_tool" and attrs["gen_ai.tool.name"] == "get_weather"
        assert attrs["reactgraph.tool.status"] == "ok" and attrs["reactgraph.tool.attempts"] == 1
        assert attrs["reactgraph.tool.breaker_state"] == "closed" and attrs["reactgraph.tool.latency_ms"] >= 0
        assert len(attrs["reactgraph.tool.args_digest"]) == 12
    assert len({s.parent.span_id for s in tools}) == 2
    handler = run_spans_handler()  # every span ended: nothing left open
    assert not handler.open and not handler.skipped
    # Content capture is off by default: no prompt, answer or argument value in any attribute.
    for span in finished:
        for value in span.attributes.values():
            assert not any(city in str(value) for city in CITIES), (span.name, value)


async def test_runs_leave_the_callers_context_alone_so_each_run_is_its_own_trace(spans):
    from opentelemetry import trace

    graph = build_react_graph(default_gateway(), checkpointer=InMemorySaver(), model=weather_model())
    for n in range(2):  # one task, two runs: the second must not become a child of the first
        await graph.ainvoke({"messages": [HumanMessage(WEATHER)]}, config={"configurable": {"thread_id": f"c{n}"}},
                            context=Context())
        assert not trace.get_current_span().get_span_context().is_valid
    finished, _, children = tree(spans)
    assert [s.name for s in children[None]] == ["invoke_agent react"] * 2
    assert len({s.context.trace_id for s in finished}) == 2


def test_content_is_recorded_only_when_asked_and_a_run_continues_its_callers_trace():
    exporter = InMemorySpanExporter()
    provider = enable_tracing(exporter=exporter, batch=False, content=True)
    try:
        with provider.get_tracer("test").start_as_current_span("request") as request:
            run_weather(default_gateway(), "sync")
    finally:
        disable_tracing()
    finished, by_id, _ = tree(exporter)
    (root,) = named(finished, "invoke_agent react")
    assert root.parent.span_id == request.get_span_context().span_id, "the run continues the caller's span"
    think = next(s for s in finished if s.name.startswith("chat ") and by_id[s.parent.span_id].name
                 == "execute_task think")
    asked = json.loads(think.attributes["gen_ai.input.messages"])
    assert any(part.get("content") == WEATHER for m in asked if m["role"] == "user" for part in m["parts"])
    answered = json.loads(think.attributes["gen_ai.output.messages"])
    assert answered[0]["role"] == "assistant"
    assert [p["name"] for p in answered[0]["parts"] if p["type"] == "tool_call"] == ["get_weather", "get_weather"]
    for span in named(finished, "execute_tool get_weather"):  # the gateway never records argument values
        assert not any(city in str(v) for v in span.attributes.values() for city in CITIES)
    # After disable_tracing, runs make no spans at all.
    exporter.clear()
    run_weather(default_gateway(), "async")
    assert exporter.get_finished_spans() == ()


def test_a_failing_model_call_is_an_error_span_and_the_handler_keeps_nothing(spans):
    graph = build_react_graph(default_gateway(), checkpointer=InMemorySaver(), model=_Broken())
    result = graph.invoke({"messages": [HumanMessage("q")]}, config={"configurable": {"thread_id": "broken"}},
                          context=Context(reflection="off"))
    assert result["status"] == "failed"  # the turn ends in one line; the trace says which call failed
    finished, by_id, _ = tree(spans)
    model = [s for s in finished if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert model and all(s.status.status_code.name == "ERROR" and s.attributes["error.type"] == "RuntimeError"
                         and by_id[s.parent.span_id].name == "execute_task think" for s in model)
    assert named(finished, "invoke_agent react")[0].status.status_code.name == "UNSET"
    handler = run_spans_handler()
    assert not handler.open and not handler.skipped


def test_a_model_fallback_is_an_event_on_its_node_span_and_the_fallback_model_has_the_calls(spans):
    graph = build_react_graph(default_gateway(), checkpointer=InMemorySaver(), model=_Broken())
    result = graph.invoke({"messages": [HumanMessage("What is 2 + 3?")]},
                          config={"configurable": {"thread_id": "fallback"}},
                          context=Context(reflection="off", fallback_models=["test"]))  # the schema test model
    assert result["status"] == "answered"
    finished, _, _ = tree(spans)
    think = min(named(finished, "execute_task think"), key=lambda s: s.start_time)  # the first: it switched
    (event,) = [e for e in think.events if e.name == "reactgraph.model_fallback"]
    assert event.attributes["reactgraph.model"] == "test" and "model down" in event.attributes["reactgraph.error"]
    assert think.attributes["reactgraph.fallback_model"] == "test"
    model = sorted((s for s in finished if s.attributes.get("gen_ai.operation.name") == "chat"),
                   key=lambda s: s.start_time)
    assert model[0].status.status_code.name == "ERROR"  # the failed call, then the fallback's
    assert len(model) >= 2 and {s.attributes["gen_ai.request.model"] for s in model[1:]} == {"test"}


def test_retries_and_breaker_transitions_are_span_events(spans):
    reset()
    gateway = ToolGateway(FLAKY, breaker=BreakerConfig(failure_threshold=1, cooldown_s=60))
    run_weather(gateway, "async")
    finished, by_id, _ = tree(spans)
    tools = named(finished, "execute_tool get_weather")
    assert tools and all(by_id[s.parent.span_id].name == "execute_task act" for s in tools)
    retried = [s for s in tools if any(e.name == "reactgraph.retry" for e in s.events)]
    assert retried, [list(s.events) for s in tools]
    retry = next(e for e in retried[0].events if e.name == "reactgraph.retry")
    assert retry.attributes["reactgraph.attempt"] == 2 and retry.attributes["reactgraph.error"] == "TransientToolError"
    assert all(s.attributes["reactgraph.tool.attempts"] == 3 and s.attributes["reactgraph.tool.status"] == "ok"
               for s in retried)


def test_an_open_breaker_shows_on_the_tool_span(spans):
    gateway = ToolGateway(breaker=BreakerConfig(failure_threshold=1, cooldown_s=60))

    @gateway.tool(max_attempts=1)
    def get_weather(city: str) -> dict:
        """Weather for a city (always fails).

        Args:
            city: City name.
        """
        raise RuntimeError("down")

    run_weather(gateway, "sync")
    tools = named(tree(spans)[0], "execute_tool get_weather")
    moved = [e for s in tools for e in s.events if e.name == "reactgraph.breaker"]
    assert any(e.attributes["reactgraph.state"] == "open" and e.attributes["reactgraph.previous"] == "closed"
               for e in moved)
    statuses = {s.attributes["reactgraph.tool.status"] for s in tools}
    assert statuses <= {"error", "circuit_open"} and "error" in statuses
    assert all(s.status.status_code.name == "ERROR" for s in tools)
    # The call that opened the circuit says so; a call admitted before that says how it was admitted.
    mover = next(s for s in tools if any(e.name == "reactgraph.breaker" for e in s.events))
    assert mover.attributes["reactgraph.tool.breaker_state"] == "open"


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[tuple[str, dict[str, str], bytes]]]]:
    with http_recorder() as recorded:
        yield recorded


async def test_http_get_sends_the_trace_context_only_while_tracing(spans, receiver, monkeypatch):
    base, seen = receiver
    fetch = http_get_tool(["127.0.0.1"], allow_private=True)
    tracer = enable_tracing().get_tracer("test")
    with tracer.start_as_current_span("caller") as caller:
        await fetch.run(url=base + "/page")
        trace_id = format(caller.get_span_context().trace_id, "032x")
    traceparent = seen[-1][1].get("traceparent", "")
    assert traceparent.startswith(f"00-{trace_id}-"), seen[-1][1]
    monkeypatch.setenv("REACTGRAPH_OTEL_PROPAGATE", "false")
    with tracer.start_as_current_span("caller"):
        assert trace_headers() == {}
        await fetch.run(url=base + "/page")
    assert "traceparent" not in seen[-1][1]


def test_http_get_sends_no_trace_context_when_tracing_is_off(receiver):
    base, seen = receiver
    asyncio.run(http_get_tool(["127.0.0.1"], allow_private=True).run(url=base + "/page"))
    assert "traceparent" not in seen[-1][1] and trace_headers() == {}


def test_endpoint_variables_follow_the_otel_specification():
    assert endpoint_from_env({}) is None and not tracing_requested(False, {})
    assert tracing_requested(True, {})
    assert endpoint_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}) == "http://c:4318/v1/traces"
    assert endpoint_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                              "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t/x"}) == "http://t/x"


# The two `ask --otel` tests run the command as a user does, on its default offline model, end to end.
def test_ask_otel_delivers_the_run_over_otlp_http(cli, receiver, monkeypatch):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    base, seen = receiver
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", base)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "rg-test")
    code, _, err = cli("ask", WEATHER, "--store", "memory", "--json", "--otel")
    assert code == 0, err
    posts = [(path, body) for path, _, body in seen if path == "/v1/traces"]
    assert posts, "no OTLP request arrived (is the provider flushed at exit?)"
    exported = []
    for _, body in posts:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}["service.name"]
            assert service == "rg-test"
            exported += [s for scope in resource_spans.scope_spans for s in scope.spans]
    names = [s.name for s in exported]
    assert names.count("invoke_agent react") == 1 and names.count("execute_tool get_weather") == 2
    by_id = {s.span_id: s for s in exported}
    assert all(by_id[s.parent_span_id].name == "execute_task act"
               for s in exported if s.name == "execute_tool get_weather")
    assert len({s.trace_id for s in exported}) == 1


def test_ask_otel_without_the_extra_says_what_to_install(cli, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if not installed
    code, out, err = cli("ask", "计算 2+3", "--store", "memory", "--json", "--otel")
    assert code != 0 and out == ""
    assert err.strip().splitlines()[-1] == "error: tracing needs the otel extra: pip install 'react-graph[otel]'"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")  # set for other programs: a notice
    code, out, err = cli("ask", "计算 2+3", "--store", "memory", "--json")
    assert code == 0 and "running untraced" in err


def test_help_loads_no_opentelemetry():
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "reactgraph", "ask", "--help"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0 and "--otel" in done.stdout
    modules = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \| *(\S+)$", done.stderr, flags=re.MULTILINE))
    assert modules and not {m for m in modules if m.startswith(("opentelemetry", "wrapt"))}
