"""One turn at a time per session: a lease in Redis shared by every process and machine, or, where the
sessions are not in Redis (`memory`, SQLite), a lock inside this process — for sync code (`session_lease`) and
for asyncio code (`asession_lease`), by the same rules.

    with session_lease(graph, "alice"):          # a compiled graph, a RedisSaver, a redis.Redis or a URL
        graph.invoke({"messages": [...]}, {"configurable": {"thread_id": "alice"}})

    async with asession_lease(graph, "alice"):   # a graph, a RedisSaver or AsyncRedisSaver, a client, a URL
        await graph.ainvoke({"messages": [...]}, {"configurable": {"thread_id": "alice"}})

The Redis lease is `SET <prefix>{<session>}:lease <token…> NX PX <ttl>`, renewed by a heartbeat thread
every third of its expiry while the turn runs and deleted on exit only by its owner (a compare-and-delete
script), so a process that dies frees the session when its lease expires. The key sits in the session's hash
slot (the checkpoint keys' `{<session>}` tag), so a Redis Cluster keeps a session's lease beside its
checkpoints. Its value is `<random token>\\0<since, ms>\\0<owner>`: the token proves ownership (renew and release
compare it inside a script), the rest tells a waiting user who holds it.

`asession_lease` waits with `asyncio.sleep` and reaches Redis through an asyncio client (an AsyncRedisSaver's,
or one of its own for a URL) or, on a sync client, from worker threads. Both renew from a thread of their own —
the asyncio side over a sync twin of its client (the same server, its own connections) — so a busy or blocked
event loop (a CPU-bound tool, a slow synchronous call) cannot starve the renewals and let another worker take
a session whose turn is still running.

redis-py is loaded only once a lease is taken in Redis: a graph on InMemorySaver never loads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import re
import secrets
import socket
import sys
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from reactgraph.errors import ReactGraphError
from reactgraph.memory.redis_checkpoint.layout import normalise_prefix, thread_base
from reactgraph.memory.redis_checkpoint.settings import (
    CheckpointStoreUnavailable,
    PoolLimits,
    answer_wait,
    client_url,
    unavailable,
)
from reactgraph.memory.session_id import check_session_id

if TYPE_CHECKING:
    import redis

TTL_ENV = "REACTGRAPH_SESSION_LEASE_TTL"
DEFAULT_TTL_S = 30.0  # how long a dead holder keeps the session; renewals keep a live one's for good
MAX_TTL_S = 3600.0
DEFAULT_WAIT_S = 300.0  # how long a second turn waits for the first before giving up


class SessionBusy(ReactGraphError, RuntimeError):
    """Another turn holds the session and did not finish within the wait; the message is one line."""

    def __init__(self, message: str, session: str, holder: LeaseHolder | None) -> None:
        super().__init__(message)
        self.session, self.holder = session, holder


class SessionLeaseLost(ReactGraphError, RuntimeError):
    """The lease ran out while this turn still ran (renewals failed): another turn may have started."""


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds a session, as far as the lease tells (it is read from Redis: shown, never trusted)."""

    since: datetime | None
    owner: str

    def describe(self) -> str:
        since = self.since.astimezone().strftime("%Y-%m-%d %H:%M:%S") if self.since else "an unknown time"
        return f"since {since}, {self.owner}" if self.owner else f"since {since}"


WaitNotice = Callable[[str, LeaseHolder | None, float], None]  # (session, holder, wait_s): about to wait


class SessionLease:
    """A held session: `check()` raises `SessionLeaseLost` once another turn could have taken it."""

    def __init__(self, session: str, scope: str, ttl_s: float) -> None:
        self.session, self.scope, self.ttl_s = session, scope, ttl_s  # scope: "redis" | "process"
        self.valid_until = math.inf  # (monotonic) when it runs out unless renewed; a process lock never does
        self._lost_reason: str | None = None

    @property
    def lost_reason(self) -> str | None:
        """Why another turn could have the session now: a failed renewal, or (while a renewal still waits for
        a server that stopped answering) the last confirmed expiry is past."""
        if self._lost_reason is None and time.monotonic() >= self.valid_until:
            return f"its renewal was not confirmed within its {self.ttl_s:g} s expiry"
        return self._lost_reason

    @lost_reason.setter
    def lost_reason(self, reason: str | None) -> None:
        self._lost_reason = reason

    @property
    def lost(self) -> bool:
        return self.lost_reason is not None

    def check(self) -> None:
        if self.lost_reason is not None:
            raise SessionLeaseLost(f"lost the lease on session {self.session!r} ({self.lost_reason}); another "
                                   "turn may have started, so this one stops here: the session is saved up to "
                                   "its last checkpoint")


