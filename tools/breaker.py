"""The circuit breaker: a tool that keeps failing is refused for a while, so a run stops spending its time on it.

Per tool, CLOSED → OPEN after `failure_threshold` failures in a row → HALF_OPEN after `cooldown_s`, when one probe
call is let through → CLOSED if it succeeds (OPEN again if not). An open circuit refuses the call and tells the
model when the tool will be tried again and which tools it still has. The gateway's two steps are
`CircuitBreakerPolicy` (before the concurrency limit) and `BreakerRecheck` (inside it, after a wait for a slot).

The transitions are pure functions over a `BreakerSnapshot`, so any store can apply them atomically: this
process's (`MemoryBreakerStore`) or Redis (`RedisBreakerStore`), where several workers share one breaker.
Our own small class rather than purgatory or pybreaker: purgatory reads `time.time()` directly (no injectable
clock) and lets every call through while half-open; pybreaker's async support goes through Tornado. We need one
probe at a time, a testable clock, and state that can live in Redis.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from reactgraph.errors import ReactGraphError
from reactgraph.tools import untrusted
from reactgraph.tools.call import Handler, ToolResult, ToolStatus, emit

if TYPE_CHECKING:
    from reactgraph.tools.gateway import ToolRegistry  # the gateway holds the registry these steps read


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True)
class BreakerSnapshot:
    """Everything a breaker remembers; immutable so a shared store can compare-and-set it."""

    state: BreakerState = BreakerState.CLOSED
    consecutive_failures: int = 0
    opened_at: float = 0.0
    # Start time of the half-open probe in flight; a probe older than the cool-down counts as lost.
    probe_started_at: float | None = None


@dataclass(frozen=True, slots=True)
class BreakerConfig:
    failure_threshold: int = 2
    cooldown_s: float = 30.0


def admit(s: BreakerSnapshot, now: float, cfg: BreakerConfig) -> tuple[bool, BreakerSnapshot]:
    """May a call go through now? Half-open admits a single probe."""
    if s.state is BreakerState.CLOSED:
        return True, s
    if s.state is BreakerState.OPEN:
        if now - s.opened_at >= cfg.cooldown_s:
            return True, replace(s, state=BreakerState.HALF_OPEN, probe_started_at=now)
        return False, s
    probe_lost = s.probe_started_at is None or now - s.probe_started_at >= cfg.cooldown_s
    return (True, replace(s, probe_started_at=now)) if probe_lost else (False, s)


def on_success(s: BreakerSnapshot) -> BreakerSnapshot:
    # A straggler admitted before the circuit opened proves little; only the probe may close it.
    if s.state is BreakerState.OPEN or (s.state is BreakerState.CLOSED and not s.consecutive_failures):
        return s  # (the healthy case returns the same object: no allocation on the hot path)
    return BreakerSnapshot()


def on_failure(s: BreakerSnapshot, now: float, cfg: BreakerConfig) -> BreakerSnapshot:
    failures = s.consecutive_failures + 1
    if s.state is BreakerState.HALF_OPEN or (s.state is BreakerState.CLOSED and failures >= cfg.failure_threshold):
        return BreakerSnapshot(BreakerState.OPEN, failures, opened_at=now)
    return replace(s, consecutive_failures=failures)


def on_neutral(s: BreakerSnapshot) -> BreakerSnapshot:
    """The call never reached the tool (e.g. no concurrency slot): free the probe slot, change nothing else."""
    return replace(s, probe_started_at=None) if s.state is BreakerState.HALF_OPEN else s


T = TypeVar("T")


class BreakerStore(Protocol):
    """Atomic read-modify-write of one breaker's snapshot, keyed by tool name."""

    async def read(self, name: str) -> BreakerSnapshot: ...

    async def update(self, name: str, change: Callable[[BreakerSnapshot], tuple[T, BreakerSnapshot]]) -> T: ...


class MemoryBreakerStore:
    """Snapshots in a dict. Updates never await, and hold a lock: blocking calls change them from many threads."""

    def __init__(self) -> None:
        self._snapshots: dict[str, BreakerSnapshot] = {}
        self._lock = threading.Lock()

    async def read(self, name: str) -> BreakerSnapshot:
        return self._snapshots.get(name) or BreakerSnapshot()

    async def update(self, name: str, change: Callable[[BreakerSnapshot], tuple[T, BreakerSnapshot]]) -> T:
        with self._lock:
            value, new = change(self._snapshots.get(name) or BreakerSnapshot())
            self._snapshots[name] = new
        return value


