"""One turn at a time per session: a lease in Redis shared by every process and machine, or, where the
sessions are not in Redis (`memory`, SQLite), a lock inside this process.

    with session_lease(graph, "alice"):          # a compiled graph, a RedisSaver, a redis.Redis or a URL
        graph.invoke({"messages": [...]}, {"configurable": {"thread_id": "alice"}})

The Redis lease is `SET <prefix>{<session>}:lease <token…> NX PX <ttl>`, renewed by a heartbeat thread
every third of its expiry while the turn runs and deleted on exit only by its owner (a compare-and-delete
script), so a process that dies frees the session when its lease expires. From asyncio code,
`async with asession_lease(...)` (session_lease_aio.py) holds it the same way without blocking the event loop.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from reactgraph.errors import ReactGraphError
from reactgraph.memory.session_id import check_session_id

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
    from reactgraph.memory import redis_lease

    leases: Any = redis_lease.AsyncRedisLeases if for_asyncio else redis_lease.RedisLeases
    if isinstance(saver, str):
        return leases.from_url(saver)
    return leases(saver.client, saver.prefix) if is_saver else leases(saver)  # a saver's leases: under its prefix


_REDIS_SAVERS = (("reactgraph.memory.redis_checkpoint.sync", "RedisSaver"),
                 ("reactgraph.memory.redis_checkpoint.aio", "AsyncRedisSaver"))


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