class _Backend(Protocol):
    scope: str

    def key(self, session: str) -> str: ...
    def try_acquire(self, session: str, ttl_s: float) -> tuple[SessionLease | None, LeaseHolder | None]: ...
    def release(self, lease: SessionLease) -> None: ...
    def close(self) -> None: ...


def lease_ttl(ttl_s: float | None = None) -> float:
    """The lease expiry in seconds: the argument, else $REACTGRAPH_SESSION_LEASE_TTL, else 30."""
    if ttl_s is None:
        raw = os.environ.get(TTL_ENV, "").strip()
        try:
            ttl_s = float(raw) if raw else DEFAULT_TTL_S
        except ValueError:
            raise ValueError(f"{TTL_ENV}={raw[:40]!r} is not a number of seconds") from None
    if not (math.isfinite(ttl_s) and 0.05 <= ttl_s <= MAX_TTL_S):
        raise ValueError(f"the session lease expiry must be between 0.05 and {MAX_TTL_S:g} seconds, got {ttl_s:g}")
    return ttl_s


def wait_within_lease(ttl_s: float | None = None) -> float:
    """The longest one wait inside a turn may last (e.g. an MCP server's start): two thirds of the lease's
    expiry, so the wait ends, and the turn can say why, before a lease whose renewals failed could expire."""
    return lease_ttl(ttl_s) * 2 / 3


_held = threading.local()  # lease key -> the SessionLease this thread holds, so nested leases share it


def _held_here() -> dict[str, SessionLease]:
    if not hasattr(_held, "leases"):
        _held.leases = {}
    return _held.leases


@contextmanager
def session_lease(target: Any, session: str, *, ttl_s: float | None = None, wait_s: float = DEFAULT_WAIT_S,
                  on_wait: WaitNotice | None = None) -> Iterator[SessionLease]:
    """Hold `session` for one turn: wait up to `wait_s` for another turn to end (`on_wait` is told once),
    else raise `SessionBusy`. A nested lease on a session this thread holds shares the outer one."""
    session = check_session_id(session)
    ttl = lease_ttl(ttl_s)
    backend = backend_for(target)
    try:
        key = backend.key(session)
        outer = _held_here().get(key)
        if outer is not None:
            yield outer
            return
        lease = _acquire(backend, session, ttl, max(0.0, wait_s), on_wait)
        _held_here()[key] = lease
        try:
            yield lease
        finally:
            del _held_here()[key]
            backend.release(lease)
    finally:
        backend.close()


def _acquire(backend: _Backend, session: str, ttl_s: float, wait_s: float,
             on_wait: WaitNotice | None) -> SessionLease:
    """Try now, then poll (see `LeaseWait`) until the holder is gone or the wait is over."""
    wait = LeaseWait(session, wait_s, on_wait)
    while True:
        lease, holder = backend.try_acquire(session, ttl_s)
        if lease is not None:
            return lease
        time.sleep(wait.next_pause(holder))