_log = logging.getLogger("reactgraph.tools")
MAX_SNAPSHOT_BYTES = 1024  # a snapshot is ~100 bytes of JSON


def _text(raw: bytes | str) -> str:
    return raw if isinstance(raw, str) else raw.decode("utf-8", "replace")


class _WatchedTooOften(ReactGraphError):
    """Other workers changed the key at every try: this change goes to this process's breakers instead."""


class _OtherKeyType(bytes):
    """What GET read from a key holding a list, a hash, …: not a snapshot either (see `_decode`)."""


async def _get(client: Any, key: str) -> bytes | str | None:
    from redis.exceptions import ResponseError

    try:
        return cast("bytes | str | None", await client.get(key))
    except ResponseError as exc:
        if not str(exc).startswith("WRONGTYPE"):
            raise
        return _OtherKeyType(b"WRONGTYPE")


def _snapshot(data: Any) -> BreakerSnapshot:
    """A snapshot from its JSON form, each field checked; ValueError (or TypeError, KeyError) for anything else."""
    if not isinstance(data, dict):
        raise TypeError(f"a JSON {type(data).__name__}, not an object")
    failures, opened, probe = data["consecutive_failures"], data["opened_at"], data["probe_started_at"]
    if type(failures) is not int or not 0 <= failures < 2**53:
        raise ValueError("consecutive_failures is not a count")
    for value in (opened, probe):
        if value is not None and (type(value) not in (int, float) or not math.isfinite(value) or value < 0):
            raise ValueError("a time is not a finite number of seconds")
    if opened is None:
        raise ValueError("opened_at is missing")
    return BreakerSnapshot(BreakerState(data["state"]), failures, float(opened),
                           None if probe is None else float(probe))


