"""Resilience: the steps that keep a failing or slow tool from taking the run down with it, and the boundary
that turns whatever a tool raises into a result.

- `CircuitBreakerPolicy` (and `BreakerRecheck` after a wait for a slot): a per-tool circuit breaker, CLOSED →
  OPEN → HALF_OPEN probe → CLOSED; an open circuit refuses the call and names the tools still usable.
- `Bulkhead`: the concurrency limit, at most so many calls in flight, gateway-wide and optionally per tool.
- `Normalise`: turns what the inner steps produced (a value or an exception) into a model-readable `ToolResult`.
- `Timeout`: a hard time limit per call, retries included.
- `Retry`: transient failures are tried again with exponential backoff and full jitter.

The breaker's transitions are pure functions over a `BreakerSnapshot`, so any store can apply them atomically:
this process's (`MemoryBreakerStore`) or Redis (`RedisBreakerStore`), where several workers share one breaker.
Our own small class rather than purgatory or pybreaker: purgatory reads `time.time()` directly (no injectable
clock) and lets every call through while half-open; pybreaker's async support goes through Tornado. We need one
probe at a time, a testable clock, and state that can live in Redis.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from reactgraph.errors import ReactGraphError
from reactgraph.tools import untrusted
from reactgraph.tools.call import Handler, ToolInputError, ToolResult, ToolStatus, TransientToolError, emit, tool_fault
from reactgraph.tools.guards import schema_hint
from reactgraph.tools.threads import now, pause

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


class Normalise:
    """The boundary below which tools may raise anything; above it, every outcome is a `ToolResult`.

    Only the caller stopping the run (its task cancelled, a user's Ctrl-C) passes through, re-raised: see
    call.py (`tool_fault`) for how that is told apart from a tool raising KeyboardInterrupt or
    CancelledError itself.
    """

    async def __call__(self, call: ToolResult, proceed: Handler) -> ToolResult:
        try:
            return await proceed(call)
        except TimeoutError:
            return call.answer(ToolStatus.TIMEOUT, untrusted.timeout(call.name, call.tool.timeout_s))
        except ToolInputError as exc:
            return call.answer(ToolStatus.INVALID_ARGS,
                               untrusted.invalid_args(call.name, str(exc), schema_hint(call.tool)))
        except BaseException as exc:  # noqa: BLE001 - a tool's fault, of any kind, must never escape the gateway
            return tool_fault(call, exc)


class Bulkhead:
    """At most `max_concurrent` calls in flight (and a tool's own `max_concurrency`); others wait their turn.

    A call that waits longer than `max_wait_s` for a slot ends as `rate_limited` instead of queueing forever.
    Slots are kept per event loop, because asyncio primitives cannot be shared across loops, and for blocking
    calls (sync callers, on any thread) in thread semaphores of their own.
    """

    def __init__(self, max_concurrent: int = 5, max_wait_s: float = 60.0) -> None:
        if max_concurrent < 1:
            raise ValueError("max_concurrent must be >= 1")
        self.max_concurrent = max_concurrent
        self.max_wait_s = max_wait_s
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str | None, asyncio.Semaphore]] = (
            weakref.WeakKeyDictionary())
        self._last_loop: asyncio.AbstractEventLoop | None = None
        self._last_semaphores: dict[str | None, asyncio.Semaphore] = {}
        self._blocking: dict[str | None, threading.Semaphore] = {}
        self._lock = threading.Lock()  # the counts below, and the blocking semaphores' creation
        self.in_flight = 0
        self.peak_in_flight = 0

    def _semaphore(self, key: str | None, size: int) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if loop is not self._last_loop:  # remembered: a WeakKeyDictionary lookup costs a weakref per call
            self._last_loop, self._last_semaphores = loop, self._loops.setdefault(loop, {})
        per_loop = self._last_semaphores
        sem = per_loop.get(key)
        if sem is None:
            sem = per_loop[key] = asyncio.Semaphore(size)
        return sem

    def _thread_semaphore(self, key: str | None, size: int) -> threading.Semaphore:
        sem = self._blocking.get(key)
        if sem is None:
            with self._lock:
                sem = self._blocking.setdefault(key, threading.Semaphore(size))
        return sem

    async def _acquire_all(self, semaphores: list[asyncio.Semaphore], wait: bool) -> list[asyncio.Semaphore]:
        """Take every slot or none; waiting (never the free-slot fast path) is bounded by `max_wait_s`."""
        held: list[asyncio.Semaphore] = []
        try:
            if wait:
                async with asyncio.timeout(self.max_wait_s):
                    for sem in semaphores:
                        await sem.acquire()
                        held.append(sem)
            else:  # a free slot is taken without arming a timer: this is the hot path
                for sem in semaphores:
                    await sem.acquire()
                    held.append(sem)
        except BaseException:
            for sem in held:
                sem.release()
            raise
        return held

    def _take_blocking(self, call: ToolResult) -> list[threading.Semaphore]:
        """`_take` for a blocking call: every slot or none, waited for by this thread up to `max_wait_s`."""
        semaphores = [self._thread_semaphore(None, self.max_concurrent)]
        if call.tool.max_concurrency:
            semaphores.insert(0, self._thread_semaphore(call.name, call.tool.max_concurrency))
        held = [sem for sem in semaphores if sem.acquire(blocking=False)]
        if len(held) < len(semaphores):
            for sem in held:
                sem.release()
            self._waiting(call)
            deadline, held = time.monotonic() + self.max_wait_s, []
            try:
                for sem in semaphores:
                    if not sem.acquire(timeout=max(deadline - time.monotonic(), 0.0)):
                        raise TimeoutError
                    held.append(sem)
            except BaseException:
                for sem in held:
                    sem.release()
                raise
        return held

    async def _take(self, call: ToolResult) -> list[asyncio.Semaphore]:
        semaphores = [self._semaphore(None, self.max_concurrent)]
        if call.tool.max_concurrency:
            semaphores.insert(0, self._semaphore(call.name, call.tool.max_concurrency))
        if any(sem.locked() for sem in semaphores):
            self._waiting(call)
        return await self._acquire_all(semaphores, call.waited_for_slot)

    def _waiting(self, call: ToolResult) -> None:
        call.waited_for_slot = True
        if call.sink is not None:
            emit(call.sink, call.name, call.call_id, "waiting", in_flight=self.in_flight,
                 max_concurrent=self.max_concurrent, tool_max_concurrency=call.tool.max_concurrency)

    async def __call__(self, call: ToolResult, proceed: Handler) -> ToolResult:
        started = time.monotonic()
        try:
            held: list[Any] = self._take_blocking(call) if call.blocking else await self._take(call)
        except TimeoutError:
            return call.answer(ToolStatus.RATE_LIMITED,
                               untrusted.rate_limited(call.name, time.monotonic() - started))
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            return await proceed(call)
        finally:
            with self._lock:
                self.in_flight -= 1
            for sem in held:
                sem.release()


class Timeout:
    """Bounds the whole call by the tool's `timeout_s`; an overrun raises `TimeoutError` for `Normalise`.

    It wraps retry (not each attempt) so a result always arrives within the tool's timeout, whatever
    the backoff; retry reads the deadline to avoid starting an attempt it cannot finish.
    """

    async def __call__(self, call: ToolResult, proceed: Handler) -> ToolResult:
        if call.tool.timeout_s is None:  # the tool declared no deadline
            return await proceed(call)
        call.deadline = now(call.blocking) + call.tool.timeout_s
        try:
            if call.blocking:  # no loop to cancel a wait: each wait below ends at the deadline itself (threads.py)
                return await proceed(call)
            async with asyncio.timeout_at(call.deadline):
                return await proceed(call)
        except TimeoutError:
            if call.sink is not None:
                emit(call.sink, call.name, call.call_id, "timeout", timeout_s=call.tool.timeout_s,
                     attempts=call.attempts)
            raise


class Retry:
    """Retries only `TransientToolError`s, up to the tool's `max_attempts`, and only while time remains.

    Timeouts are never retried (the timeout policy sits outside this one) and neither are argument
    errors (validation ran before, and `ToolInputError` is not transient).
    """

    def __init__(self, base_delay_s: float = 0.2, max_delay_s: float = 2.0, rng: random.Random | None = None) -> None:
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self.rng = rng or random.Random()

    def backoff(self, attempt: int) -> float:
        """Full jitter: a random delay up to base·2^(attempt-1), capped, so retrying workers spread out."""
        return self.rng.uniform(0, min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1)))

    async def __call__(self, call: ToolResult, proceed: Handler) -> ToolResult:
        while True:
            call.attempts += 1
            try:
                return await proceed(call)
            except TransientToolError as exc:
                if call.attempts >= call.tool.max_attempts:
                    raise
                delay = self.backoff(call.attempts)
                if call.deadline is not None and now(call.blocking) + delay >= call.deadline:
                    raise  # no time left for another attempt: report the real error, not a timeout
                if call.sink is not None:
                    emit(call.sink, call.name, call.call_id, "retry", attempt=call.attempts + 1,
                         max_attempts=call.tool.max_attempts, error=type(exc).__name__, delay_s=round(delay, 3))
                await pause(call.blocking, delay)