class LeaseWait:
    """How a turn waits for a busy session, for the sync and the async lease alike: pauses from 50 ms growing to
    500 ms, the caller told once that it waits, and `SessionBusy` when the whole wait is over."""

    def __init__(self, session: str, wait_s: float, on_wait: WaitNotice | None) -> None:
        self.session, self.wait_s, self.on_wait = session, wait_s, on_wait
        self.deadline, self.pause = time.monotonic() + wait_s, FIRST_PAUSE_S

    def next_pause(self, holder: LeaseHolder | None) -> float:
        """Seconds to sleep before the next try; raises SessionBusy once the wait is over."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise busy(self.session, holder, self.wait_s)
        if self.on_wait is not None:
            self.on_wait(self.session, holder, self.wait_s)
            self.on_wait = None  # told once
        pause, self.pause = min(self.pause, remaining), min(self.pause * 1.5, LAST_PAUSE_S)
        return pause


FIRST_PAUSE_S, LAST_PAUSE_S = 0.05, 0.5  # how often a waiting turn looks again


def busy(session: str, holder: LeaseHolder | None, wait_s: float) -> SessionBusy:
    """The one-line refusal of a session still held after the whole wait."""
    shown = f" ({holder.describe()})" if holder else ""
    waited = f"still busy after waiting {wait_s:g} s" if wait_s else "not waiting"
    return SessionBusy(f"session {session!r} is busy with another turn{shown}; {waited}: try again when it has "
                       "finished", session, holder)


def backend_for(target: Any, *, for_asyncio: bool = False) -> Any:
    """Redis when the sessions live in Redis (a graph's Redis saver, a saver, a client, a URL); else this
    process. Modules are looked up, not imported: a graph on InMemorySaver never loads redis-py."""
    saver = getattr(target, "checkpointer", target)  # a compiled graph names its checkpointer
    savers = tuple(getattr(sys.modules.get(module), name, None) for module, name in _REDIS_SAVERS)
    clients = tuple(getattr(sys.modules.get(module), name, None) for module in ("redis", "redis.asyncio")
                    for name in ("Redis", "RedisCluster"))
    is_saver, is_client = (isinstance(saver, tuple(t for t in kinds if t)) for kinds in (savers, clients))
    if not (is_saver or is_client or isinstance(saver, str)):
        return _PROCESS_LEASES
    on_loop = isinstance(saver, tuple(t for t in (savers[1], *clients[2:]) if t))
    if on_loop and not for_asyncio:
        raise TypeError("an asyncio Redis client (an AsyncRedisSaver's) cannot hold a lease from sync code: use "
                        "`async with asession_lease(...)`, or pass the Redis URL to session_lease")
    leases: Any = AsyncRedisLeases if for_asyncio else RedisLeases
    if isinstance(saver, str):
        return leases.from_url(saver)
    return leases(saver.client, saver.prefix) if is_saver else leases(saver)  # a saver's leases: under its prefix


_REDIS_SAVERS = (("reactgraph.memory.redis_checkpoint.savers", "RedisSaver"),
                 ("reactgraph.memory.redis_checkpoint.savers", "AsyncRedisSaver"))


class _ProcessLeases:
    """Sessions that live in this process (InMemorySaver) or in a file (SQLite): one turn per session among
    this process's threads. Other processes on the same SQLite file are not held off."""

    scope = "process"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders: dict[str, LeaseHolder] = {}

    def key(self, session: str) -> str:
        return f"process\0{session}"

    def try_acquire(self, session: str, ttl_s: float, owner: str | None = None
                    ) -> tuple[SessionLease | None, LeaseHolder | None]:
        with self._lock:
            holder = self._holders.get(session)
            if holder is not None:
                return None, holder
            owner = owner or f"thread {threading.current_thread().name!r}"
            self._holders[session] = LeaseHolder(datetime.now().astimezone(), f"{owner} of this process")
        return SessionLease(session, self.scope, ttl_s), None

    def release(self, lease: SessionLease) -> None:
        with self._lock:
            self._holders.pop(lease.session, None)

    def close(self) -> None:
        pass


_PROCESS_LEASES = _ProcessLeases()


# asyncio: the same lease, without blocking the event loop.

# task -> (lease key -> the SessionLease it holds): a nested lease in the same task shares the outer one,
# while a task it starts (which copies its context) takes its own, as a separate turn would.
_HELD_BY_TASK: weakref.WeakKeyDictionary[asyncio.Task, dict[str, SessionLease]] = weakref.WeakKeyDictionary()


class _ProcessLeasesOnLoop:
    """The in-process lock of `session_lease`, as an async backend: sync and async turns exclude each other."""

    scope = "process"

    def key(self, session: str) -> str:
        return _PROCESS_LEASES.key(session)

    async def try_acquire(self, session: str, ttl_s: float) -> tuple[SessionLease | None, LeaseHolder | None]:
        task = asyncio.current_task()
        return _PROCESS_LEASES.try_acquire(session, ttl_s, f"task {task.get_name() if task else '?'!r}")

    async def release(self, lease: SessionLease) -> None:
        _PROCESS_LEASES.release(lease)

    async def close(self) -> None:
        pass


@asynccontextmanager
async def asession_lease(target: Any, session: str, *, ttl_s: float | None = None,
                         wait_s: float = DEFAULT_WAIT_S, on_wait: WaitNotice | None = None
                         ) -> AsyncIterator[SessionLease]:
    """Hold `session` for one turn: wait up to `wait_s` for another turn to end (`on_wait` is told once),
    else raise `SessionBusy`. A nested lease on a session this task holds shares the outer one."""
    session = check_session_id(session)
    ttl = lease_ttl(ttl_s)
    backend = backend_for(target, for_asyncio=True)
    if backend is _PROCESS_LEASES:
        backend = _ProcessLeasesOnLoop()
    task = asyncio.current_task()
    assert task is not None, "asession_lease runs inside an asyncio task"
    try:
        key = backend.key(session)
        held = _HELD_BY_TASK.setdefault(task, {})
        outer = held.get(key)
        if outer is not None:
            yield outer
            return
        lease = await _acquire_async(backend, session, ttl, max(0.0, wait_s), on_wait)
        held[key] = lease
        try:
            yield lease
        finally:
            del held[key]
            await backend.release(lease)
    finally:
        await backend.close()


async def _acquire_async(backend: Any, session: str, ttl_s: float, wait_s: float,
                   on_wait: WaitNotice | None) -> SessionLease:
    """`session_lease`'s wait (the same `LeaseWait`), yielding to the event loop between tries."""
    wait = LeaseWait(session, wait_s, on_wait)
    while True:
        lease, holder = await backend.try_acquire(session, ttl_s)
        if lease is not None:
            return lease
        await asyncio.sleep(wait.next_pause(holder))


# The Redis side of both: take, renew and release `<prefix>{<session>}:lease`.

log = logging.getLogger("reactgraph.memory.lease")
_OWNER = re.compile(r"pid \d{1,10} on [A-Za-z0-9._-]{1,64}")  # what new_value writes; anything else is not shown
_MAX_VALUE = 512  # bytes of a lease value read back: it is Redis content, so bounded and never trusted

# Both compare the whole value, so only the holder that wrote it can extend or delete it.
_RENEW = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0"
_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


class RedisLease(SessionLease):
    """A lease held in Redis, and what stops its renewals (a thread's event, or an asyncio task) on release."""

    def __init__(self, session: str, ttl_s: float, key: str, value: str, sent: float) -> None:
        super().__init__(session, "redis", ttl_s)
        self.key, self.value = key, value
        self.valid_until = sent + ttl_s  # SET PX counts from when Redis ran it, which is after we sent it
        self.stopped = threading.Event()

    @property
    def ttl_ms(self) -> int:
        return max(1, round(self.ttl_s * 1000))

    def renewed(self, sent: float, outcome: Any) -> bool:
        """Take one renewal's outcome (the script's reply, or the error it raised); False once the lease is lost.

        A failed renewal is retried at the next beat (a timeout or a dropped connection may pass) until the
        lease would have run out; meanwhile `lost` already says so once the last confirmed expiry is past."""
        if isinstance(outcome, Exception):
            if time.monotonic() < self.valid_until:
                log.warning("session %s: lease renewal failed, retried at the next beat (%s)", self.session,
                            _first_line(outcome), extra={"redis": {
                                "event": "lease_renewal_failed", "session": self.session,
                                "error": f"{type(outcome).__name__}: {_first_line(outcome)}"}})
                return True
            self.lost_reason = f"Redis did not answer its renewal for {self.ttl_s:g} s: {_first_line(outcome)}"
            self._log_lost()
            return False
        if not outcome:
            self.lost_reason = "it expired before it was renewed"
            self._log_lost()
            return False
        self.valid_until = sent + self.ttl_s
        return True


    def _log_lost(self) -> None:
        log.error("session %s: lease lost: %s", self.session, self.lost_reason,
                  extra={"redis": {"event": "lease_lost", "session": self.session, "error": self.lost_reason}})


class _LeaseRules:
    """What both sides share: the key, the value written, and the one-line error of an unreachable Redis."""

    scope = "redis"
    client: Any
    prefix: str
    url: str

    def key(self, session: str) -> str:
        return thread_base(self.prefix, session) + "lease"

    @staticmethod
    def new_value() -> str:
        return f"{secrets.token_hex(16)}\0{int(time.time() * 1000)}\0pid {os.getpid()} on {_host()}"

    def down(self, exc: BaseException) -> CheckpointStoreUnavailable:
        from reactgraph.memory.redis_checkpoint.cluster_wire import connection_kwargs

        pool = getattr(self.client, "connection_pool", None)  # a RedisCluster has a pool per node
        wait = answer_wait(pool) if pool is not None else connection_kwargs(self.client).get("socket_timeout")
        return unavailable(self.url, exc, wait)


class RedisLeases(_LeaseRules):
    """Session leases on one Redis (a sync client), under the checkpointer's key prefix."""

    def __init__(self, client: redis.Redis, prefix: str = "reactgraph", *, owns_client: bool = False) -> None:
        self.client, self.prefix, self._owns_client = client, normalise_prefix(prefix), owns_client
        self.url = client_url(client)
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)

    @classmethod
    def from_url(cls, url: str, prefix: str = "reactgraph") -> RedisLeases:
        from reactgraph.memory.redis_checkpoint.pool import new_client

        return cls(new_client(url, {}, PoolLimits.resolve(None, None), False), prefix, owns_client=True)

    def try_acquire(self, session: str, ttl_s: float) -> tuple[SessionLease | None, LeaseHolder | None]:
        """The lease if the session is free (SET NX PX), else who holds it."""
        key, value, sent = self.key(session), self.new_value(), time.monotonic()
        try:
            if self.client.set(key, value, nx=True, px=max(1, round(ttl_s * 1000))):
                lease = RedisLease(session, ttl_s, key, value, sent)
                self.start_renewing(lease)
                return lease, None
            held = self.client.getrange(key, 0, _MAX_VALUE - 1)
            if held and dead_here(session, held) and self._release(keys=[key], args=[held]):
                return self.try_acquire(session, ttl_s)  # its holder is gone: nobody else can have taken it since
        except _redis_down() as exc:
            raise self.down(exc) from exc
        return None, parse_holder(held) if held else None

    def start_renewing(self, lease: RedisLease) -> None:
        """Renew `lease` from a daemon thread of its own until it is released (`lease.stopped`) or lost."""
        threading.Thread(target=self._heartbeat, args=(lease,), name=f"session-lease {lease.session[:40]}",
                         daemon=True).start()

    def _heartbeat(self, lease: RedisLease) -> None:
        """Renew every third of the expiry until released or lost."""
        while not lease.stopped.wait(lease.ttl_s / 3):
            sent = time.monotonic()
            try:
                outcome = self._renew(keys=[lease.key], args=[lease.value, lease.ttl_ms])
            except Exception as exc:  # noqa: BLE001 - any failed renewal is retried until the expiry
                outcome = exc
            if not lease.renewed(sent, outcome):
                return

    def release(self, lease: SessionLease) -> None:
        """Stop renewing and delete the lease if it is still ours (else it expires by itself)."""
        assert isinstance(lease, RedisLease)
        lease.stopped.set()
        # Redis gone: the lease expires on its own, and the turn's own error says what happened.
        with contextlib.suppress(*_redis_down()):
            self._release(keys=[lease.key], args=[lease.value])

    def close(self) -> None:
        if self._owns_client:
            self.client.close()