class RedisBreakerStore:
    """Snapshots as JSON strings in Redis, changed with WATCH/MULTI so concurrent workers never lose a transition.

    Shared state is a help, not a dependency: while Redis cannot be reached (refused, timed out, a failover) this
    process keeps breakers of its own (a `MemoryBreakerStore`), says so once, and tries Redis again after
    RETRY_AFTER_S; the gateway never raises for its breaker store. What the key holds is input: anything that is
    not a snapshot (another type of key included) reads as closed and is replaced (`_decode`)."""

    RETRY_AFTER_S = 5.0  # while Redis is down, calls do not each wait for a connection to fail
    MAX_WATCH_RETRIES = 100  # WATCH conflicts in a row before this change is applied to this process's breakers

    def __init__(self, client: Any, prefix: str = "reactgraph:breaker:", url: str = "") -> None:
        # `client` is a `redis.asyncio.Redis`; breaker state must be shared, so the clock must be wall time.
        self.client = client
        self.prefix = prefix
        self.url = url  # as it may be shown (no password): for the messages
        self._local = MemoryBreakerStore()
        self._down_until: float | None = None  # monotonic; None while Redis answers

    @classmethod
    def from_url(cls, url: str, prefix: str = "reactgraph:breaker:") -> RedisBreakerStore:
        # imported lazily: only shared-state users need a client. The savers' kind of client: a bounded pool, a
        # read timeout, and a bad URL refused in one line.
        from reactgraph.memory.redis_checkpoint.pool import new_client
        from reactgraph.memory.redis_checkpoint.settings import PoolLimits, redact

        return cls(new_client(url, {}, PoolLimits.resolve(None, None), True), prefix, redact(url))

    async def read(self, name: str) -> BreakerSnapshot:
        return await self._shared_or_local(lambda: self._read_shared(name), lambda: self._local.read(name))

    async def update(self, name: str, change: Callable[[BreakerSnapshot], tuple[T, BreakerSnapshot]]) -> T:
        return await self._shared_or_local(lambda: self._update_shared(name, change),
                                           lambda: self._local.update(name, change))

    async def _shared_or_local(self, shared: Callable[[], Awaitable[T]], local: Callable[[], Awaitable[T]]) -> T:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        if self._down_until is not None and time.monotonic() < self._down_until:
            return await local()
        where = self.url or "Redis"
        try:
            value = await shared()
        except _WatchedTooOften as exc:
            _log.warning("tool breakers: %s; this change is kept by this process only", exc)
            return await local()
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            if self._down_until is None:
                _log.warning("tool breakers: %s did not answer (%s); this process keeps breakers of its own and "
                             "tries again every %.0f s", where, str(exc)[:200], self.RETRY_AFTER_S)
            self._down_until = time.monotonic() + self.RETRY_AFTER_S
            return await local()
        if self._down_until is not None:
            self._down_until = None
            _log.warning("tool breakers: %s answers again; breakers are shared again", where)
        return value

    async def _read_shared(self, name: str) -> BreakerSnapshot:
        return self._decode(name, await _get(self.client, self.prefix + name))

    async def _update_shared(self, name: str, change: Callable[[BreakerSnapshot], tuple[T, BreakerSnapshot]]) -> T:
        from redis.exceptions import WatchError

        key = self.prefix + name
        async with self.client.pipeline(transaction=True) as pipe:
            for _ in range(self.MAX_WATCH_RETRIES):
                try:
                    await pipe.watch(key)
                    raw = await _get(pipe, key)
                    current = self._decode(name, raw)
                    value, new = change(current)
                    # A value that only read as closed (no snapshot) is replaced too: it warns once, not per call.
                    unreadable = (raw is not None and current == BreakerSnapshot()
                                  and _text(raw) != self._encode(current))
                    if new != current or unreadable:
                        pipe.multi()
                        pipe.set(key, self._encode(new))
                        await pipe.execute()
                    else:
                        await pipe.unwatch()
                    return value
                except WatchError:
                    continue
        raise _WatchedTooOften(f"{self.MAX_WATCH_RETRIES} concurrent changes in a row to {key[:100]}")

    @staticmethod
    def _encode(snapshot: BreakerSnapshot) -> str:
        return json.dumps({"state": snapshot.state.value, "consecutive_failures": snapshot.consecutive_failures,
                           "opened_at": snapshot.opened_at, "probe_started_at": snapshot.probe_started_at})

    def _decode(self, name: str, raw: bytes | str | None) -> BreakerSnapshot:
        """The stored snapshot, allow-listed: anything else in the key (bad JSON, another shape, an unknown state,
        a number out of range, a value past MAX_SNAPSHOT_BYTES) reads as a closed breaker, with a warning, and
        is overwritten by the breaker's next change. Redis content is input: a bad value must not stop the
        tool's calls."""
        if not raw:
            return BreakerSnapshot()
        try:
            if isinstance(raw, _OtherKeyType):
                raise TypeError("WRONGTYPE: the key holds another type than a string")
            if len(raw) > MAX_SNAPSHOT_BYTES:
                raise ValueError(f"over {MAX_SNAPSHOT_BYTES} bytes")
            return _snapshot(json.loads(raw))
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            _log.warning("the breaker state of %s in Redis (%s) is not a breaker snapshot (%s): read as closed",
                         name[:100], self.prefix + name[:100], str(exc)[:200])
            return BreakerSnapshot()


class CircuitBreaker:
    """One tool's breaker. Errors and timeouts count as failures; refusals before the tool ran do not."""

    def __init__(self, name: str, config: BreakerConfig | None = None, *,
                 clock: Callable[[], float] = time.time, store: BreakerStore | None = None) -> None:
        self.name = name
        self.config = config or BreakerConfig()
        self.clock = clock
        self.store = store or MemoryBreakerStore()

    async def try_acquire(self) -> bool:
        return await self.admit() is not None

    async def admit(self, call: ToolResult | None = None) -> BreakerState | None:
        """Admit a call now: the state it was admitted in (CLOSED, or else it is the probe), or None if refused."""
        now = self.clock()

        def change(s: BreakerSnapshot) -> tuple[tuple[BreakerState | None, BreakerSnapshot, BreakerSnapshot],
                                                BreakerSnapshot]:
            admitted, new = admit(s, now, self.config)
            return ((s.state if admitted else None), s, new), new

        admitted_in, old, new = await self.store.update(self.name, change)
        if call is not None and call.sink is not None:
            self._announce(call, old, new)
        return admitted_in

    async def record(self, status: ToolStatus, call: ToolResult | None = None) -> None:
        now = self.clock()
        if status.counts_as_failure:
            step = lambda s: on_failure(s, now, self.config)  # noqa: E731
        elif status in (ToolStatus.RATE_LIMITED, ToolStatus.INVALID_ARGS):  # neither failure nor proof of health
            step = on_neutral
        else:
            step = on_success

        def change(s: BreakerSnapshot) -> tuple[tuple[BreakerSnapshot, BreakerSnapshot], BreakerSnapshot]:
            new = step(s)
            return (s, new), new

        old, new = await self.store.update(self.name, change)
        if call is not None and call.sink is not None:
            self._announce(call, old, new)

    def _announce(self, call: ToolResult, old: BreakerSnapshot, new: BreakerSnapshot) -> None:
        """A `breaker` event when this call moved the circuit (open, half_open, closed); only the mover tells."""
        if new.state is not old.state and call.sink is not None:
            emit(call.sink, self.name, call.call_id, "breaker", state=new.state.value, previous=old.state.value,
                 failures=new.consecutive_failures, cooldown_s=self.config.cooldown_s)

    async def snapshot(self) -> BreakerSnapshot:
        return await self.store.read(self.name)

    def retry_in(self, snapshot: BreakerSnapshot) -> float:
        """Seconds until an open circuit admits its probe."""
        return max(0.0, snapshot.opened_at + self.config.cooldown_s - self.clock())


