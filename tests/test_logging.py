"""Logs a user can ship: `--log-format json` prints one object per record with the run's ids, `--debug` shows
the structured fields as text, and fallbacks, swallowed exceptions and Redis reconnects leave a record."""

from __future__ import annotations

import json
import logging
import uuid

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from reactgraph.cli.logs import JsonFormatter, TextFormatter
from reactgraph.graph import Context, build_react_graph
from reactgraph.graph.run_context import run_scope
from support.scripted import ScriptedChatModel, call, notes_gateway, tool_reply

WEATHER = "What is the weather in Paris?"


def json_lines(err: str) -> list[dict]:
    return [json.loads(line) for line in err.splitlines() if line.startswith("{")]


def test_json_log_lines_carry_the_envelope_the_fields_and_the_runs_ids(cli, cli_session):
    code, out, err = cli("--log-format", "json", "ask", WEATHER, "--session", cli_session, "--json")
    assert code == 0, err
    records = json_lines(err)
    calls = [r for r in records if "tool_call" in r]
    assert calls, err
    record = calls[0]
    assert {"ts", "level", "logger", "msg", "run_id", "session"} <= set(record)
    assert record["ts"].endswith("Z") and record["level"] == "INFO" and record["logger"] == "reactgraph.tools"
    assert record["session"] == cli_session and len(record["run_id"]) == 36
    assert record["tool_call"]["tool"] == "get_weather" and record["tool_call"]["status"] == "ok"
    assert record["tool_call"]["args"] == {"city": "Paris"} and "latency_ms" in record["tool_call"]
    assert json.loads(out)["session"] == cli_session  # stdout stays the one JSON answer


def test_the_environment_chooses_the_format_and_a_bad_one_is_one_line(cli, cli_session, monkeypatch):
    monkeypatch.setenv("REACTGRAPH_LOG_FORMAT", "JSON")
    code, _, err = cli("ask", WEATHER, "--session", cli_session, "--json")
    assert code == 0 and any("tool_call" in r for r in json_lines(err))
    monkeypatch.setenv("REACTGRAPH_LOG_FORMAT", "xml")
    code, _, err = cli("tools", "--json", "--store", "memory")
    assert code == 2 and err.strip().splitlines() == [
        "error: --log-format / $REACTGRAPH_LOG_FORMAT: 'xml' is not one of json, text"]


def test_debug_shows_the_structured_fields_as_text_and_no_flag_shows_nothing(cli, cli_session):
    code, _, err = cli("ask", WEATHER, "--session", cli_session, "--json", "--debug")
    assert code == 0
    line = next(line for line in err.splitlines() if "tool call get_weather" in line)
    assert line.startswith("INFO reactgraph.tools tool call get_weather ok ")
    assert f"session={cli_session}" in line and "tool=get_weather" in line and 'args={"city": "Paris"}' in line
    code, _, err = cli("ask", WEATHER, "--session", cli_session, "--json")
    assert code == 0 and err == ""


def test_the_cli_leaves_the_callers_logging_as_it_found_it(cli, cli_session):
    root, handlers = logging.getLogger(), list(logging.getLogger().handlers)
    level = root.level
    cli("--log-format", "text", "tools", "--json", "--store", "memory")
    assert root.handlers == handlers and root.level == level


def record(msg: str = "m", **extra) -> logging.LogRecord:
    rec = logging.LogRecord("reactgraph.x", logging.WARNING, __file__, 1, msg, None, None)
    for key, value in extra.items():
        setattr(rec, key, value)
    return rec


def test_a_field_never_overwrites_the_envelope_and_text_quotes_what_needs_it():
    rec = record(msg="hello", level="spoof", fallback={"node": "reflect", "reason": "no structured output"})
    entry = json.loads(JsonFormatter().format(rec))
    assert entry["level"] == "WARNING" and entry["msg"] == "hello" and entry["fallback"]["node"] == "reflect"
    text = TextFormatter(timestamps=False).format(rec)
    assert text == 'WARNING reactgraph.x hello level=spoof node=reflect reason="no structured output"'


def test_ids_come_from_the_run_scope_or_from_langchains_current_config():
    from reactgraph.graph.run_context import current_run

    assert current_run() == {}
    with run_scope("s-1", "r-1"):
        assert current_run() == {"run_id": "r-1", "session": "s-1"}
    assert current_run() == {}