class AsyncRedisLeases(_LeaseRules):
    """The same leases for asyncio callers: taken and released on a redis.asyncio client (or a sync one driven
    from worker threads), so the event loop never blocks; renewed from a thread, over the client's sync twin."""

    def __init__(self, client: Any, prefix: str = "reactgraph", *, owns_client: bool = False) -> None:
        self.client, self.prefix, self._owns_client = client, normalise_prefix(prefix), owns_client
        self.url = client_url(client)
        import redis.asyncio

        self._on_loop = isinstance(client, (redis.asyncio.Redis, redis.asyncio.RedisCluster))
        self._release = client.register_script(_RELEASE)
        from reactgraph.memory.redis_checkpoint.pool import sync_twin  # (redis-py only once a lease is in Redis)

        self._renewer = RedisLeases(sync_twin(client) if self._on_loop else client, self.prefix)

    @classmethod
    def from_url(cls, url: str, prefix: str = "reactgraph") -> AsyncRedisLeases:
        from reactgraph.memory.redis_checkpoint.pool import new_client

        return cls(new_client(url, {}, PoolLimits.resolve(None, None), True), prefix, owns_client=True)

    async def _call(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        if self._on_loop:
            return await function(*args, **kwargs)
        return await asyncio.to_thread(function, *args, **kwargs)

    async def try_acquire(self, session: str, ttl_s: float) -> tuple[SessionLease | None, LeaseHolder | None]:
        key, value, sent = self.key(session), self.new_value(), time.monotonic()
        try:
            if await self._call(self.client.set, key, value, nx=True, px=max(1, round(ttl_s * 1000))):
                lease = RedisLease(session, ttl_s, key, value, sent)
                self._renewer.start_renewing(lease)
                return lease, None
            held = await self._call(self.client.getrange, key, 0, _MAX_VALUE - 1)
            if held and dead_here(session, held) and await self._call(self._release, keys=[key], args=[held]):
                return await self.try_acquire(session, ttl_s)  # its holder is gone (see dead_here)
        except _redis_down() as exc:
            raise self.down(exc) from exc
        return None, parse_holder(held) if held else None

    async def release(self, lease: SessionLease) -> None:
        assert isinstance(lease, RedisLease)
        lease.stopped.set()  # the renewing thread ends at its next wake-up, without a renewal
        with contextlib.suppress(*_redis_down()):
            await self._call(self._release, keys=[lease.key], args=[lease.value])

    async def close(self) -> None:
        if self._owns_client:
            await self.client.aclose()


def _redis_down() -> tuple[type[BaseException], ...]:
    """What a Redis that does not answer raises (looked up when a lease is in Redis, so redis-py is loaded then)."""
    import redis

    return (redis.ConnectionError, redis.TimeoutError, OSError, redis.exceptions.ClusterError)


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:64] or "unknown-host"


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def dead_here(session: str, held: Any) -> bool:
    """Whether the lease value `held` names a process of this machine that no longer runs (a turn killed, or its
    machine's Redis gone, before it released): then its lease need not be waited out. The value is Redis content:
    only our own `pid N on HOST` form, this host's name and a pid that is not ours are taken at their word."""
    owner = parse_holder(held).owner
    pid, _, host = owner.removeprefix("pid ").partition(" on ")
    if not owner or host != _host() or not pid.isdigit() or int(pid) in (0, os.getpid()):
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        log.warning("session %s: its lease was held by %s, which no longer runs; taking it over", session, owner,
                    extra={"redis": {"event": "lease_taken_over", "session": session, "holder": owner}})
        return True
    except OSError:  # alive under another user (PermissionError), or not ours to ask about
        return False
    return False


def parse_holder(raw: Any) -> LeaseHolder:
    """Who holds a lease, from its (untrusted, size-bounded) value; what is not as we write it is left out."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    parts = text.split("\0")
    since = None
    if len(parts) >= 2 and parts[1].isdigit() and len(parts[1]) <= 15:
        since = datetime.fromtimestamp(int(parts[1]) / 1000, UTC)
    owner = parts[2] if len(parts) >= 3 and _OWNER.fullmatch(parts[2]) else ""
    return LeaseHolder(since, owner)
