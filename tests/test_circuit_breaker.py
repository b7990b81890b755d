"""The circuit breaker: its pure transitions, one breaker with a hand-moved clock, and breakers shared in Redis."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest
import redis

from reactgraph.tools import (
    BreakerConfig,
    BreakerSnapshot,
    BreakerState,
    CircuitBreaker,
    MemoryBreakerStore,
    RedisBreakerStore,
    ToolGateway,
    ToolInputError,
    ToolSession,
    ToolStatus,
)
from reactgraph.tools.resilience import admit, on_failure, on_neutral, on_success
from support.waits import until

CONFIG = BreakerConfig(failure_threshold=2, cooldown_s=30)
CLOSED = BreakerSnapshot()
OPEN_AT_100 = BreakerSnapshot(BreakerState.OPEN, 2, opened_at=100.0)
PROBING_SINCE_130 = BreakerSnapshot(BreakerState.HALF_OPEN, 2, opened_at=100.0, probe_started_at=130.0)


def call(name, args=None, id: str = "c1") -> dict:
    return {"name": name, "args": {} if args is None else args, "id": id}


# -- the transitions, as pure functions ---------------------------------------------------------------------------


def test_defaults_open_after_two_consecutive_failures():
    assert BreakerConfig().failure_threshold == 2


def test_a_closed_breaker_admits_every_call_and_changes_nothing():
    assert admit(CLOSED, 0.0, CONFIG) == (True, CLOSED)


def test_failures_are_counted_until_the_threshold_opens_the_circuit():
    once = on_failure(CLOSED, 100.0, CONFIG)
    assert once == BreakerSnapshot(BreakerState.CLOSED, 1)
    assert on_failure(once, 100.0, CONFIG) == OPEN_AT_100


def test_a_success_while_closed_forgets_earlier_failures():
    assert on_success(BreakerSnapshot(BreakerState.CLOSED, 1)) == CLOSED


def test_an_open_breaker_refuses_calls_until_the_cool_down_has_passed():
    assert admit(OPEN_AT_100, 129.9, CONFIG) == (False, OPEN_AT_100)
    admitted, probing = admit(OPEN_AT_100, 130.0, CONFIG)
    assert admitted
    assert probing == PROBING_SINCE_130


def test_half_open_lets_exactly_one_probe_through():
    assert admit(PROBING_SINCE_130, 131.0, CONFIG) == (False, PROBING_SINCE_130)


def test_a_probe_that_never_reports_back_is_given_up_after_a_cool_down():
    admitted, probing = admit(PROBING_SINCE_130, 160.0, CONFIG)
    assert admitted and probing.probe_started_at == 160.0


def test_a_successful_probe_closes_the_circuit():
    assert on_success(PROBING_SINCE_130) == CLOSED


def test_a_failed_probe_reopens_the_circuit_for_another_cool_down():
    reopened = on_failure(PROBING_SINCE_130, 131.0, CONFIG)
    assert reopened.state is BreakerState.OPEN and reopened.opened_at == 131.0
    assert reopened.probe_started_at is None
    assert admit(reopened, 160.0, CONFIG)[0] is False


def test_a_straggler_cannot_close_or_push_back_an_open_circuit():
    assert on_success(OPEN_AT_100) == OPEN_AT_100
    later_failure = on_failure(OPEN_AT_100, 120.0, CONFIG)
    assert later_failure.state is BreakerState.OPEN and later_failure.opened_at == 100.0


def test_a_call_that_never_reached_the_tool_frees_the_probe_slot_and_changes_nothing_else():
    freed = on_neutral(PROBING_SINCE_130)
    assert freed == BreakerSnapshot(BreakerState.HALF_OPEN, 2, opened_at=100.0, probe_started_at=None)
    assert admit(freed, 131.0, CONFIG)[0] is True
    assert on_neutral(CLOSED) == CLOSED and on_neutral(OPEN_AT_100) == OPEN_AT_100


def test_snapshots_are_immutable_values():
    with pytest.raises(AttributeError):
        CLOSED.state = BreakerState.OPEN  # type: ignore[misc]
    assert BreakerSnapshot() == CLOSED


# -- one breaker, in memory ---------------------------------------------------------------------------------------


async def test_a_breaker_reads_the_injected_clock_for_its_cool_down(clock):
    breaker = CircuitBreaker("weather", CONFIG, clock=clock, store=MemoryBreakerStore())

    for _ in range(2):
        assert await breaker.try_acquire()
        await breaker.record(ToolStatus.TIMEOUT)
    assert (await breaker.snapshot()).state is BreakerState.OPEN
    assert not await breaker.try_acquire()
    clock.advance(10)
    assert breaker.retry_in(await breaker.snapshot()) == pytest.approx(20)

    clock.advance(20)
    assert await breaker.try_acquire()
    assert (await breaker.snapshot()).state is BreakerState.HALF_OPEN
    await breaker.record(ToolStatus.OK)
    assert await breaker.snapshot() == CLOSED


# -- breakers inside the gateway ----------------------------------------------------------------------------------


def flaky_gateway(clock, store=None, **options) -> tuple[ToolGateway, dict]:
    gateway = ToolGateway(clock=clock, breaker=CONFIG, breaker_store=store, **options)
    backend = {"healthy": False, "calls": 0}

    @gateway.tool(max_attempts=1)
    async def weather(city: str) -> str:
        """Forecast for a city."""
        backend["calls"] += 1
        if backend.get("gate"):
            await backend["gate"].wait()
        if not backend["healthy"]:
            raise RuntimeError("upstream 500")
        return f"sunny in {city}"

    @gateway.tool
    def calculator(expression: str) -> str:
        """Evaluate arithmetic."""
        return "4"

    return gateway, backend


async def breaker_row(gateway: ToolGateway, name: str = "weather") -> dict:
    return {row["name"]: row for row in await gateway.status()}[name]["breaker"]


async def test_two_failures_in_a_row_open_the_circuit_and_the_model_is_told_when_and_what_else_it_can_use(clock):
    gateway, backend = flaky_gateway(clock)

    assert [(await gateway.execute(call("weather", {"city": "Oslo"}))).status for _ in range(2)] == [
        ToolStatus.ERROR, ToolStatus.ERROR]
    clock.advance(12)
    refused = await gateway.execute(call("weather", {"city": "Oslo"}))

    assert refused.status is ToolStatus.CIRCUIT_OPEN
    assert refused.detail["retry_in_s"] == pytest.approx(18)
    assert "tried again in 18s" in refused.content
    assert "Other tools available: calculator." in refused.content
    assert backend["calls"] == 2
    assert await breaker_row(gateway) == {"state": "open", "consecutive_failures": 2, "retry_in_s": 18.0}
    assert (await gateway.execute(call("calculator", {"expression": "2+2"}))).ok, "other tools are unaffected"


async def test_a_success_between_failures_keeps_the_circuit_closed(clock):
    gateway, backend = flaky_gateway(clock)

    await gateway.execute(call("weather", {"city": "Oslo"}))
    backend["healthy"] = True
    await gateway.execute(call("weather", {"city": "Oslo"}))
    backend["healthy"] = False
    await gateway.execute(call("weather", {"city": "Oslo"}))

    assert await breaker_row(gateway) == {"state": "closed", "consecutive_failures": 1, "retry_in_s": None}


async def test_after_the_cool_down_one_probe_runs_while_concurrent_calls_are_still_refused(clock):
    gateway, backend = flaky_gateway(clock)
    for _ in range(2):
        await gateway.execute(call("weather", {"city": "Oslo"}))

    clock.advance(30)
    backend["healthy"], backend["gate"] = True, asyncio.Event()
    probe = asyncio.create_task(gateway.execute(call("weather", {"city": "Oslo"}, id="probe")))
    await until(lambda: backend["calls"] == 3)  # the probe is in the tool, held at the gate
    assert (await breaker_row(gateway))["state"] == "half_open"
    during_probe = await gateway.execute_many([call("weather", {"city": "Rome"}, id=f"c{i}") for i in range(3)])
    backend["gate"].set()

    assert [r.status for r in during_probe] == [ToolStatus.CIRCUIT_OPEN] * 3
    assert (await probe).ok
    assert backend["calls"] == 3, "only the probe reached the tool"
    assert (await breaker_row(gateway))["state"] == "closed"
    assert (await gateway.execute(call("weather", {"city": "Rome"}))).ok


async def test_a_failed_probe_reopens_the_circuit_for_a_full_cool_down(clock):
    gateway, backend = flaky_gateway(clock)
    for _ in range(2):
        await gateway.execute(call("weather", {"city": "Oslo"}))

    clock.advance(30)
    probe = await gateway.execute(call("weather", {"city": "Oslo"}))
    clock.advance(29)
    still_open = await gateway.execute(call("weather", {"city": "Oslo"}))

    assert probe.status is ToolStatus.ERROR
    assert still_open.status is ToolStatus.CIRCUIT_OPEN
    assert backend["calls"] == 3
    clock.advance(1)
    backend["healthy"] = True
    assert (await gateway.execute(call("weather", {"city": "Oslo"}))).ok


async def test_invalid_arguments_and_denials_never_count_against_a_tool(clock):
    gateway, backend = flaky_gateway(clock)
    no_weather = ToolSession.of(deny={"weather"})

    for _ in range(5):
        assert (await gateway.execute(call("weather", {"town": "Oslo"}))).status is ToolStatus.INVALID_ARGS
        assert (await gateway.execute(call("weather", {"city": "Oslo"}), no_weather)).status is ToolStatus.DENIED

    assert await breaker_row(gateway) == {"state": "closed", "consecutive_failures": 0, "retry_in_s": None}
    assert backend["calls"] == 0


async def test_an_input_error_from_the_tool_neither_counts_as_a_failure_nor_as_proof_of_health(clock):
    gateway = ToolGateway(clock=clock, breaker=CONFIG)
    replies = iter([RuntimeError("upstream 500"), ToolInputError("no such city"), RuntimeError("upstream 500"),
                    ToolInputError("no such city"), "sunny"])

    @gateway.tool
    async def weather(city: str) -> str:
        """Forecast for a city."""
        reply = next(replies)
        if isinstance(reply, Exception):
            raise reply
        return reply

    statuses = [(await gateway.execute(call("weather", {"city": "Oslo"}))).status for _ in range(3)]
    assert statuses == [ToolStatus.ERROR, ToolStatus.INVALID_ARGS, ToolStatus.ERROR]
    assert (await breaker_row(gateway))["state"] == "open", "two real failures in a row, an input error between"

    clock.advance(30)
    probe = await gateway.execute(call("weather", {"city": "Atlantis"}))
    assert probe.status is ToolStatus.INVALID_ARGS
    assert (await breaker_row(gateway))["state"] == "half_open", "an input error proves nothing either way"
    assert (await gateway.execute(call("weather", {"city": "Oslo"}))).ok, "the next call is the new probe"
    assert (await breaker_row(gateway))["state"] == "closed"


async def test_a_probe_refused_a_concurrency_slot_does_not_hold_the_probe_slot(clock):
    gateway, backend = flaky_gateway(clock, max_concurrent=1, max_wait_s=0.05)
    release = asyncio.Event()

    @gateway.tool
    async def hog() -> str:
        """Holds the only concurrency slot."""
        await release.wait()
        return "done"

    for _ in range(2):
        await gateway.execute(call("weather", {"city": "Oslo"}))
    clock.advance(30)
    hogging = asyncio.create_task(gateway.execute(call("hog")))
    await until(lambda: gateway.bulkhead.in_flight == 1)  # the hog holds the only slot
    squeezed_out = await gateway.execute(call("weather", {"city": "Oslo"}))
    release.set()
    await hogging

    assert squeezed_out.status is ToolStatus.RATE_LIMITED
    backend["healthy"] = True
    assert (await gateway.execute(call("weather", {"city": "Oslo"}))).ok
    assert (await breaker_row(gateway))["state"] == "closed"


# -- breakers shared through Redis ----------------------------------------------------------------------------------


async def test_workers_sharing_a_redis_store_share_their_breakers(redis_url, redis_prefix, clock):
    store = RedisBreakerStore.from_url(redis_url, prefix=redis_prefix)
    worker_a, _ = flaky_gateway(clock, store)
    worker_b, backend_b = flaky_gateway(clock, store)
    try:
        for _ in range(2):
            assert (await worker_a.execute(call("weather", {"city": "Oslo"}))).status is ToolStatus.ERROR

        refused = await worker_b.execute(call("weather", {"city": "Oslo"}))
        assert refused.status is ToolStatus.CIRCUIT_OPEN
        assert backend_b["calls"] == 0, "worker B never hit the failing tool"
        assert await breaker_row(worker_b) == {"state": "open", "consecutive_failures": 2, "retry_in_s": 30.0}

        clock.advance(30)
        backend_b["healthy"] = True
        assert (await worker_b.execute(call("weather", {"city": "Oslo"}))).ok
        assert (await breaker_row(worker_a))["state"] == "closed", "B's successful probe closed it for A too"
    finally:
        await store.client.aclose()


async def test_workers_with_their_own_redis_connections_see_the_same_state(redis_url, redis_prefix, clock):
    stores = [RedisBreakerStore.from_url(redis_url, prefix=redis_prefix) for _ in range(2)]
    (worker_a, _), (worker_b, backend_b) = (flaky_gateway(clock, store) for store in stores)
    try:
        await worker_a.execute(call("weather", {"city": "Oslo"}))
        await worker_b.execute(call("weather", {"city": "Oslo"}))

        assert (await worker_a.execute(call("weather", {"city": "Oslo"}))).status is ToolStatus.CIRCUIT_OPEN
        assert backend_b["calls"] == 1
    finally:
        for store in stores:
            await store.client.aclose()


async def test_concurrent_failures_from_many_workers_are_all_counted(redis_url, redis_prefix, clock):
    config = BreakerConfig(failure_threshold=1000, cooldown_s=30)
    stores = [RedisBreakerStore.from_url(redis_url, prefix=redis_prefix) for _ in range(4)]
    breakers = [CircuitBreaker("weather", config, clock=clock, store=store) for store in stores]
    try:
        await asyncio.gather(*(breakers[i % 4].record(ToolStatus.ERROR) for i in range(60)))

        assert (await breakers[0].snapshot()).consecutive_failures == 60, "no read-modify-write was lost"
    finally:
        for store in stores:
            await store.client.aclose()


async def test_only_one_worker_gets_to_probe_a_shared_half_open_circuit(redis_url, redis_prefix, clock):
    stores = [RedisBreakerStore.from_url(redis_url, prefix=redis_prefix) for _ in range(4)]
    breakers = [CircuitBreaker("weather", CONFIG, clock=clock, store=store) for store in stores]
    try:
        for _ in range(2):
            await breakers[0].record(ToolStatus.ERROR)
        clock.advance(30)

        admitted = await asyncio.gather(*(breakers[i % 4].try_acquire() for i in range(40)))

        assert admitted.count(True) == 1
        assert (await breakers[3].snapshot()).state is BreakerState.HALF_OPEN
    finally:
        for store in stores:
            await store.client.aclose()


async def test_a_redis_store_round_trips_every_field_of_a_snapshot(redis_url, redis_prefix):
    store = RedisBreakerStore.from_url(redis_url, prefix=redis_prefix)
    try:
        assert await store.read("weather") == CLOSED
        for snapshot in (OPEN_AT_100, PROBING_SINCE_130, BreakerSnapshot(BreakerState.CLOSED, 1)):
            await store.update("weather", lambda _old, new=snapshot: (None, new))
            assert await store.read("weather") == snapshot
    finally:
        await store.client.aclose()


class Forwarder:
    """A loopback port in front of the test's Redis that a test can take down and bring back: an outage."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port, self.port = upstream_port, 0
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []

    async def up(self) -> None:
        self.server = await asyncio.start_server(self._forward, "127.0.0.1", self.port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def down(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.close()
        self.writers.clear()

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self.writers += [writer, upstream_writer]

        async def pump(source: asyncio.StreamReader, target: asyncio.StreamWriter) -> None:
            while data := await source.read(65536):
                target.write(data)
            target.close()

        with contextlib.suppress(OSError):
            await asyncio.gather(pump(reader, upstream_writer), pump(upstream_reader, writer))


async def test_while_redis_is_down_a_process_keeps_breakers_of_its_own_and_shares_again_when_it_is_back(
        redis_url, redis_prefix, clock, caplog):
    parsed = redis.connection.parse_url(redis_url)
    forwarder = Forwarder(parsed.get("port", 6379))
    await forwarder.up()
    store = RedisBreakerStore.from_url(f"redis://127.0.0.1:{forwarder.port}/{parsed.get('db', 0)}", redis_prefix)
    store.RETRY_AFTER_S = 0.0  # every call tries Redis again: the test decides when it is back
    observer = RedisBreakerStore.from_url(redis_url, redis_prefix)
    gateway, backend = flaky_gateway(clock, store)
    try:
        assert (await gateway.execute(call("calculator", {"expression": "2+2"}))).ok  # connected through it
        await forwarder.down()
        with caplog.at_level(logging.WARNING, logger="reactgraph.tools"):
            statuses = [(await gateway.execute(call("weather", {"city": "Oslo"}))).status for _ in range(3)]
            assert statuses == [ToolStatus.ERROR, ToolStatus.ERROR, ToolStatus.CIRCUIT_OPEN], "a breaker all the same"
            assert backend["calls"] == 2
            assert await observer.read("weather") == CLOSED, "nothing reached Redis"

            await forwarder.up()
            backend["healthy"] = True
            assert (await gateway.execute(call("weather", {"city": "Oslo"}))).ok, "Redis's state again: closed"
            backend["healthy"] = False
            for _ in range(2):
                await gateway.execute(call("weather", {"city": "Oslo"}))
            assert (await observer.read("weather")).state is BreakerState.OPEN, "shared again"
        messages = [r.getMessage() for r in caplog.records if r.getMessage().startswith("tool breakers")]
        assert len(messages) == 2, messages
        assert f"127.0.0.1:{forwarder.port}" in messages[0] and "keeps breakers of its own" in messages[0]
        assert "answers again" in messages[1]
    finally:
        await forwarder.down()
        await store.client.aclose()
        await observer.client.aclose()


async def test_a_breaker_key_of_another_type_reads_as_closed_and_is_replaced(redis_url, redis_prefix, clock, caplog):
    store = RedisBreakerStore.from_url(redis_url, redis_prefix)
    raw = redis.Redis.from_url(redis_url)
    gateway, backend = flaky_gateway(clock, store)
    backend["healthy"] = True
    try:
        raw.rpush(f"{redis_prefix}weather", "not", "a", "snapshot")
        with caplog.at_level(logging.WARNING, logger="reactgraph.tools"):
            assert (await gateway.execute(call("weather", {"city": "Oslo"}))).ok
            assert (await gateway.execute(call("weather", {"city": "Oslo"}))).ok
        warnings = [r.getMessage() for r in caplog.records if "breaker state" in r.getMessage()]
        assert len(warnings) == 1 and "WRONGTYPE" in warnings[0], warnings
        assert raw.type(f"{redis_prefix}weather") == b"string"
    finally:
        raw.close()
        await store.client.aclose()