def test_a_reflection_fallback_is_logged_with_the_session_of_the_graph_run(caplog):
    # An unparsable verdict: the rules decide, and a WARNING says so, with the thread id from the node's config.
    gateway = notes_gateway(found=lambda topic: topic == "graphs", broken=True)
    model = ScriptedChatModel.of(tool_reply("look", call("broken")), AIMessage("not a verdict"), AIMessage("Final."))
    graph = build_react_graph(gateway, model=model)
    from reactgraph.cli.logs import RunIds

    caplog.handler.addFilter(RunIds())
    with caplog.at_level(logging.INFO, logger="reactgraph"):
        graph.invoke({"messages": [HumanMessage("q")]}, config={"configurable": {"thread_id": "log-t1"}},
                     context=Context(reflection="llm"))
    fallbacks = [r for r in caplog.records if hasattr(r, "fallback")]
    assert [(r.levelno, r.fallback["node"], r.fallback["kind"]) for r in fallbacks] == [
        (logging.WARNING, "reflect", "reflection_rules")]
    assert fallbacks[0].run_ids["session"] == "log-t1"


def test_a_tool_exception_swallowed_by_the_gateway_is_logged_at_debug_with_its_traceback(caplog):
    import asyncio

    from reactgraph.tools import ToolGateway

    gateway = ToolGateway()

    @gateway.tool
    def explode(x: int) -> int:
        """Always fails."""
        raise RuntimeError("kaboom")

    with caplog.at_level(logging.DEBUG, logger="reactgraph.tools"):
        result = asyncio.run(gateway.execute({"name": "explode", "args": {"x": 1}, "id": "c1"}))
    assert result.status == "error"
    swallowed = [r for r in caplog.records if hasattr(r, "swallowed")]
    assert swallowed and swallowed[0].levelno == logging.DEBUG and swallowed[0].exc_info is not None
    assert swallowed[0].swallowed == {"tool": "explode", "error_type": "RuntimeError"}


def test_a_killed_redis_connection_is_logged_as_a_reconnect(redis_url, redis_prefix, raw, caplog):
    from reactgraph.memory.redis_checkpoint import RedisSaver

    config = {"configurable": {"thread_id": "log-reconnect", "checkpoint_ns": ""}}
    name = f"log-reconnect-{uuid.uuid4().hex[:12]}"  # the saver's connections say who they are (CLIENT SETNAME)
    with RedisSaver.from_url(redis_url, prefix=redis_prefix, client_name=name) as saver:
        saver.get_tuple(config)  # opens the connection the server is about to drop
        (conn,) = [c for c in raw.client_list() if c["name"] == name]
        raw.client_kill_filter(_id=conn["id"])
        with caplog.at_level(logging.WARNING, logger="reactgraph.memory"):
            assert saver.get_tuple(config) is None  # sent again on a new connection
    reconnects = [r for r in caplog.records if getattr(r, "redis", {}).get("event") == "reconnect"]
    assert len(reconnects) == 1 and reconnects[0].levelno == logging.WARNING
    assert reconnects[0].redis["url"] == redis_url and reconnects[0].redis["error"]


@pytest.fixture(autouse=True)
def _no_leftover_levels():
    yield
    logging.getLogger("reactgraph").setLevel(logging.NOTSET)


def test_the_trace_id_of_the_active_opentelemetry_span_goes_on_the_record():
    from opentelemetry.sdk.trace import TracerProvider

    from reactgraph.cli.logs import current_ids

    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("run") as span:
        ids = current_ids()
    assert ids["trace_id"] == format(span.get_span_context().trace_id, "032x") and len(ids["span_id"]) == 16
    assert "trace_id" not in current_ids()


def test_an_unreachable_redis_is_logged_as_a_failed_connect(caplog):
    from reactgraph.memory.redis_checkpoint import CheckpointStoreUnavailable, RedisSaver

    with caplog.at_level(logging.ERROR, logger="reactgraph.memory"), RedisSaver.from_url(
            "redis://127.0.0.1:1/0?socket_connect_timeout=0.2") as saver, pytest.raises(CheckpointStoreUnavailable):
        saver.ping()
    events = [r.redis["event"] for r in caplog.records if hasattr(r, "redis")]
    assert "connect_failed" in events
