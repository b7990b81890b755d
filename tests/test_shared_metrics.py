"""One picture of the tools across processes: two gateways on one Redis add up their metrics, a breaker one of
them opened is open for `reactgraph tools` too, and a metrics store that cannot write never fails a call."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from reactgraph.tools import BreakerConfig, RedisBreakerStore, ToolGateway, as_tool_meta
from reactgraph.tools.call import ToolResult, ToolStatus
from reactgraph.tools.telemetry import MemoryMetricsStore, RedisMetricsStore

# Tool names of this process's own, so other tests' calls on the shared default keys never mix in.
SUFFIX = uuid.uuid4().hex[:8]
ECHO, FLAKY = f"probe_echo_{SUFFIX}", f"probe_flaky_{SUFFIX}"


async def _echo(text: str) -> str:
    return text


async def _flaky(text: str) -> str:
    raise ConnectionError("upstream down")


# `reactgraph tools --tools test_shared_metrics:TOOLS` registers these (tests/ is on sys.path).
TOOLS = [as_tool_meta(_echo, name=ECHO, description="Echo the text.", max_attempts=1),
         as_tool_meta(_flaky, name=FLAKY, description="Always fails.", max_attempts=1)]


def worker_gateway(url: str, metrics_prefix: str = "reactgraph:metrics:",
                   breaker_prefix: str = "reactgraph:breaker:") -> ToolGateway:
    """What each worker process builds: the same tools, on the shared stores."""
    return ToolGateway(TOOLS, breaker=BreakerConfig(failure_threshold=2, cooldown_s=300),
                       breaker_store=RedisBreakerStore.from_url(url, breaker_prefix),
                       metrics_store=RedisMetricsStore.from_url(url, metrics_prefix))


async def calls(gateway: ToolGateway, name: str, n: int) -> list[ToolResult]:
    return [await gateway.execute({"name": name, "args": {"text": "hi"}, "id": f"c{i}"}) for i in range(n)]


@pytest.fixture
def shared_keys(raw):
    yield
    raw.delete(*(f"reactgraph:{kind}:{name}{tail}" for kind in ("metrics", "breaker") for name in (ECHO, FLAKY)
                 for tail in ("", ":latency")))


def test_two_gateways_on_one_redis_add_up_and_reactgraph_tools_shows_it_with_the_open_breaker(
        redis_url, cli, shared_keys):
    async def two_workers() -> None:
        first, second = worker_gateway(redis_url), worker_gateway(redis_url)
        assert [r.status for r in await calls(first, ECHO, 3)] == ["ok"] * 3
        assert [r.status for r in await calls(second, ECHO, 2)] == ["ok"] * 2
        await calls(second, FLAKY, 3)  # two failures open the breaker, the third call is refused by it
        for gateway in (first, second):
            assert gateway.telemetry.store.flush(5.0)
            await gateway.breakers.store.client.aclose()

    asyncio.run(two_workers())
    code, out, err = cli("tools", "--json", "--tools", "test_shared_metrics:TOOLS")
    assert code == 0, err
    rows = {row["name"]: row for row in json.loads(out)}
    echo, flaky = rows[ECHO], rows[FLAKY]
    assert echo["metrics_source"] == f"Redis {redis_url} (shared)"
    assert echo["metrics"]["calls"] == 5 and echo["metrics"]["failures"] == 0
    assert echo["metrics"]["by_status"] == {"ok": 5} and echo["metrics"]["p95_ms"] >= echo["metrics"]["p50_ms"] >= 0
    assert flaky["breaker"]["state"] == "open" and flaky["breaker"]["retry_in_s"] > 0
    assert flaky["metrics"]["calls"] == 3 and flaky["metrics"]["by_status"] == {"error": 2, "circuit_open": 1}
    assert flaky["metrics"]["failures"] == 2

    code, out, _ = cli("tools", "--tools", "test_shared_metrics:TOOLS")
    assert code == 0 and f"metrics: Redis {redis_url} (shared)" in out


def test_a_memory_store_shows_this_process_only(cli):
    code, out, err = cli("tools", "--json", "--store", "memory")
    assert code == 0, err
    rows = json.loads(out)
    assert {row["metrics_source"] for row in rows} == {"in this process only"}
    assert {row["metrics"] is None for row in rows} == {True}


def test_latency_percentiles_cover_every_process_and_the_keys_stay_bounded(redis_url, redis_prefix, raw):
    fast, slow = (RedisMetricsStore.from_url(redis_url, redis_prefix, window=10) for _ in range(2))
    for store, ms in ((fast, 1.0), (slow, 100.0)):
        for _ in range(8):
            store.record("t", ToolResult("t", "c", ToolStatus.OK, "", latency_ms=ms))
        assert store.flush(5.0)
    metrics = fast.read_now(["t", "never_called"])
    assert metrics["never_called"] is None
    assert metrics["t"]["calls"] == 16 and metrics["t"]["p95_ms"] == 100.0  # the last 10: 2 fast, 8 slow
    assert raw.llen(f"{redis_prefix}t:latency") == 10
    assert 0 < raw.ttl(f"{redis_prefix}t") <= 7 * 24 * 3600
    assert sorted(raw.keys(f"{redis_prefix}*")) == [f"{redis_prefix}t".encode(), f"{redis_prefix}t:latency".encode()]


def test_a_metrics_store_that_cannot_write_never_fails_a_call_and_says_so_once(caplog):
    # A Redis that is not there: every write fails, every call still succeeds.
    client = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    gone = RedisMetricsStore(client, "redis://gone")
    gateway = ToolGateway(TOOLS, metrics_store=gone)
    with caplog.at_level(logging.DEBUG, logger="reactgraph.tools.metrics"):
        for _ in range(3):
            assert [r.status for r in asyncio.run(calls(gateway, ECHO, 2))] == ["ok", "ok"]
            assert gone.flush(5.0)
    assert gone.dropped == 6
    levels = [r.levelno for r in caplog.records if getattr(r, "redis", {}).get("event") == "metrics_write_failed"]
    assert levels[0] == logging.WARNING and set(levels[1:]) <= {logging.DEBUG}


def test_the_in_process_store_is_the_default_and_keeps_the_old_metrics_shape():
    gateway = ToolGateway(TOOLS)
    asyncio.run(calls(gateway, ECHO, 2))
    assert isinstance(gateway.telemetry.store, MemoryMetricsStore)
    row = next(r for r in asyncio.run(gateway.status()) if r["name"] == ECHO)
    assert row["metrics"]["calls"] == 2 and row["metrics_source"] == "in this process only"
    assert gateway.telemetry.metrics[ECHO].calls == 2
