"""The concurrency limit (a bulkhead): at most so many calls in flight, gateway-wide and optionally per tool."""

from __future__ import annotations

import asyncio
import time
import weakref

from reactgraph.tools import observations
from reactgraph.tools.policies.base import CallContext, Handler
from reactgraph.tools.policies.observability.events import emit
from reactgraph.tools.result import ToolResult, ToolStatus


class Bulkhead:
    """At most `max_concurrent` calls in flight (and a tool's own `max_concurrency`); others wait their turn.

    A call that waits longer than `max_wait_s` for a slot ends as `rate_limited` instead of queueing forever.
    Semaphores are kept per event loop, because asyncio primitives cannot be shared across loops (the
    synchronous graph API runs calls on a loop of its own).
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

    async def __call__(self, call: CallContext, proceed: Handler) -> ToolResult:
        semaphores = [self._semaphore(None, self.max_concurrent)]
        if call.tool.max_concurrency:
            semaphores.insert(0, self._semaphore(call.name, call.tool.max_concurrency))
        started = time.monotonic()
        call.waited_for_slot = any(sem.locked() for sem in semaphores)
        if call.waited_for_slot and call.sink is not None:
            emit(call.sink, call.name, call.call_id, "waiting", in_flight=self.in_flight,
                 max_concurrent=self.max_concurrent, tool_max_concurrency=call.tool.max_concurrency)
        try:
            held = await self._acquire_all(semaphores, call.waited_for_slot)
        except TimeoutError:
            return call.result(ToolStatus.RATE_LIMITED,
                               observations.rate_limited(call.name, time.monotonic() - started))
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            return await proceed(call)
        finally:
            self.in_flight -= 1
            for sem in held:
                sem.release()
