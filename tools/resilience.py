"""Resilience: the steps that keep a slow or failing tool from taking the run down with it, and the boundary
that turns whatever a tool raises into a result. (The circuit breaker, the other such step, is tools/breaker.py.)

- `Bulkhead`: the concurrency limit, at most so many calls in flight, gateway-wide and optionally per tool.
- `Normalise`: turns what the inner steps produced (a value or an exception) into a model-readable `ToolResult`.
- `Timeout`: a hard time limit per call, retries included.
- `Retry`: transient failures are tried again with exponential backoff and full jitter.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import weakref
from typing import Any

from reactgraph.tools import untrusted
from reactgraph.tools.call import Handler, ToolInputError, ToolResult, ToolStatus, TransientToolError, emit, tool_fault
from reactgraph.tools.guards import schema_hint
from reactgraph.tools.threads import now, pause


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
