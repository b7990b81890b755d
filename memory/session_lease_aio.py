"""`asession_lease`: `session_lease` for asyncio code, by the same rules, without blocking the event loop.

    async with asession_lease(graph, "alice"):   # a graph, a RedisSaver or AsyncRedisSaver, a client, a URL
        await graph.ainvoke({"messages": [...]}, {"configurable": {"thread_id": "alice"}})

The wait polls with `asyncio.sleep`, the lease is renewed by an asyncio task, and Redis is reached through
an asyncio client (an AsyncRedisSaver's, or one of its own for a URL) or, on a sync client, from worker
threads. Where sessions are not in Redis it takes the same in-process lock as `session_lease`.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from reactgraph.memory.session_id import check_session_id
from reactgraph.memory.session_lease import (
    _PROCESS_LEASES,
    DEFAULT_WAIT_S,
    LeaseHolder,
    LeaseWait,
    SessionLease,
    WaitNotice,
    backend_for,
    lease_ttl,
)

# task -> (lease key -> the SessionLease it holds): a nested lease in the same task shares the outer one,
# while a task it starts (which copies its context) takes its own, as a separate turn would.
_HELD: weakref.WeakKeyDictionary[asyncio.Task, dict[str, SessionLease]] = weakref.WeakKeyDictionary()


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
        held = _HELD.setdefault(task, {})
        outer = held.get(key)
        if outer is not None:
            yield outer
            return
        lease = await _acquire(backend, session, ttl, max(0.0, wait_s), on_wait)
        held[key] = lease
        try:
            yield lease
        finally:
            del held[key]
            await backend.release(lease)
    finally:
        await backend.close()


async def _acquire(backend: Any, session: str, ttl_s: float, wait_s: float,
                   on_wait: WaitNotice | None) -> SessionLease:
    """`session_lease`'s wait (the same `LeaseWait`), yielding to the event loop between tries."""
    wait = LeaseWait(session, wait_s, on_wait)
    while True:
        lease, holder = await backend.try_acquire(session, ttl_s)
        if lease is not None:
            return lease
        await asyncio.sleep(wait.next_pause(holder))