class CircuitBreakers:
    """The breakers of a gateway, one per tool, created on first use and sharing one store and clock."""

    def __init__(self, config: BreakerConfig | None = None, *, clock: Callable[[], float] = time.time,
                 store: BreakerStore | None = None) -> None:
        self.config = config or BreakerConfig()
        self.clock = clock
        self.store = store or MemoryBreakerStore()
        self._breakers: dict[str, CircuitBreaker] = {}

    def for_tool(self, name: str) -> CircuitBreaker:
        breaker = self._breakers.get(name)
        if breaker is None:
            breaker = self._breakers[name] = CircuitBreaker(name, self.config, clock=self.clock, store=self.store)
        return breaker


def refusal(call: ToolResult, breaker: CircuitBreaker, snap: BreakerSnapshot, others: list[str]) -> ToolResult:
    """The `circuit_open` result: when the tool will be tried again, and which tools remain."""
    retry_in = breaker.retry_in(snap)
    return call.answer(ToolStatus.CIRCUIT_OPEN,
                       untrusted.circuit_open(call.name, retry_in, snap.consecutive_failures, others),
                       retry_in_s=round(retry_in, 3))


class CircuitBreakerPolicy:
    """Short-circuits calls to a tool whose circuit is open, telling the model when it will be retried."""

    def __init__(self, breakers: CircuitBreakers, registry: ToolRegistry) -> None:
        self.breakers = breakers
        self.registry = registry

    async def __call__(self, call: ToolResult, proceed: Handler) -> ToolResult:
        breaker = self.breakers.for_tool(call.name)
        admitted_in = await breaker.admit(call)
        if admitted_in is None:
            others = [n for n in self.registry.available_names(call.session) if n != call.name]
            return refusal(call, breaker, await breaker.snapshot(), others)
        call.breaker_probe = admitted_in is not BreakerState.CLOSED
        result = await proceed(call)
        if not call.breaker_settled:  # it never got a concurrency slot (rate_limited)
            await breaker.record(result.status, call)
        return result


class BreakerRecheck:
    """Inside the concurrency slot: asks the breaker again after a wait, and records the outcome before the
    slot is given up, so the calls queued behind see the circuit as this call left it.

    Without it, 40 calls of a hanging tool in one model reply all passed the breaker while it was closed,
    queued for the 5 slots, and then ran (and hung) one batch after another long after the circuit opened.
    A call that waited is admitted again only if the circuit is still closed, or as the new half-open probe.
    """

    def __init__(self, breakers: CircuitBreakers, registry: ToolRegistry) -> None:
        self.breakers = breakers
        self.registry = registry

    async def __call__(self, call: ToolResult, proceed: Handler) -> ToolResult:
        breaker = self.breakers.for_tool(call.name)
        call.breaker_settled = True
        if call.waited_for_slot and not call.breaker_probe:
            snap = await breaker.snapshot()
            if snap.state is not BreakerState.CLOSED:
                if await breaker.admit(call) is None:  # it never ran: nothing to record
                    others = [n for n in self.registry.available_names(call.session) if n != call.name]
                    return refusal(call, breaker, await breaker.snapshot(), others)
                call.breaker_probe = True
        result = await proceed(call)
        await breaker.record(result.status, call)
        return result
