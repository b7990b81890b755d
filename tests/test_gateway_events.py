"""Gateway events (retry, breaker, timeout, waiting) on LangGraph's `custom` stream, sync and async."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from reactgraph.graph import Context, build_react_graph
from reactgraph.tools import ToolGateway
from reactgraph.tools.call import TransientToolError
from reactgraph.tools.resilience import BreakerConfig, Retry
from support.scripted import ScriptedChatModel, call, tool_reply

RULES = Context(reflection="rules")
MODES = ["updates", "custom"]


def flaky_gateway(**options: Any) -> ToolGateway:
    """`flaky` fails twice then answers; `down` always fails; `slow` never answers in time; `busy` takes 0.3 s."""
    gw = ToolGateway(retry=Retry(base_delay_s=0.01, max_delay_s=0.02), **options)
    failures = {"flaky": 0}

    @gw.tool(max_attempts=3)
    async def flaky(city: str) -> str:
        """Weather that fails twice first."""
        failures["flaky"] += 1
        if failures["flaky"] <= 2:
            raise TransientToolError("upstream hiccup")
        return f"sunny in {city}"

    @gw.tool(max_attempts=1)
    async def down() -> str:
        """Always fails."""
        raise RuntimeError("service down")

    @gw.tool(timeout_s=0.2)
    async def slow() -> str:
        """Never answers in time."""
        await asyncio.sleep(5)
        return "late"

    @gw.tool
    async def busy(n: int) -> int:
        """Takes a while."""
        await asyncio.sleep(0.3)
        return n

    return gw


def script(*calls: dict[str, Any]) -> ScriptedChatModel:
    return ScriptedChatModel.of(tool_reply("use tools", *calls), AIMessage("Done."))


def run_sync(graph) -> list[tuple[str, Any]]:
    return [(mode, payload) for mode, payload in graph.stream(
        {"messages": [HumanMessage("q")]}, context=RULES, stream_mode=MODES)]


async def run_async(graph) -> list[tuple[str, Any]]:
    return [(mode, payload) async for mode, payload in graph.astream(
        {"messages": [HumanMessage("q")]}, context=RULES, stream_mode=MODES)]


def events(parts: list[tuple[str, Any]], kind: str | None = None) -> list[dict[str, Any]]:
    found = [p for m, p in parts if m == "custom" and p.get("type") == "gateway"]
    return [e for e in found if kind is None or e["event"] == kind]


def position(parts: list[tuple[str, Any]], node: str) -> int:
    return next(i for i, (m, p) in enumerate(parts) if m == "updates" and node in p)


def check_retries(parts: list[tuple[str, Any]]) -> None:
    retries = events(parts, "retry")
    assert [(e["tool"], e["call_id"], e["attempt"], e["max_attempts"], e["error"]) for e in retries] == [
        ("flaky", "c1", 2, 3, "TransientToolError"), ("flaky", "c1", 3, 3, "TransientToolError")]
    first_event = next(i for i, (m, _) in enumerate(parts) if m == "custom")
    # In order with the steps: after the model asked for the call, before the act step's update.
    assert position(parts, "think") < first_event < position(parts, "act")
    for event in events(parts):
        assert len(json.dumps(event)) < 300  # JSON-serialisable and small


def test_a_tool_that_fails_twice_then_succeeds_streams_two_retry_events():
    check_retries(run_sync(build_react_graph(flaky_gateway(), model=script(call("flaky", city="Oslo")))))


async def test_retry_events_stream_under_astream_too():
    check_retries(await run_async(build_react_graph(flaky_gateway(), model=script(call("flaky", city="Oslo")))))


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_an_always_failing_tool_streams_the_breaker_opening(mode):
    graph = build_react_graph(flaky_gateway(breaker=BreakerConfig(failure_threshold=1)), model=script(call("down")))
    parts = run_sync(graph) if mode == "sync" else await run_async(graph)
    assert [(e["tool"], e["state"], e["previous"], e["failures"]) for e in events(parts, "breaker")] == [
        ("down", "open", "closed", 1)]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_slow_tool_streams_a_timeout_event(mode):
    graph = build_react_graph(flaky_gateway(), model=script(call("slow")))
    parts = run_sync(graph) if mode == "sync" else await run_async(graph)
    assert [(e["tool"], e["timeout_s"]) for e in events(parts, "timeout")] == [("slow", 0.2)]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_calls_beyond_the_concurrency_limit_stream_waiting_events(mode):
    calls = [call("busy", f"c{i}", n=i) for i in range(3)]
    graph = build_react_graph(flaky_gateway(max_concurrent=1), model=script(*calls))
    parts = run_sync(graph) if mode == "sync" else await run_async(graph)
    waiting = events(parts, "waiting")
    assert len(waiting) == 2 and {e["tool"] for e in waiting} == {"busy"}
    assert all(e["max_concurrent"] == 1 for e in waiting)


def test_a_healthy_run_streams_no_gateway_events_and_updates_alone_are_unchanged():
    graph = build_react_graph(flaky_gateway(), model=script(call("busy", n=1)))
    assert events(run_sync(graph)) == []
    nodes = [next(iter(u)) for u in build_react_graph(flaky_gateway(), model=script(call("flaky", city="x"))).stream(
        {"messages": [HumanMessage("q")]}, context=RULES, stream_mode="updates")]
    assert "act" in nodes


async def test_the_gateway_api_takes_a_sink_per_call_and_a_failing_sink_never_fails_the_call():
    gw = flaky_gateway()
    seen: list[dict[str, Any]] = []
    result = await gw.execute(call("flaky", city="Oslo"), events=seen.append)
    assert result.ok and [e["event"] for e in seen] == ["retry", "retry"]

    def broken_sink(event: dict[str, Any]) -> None:
        raise RuntimeError("consumer gone")

    assert (await gw.execute(call("slow"), events=broken_sink)).status == "timeout"


# -- the CLI's step view ------------------------------------------------------------------------------------------

WEATHER = "北京和上海的天气分别怎么样？"


def test_the_cli_step_view_shows_retries_as_dim_lines_and_json_is_unchanged(cli, cli_session):
    from support import flaky_tools

    flaky_tools.reset()
    code, out, err = cli("ask", WEATHER, "--tools", "support.flaky_tools:FLAKY", "--session", cli_session)
    assert code == 0, err
    lines = out.splitlines()
    retries = [line.strip() for line in lines if "retry" in line and "↻" in line]
    assert sorted(retries) == sorted(f"↻ get_weather retry {n}/3 after TransientToolError"
                                     for n in (2, 3) for _ in range(2))  # two cities, two retries each
    first_retry = next(i for i, line in enumerate(lines) if "↻" in line)
    assert next(i for i, line in enumerate(lines) if "Action: get_weather" in line) < first_retry
    assert first_retry < next(i for i, line in enumerate(lines) if "Observation" in line)

    flaky_tools.reset()
    code, out, err = cli("ask", WEATHER, "--tools", "support.flaky_tools:FLAKY", "--session", cli_session + "-j",
                         "--json")
    assert code == 0, err
    assert "↻" not in out and json.loads(out)["status"]


def test_the_cli_step_view_shows_the_breaker_opening(cli, cli_session):
    code, out, err = cli("ask", WEATHER, "--tools", "support.flaky_tools:DOWN", "--session", cli_session)
    assert code == 1, err  # no weather at all: the run ends as no_answer
    assert "⚠ breaker for get_weather open (2 failures)" in [line.strip() for line in out.splitlines()]
