"""Running the gateway's async API from the graph's synchronous `invoke`/`stream` paths.

Every synchronous caller's coroutines run on one long-lived event loop: sharing one loop is what keeps the
gateway's concurrency limits global when LangGraph runs sync tasks on many threads. The loop has no thread
of its own. The first caller drives it on its own thread, so a lone call never waits for another thread to
be scheduled (on a busy machine that hand-off costs more than the call); callers arriving meanwhile submit to
the running loop and wait. If the driver's coroutine finishes while others are still running, a helper
thread drives the loop until they are done. A caller whose thread already runs an event loop (Jupyter)
never drives: it submits, and a helper thread drives.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()  # guards the four names below (_tasks is only touched on the loop's thread)
_loop: asyncio.AbstractEventLoop | None = None
_driven = False  # some thread runs the loop now (or is about to)
_in_flight = 0  # coroutines submitted and not finished
_idle: asyncio.Event | None = None  # set when _in_flight drops to 0 while a helper waits for that
_tasks: set[asyncio.Task[Any]] = set()


def _shared_loop() -> asyncio.AbstractEventLoop:
    global _loop
    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
    return _loop


async def _tracked(coro: Coroutine[Any, Any, Any], waiter: Future[Any] | None = None) -> Any:
    """Run `coro`; with a `waiter` (a submitting thread's), hand it the outcome before counting the coroutine
    finished: the loop may stop right after, and an outcome still queued on a stopped loop never arrives."""
    global _in_flight, _idle
    try:
        if waiter is None:
            return await coro
        try:
            waiter.set_result(await coro)
        except BaseException as exc:  # noqa: BLE001 - every outcome, cancellation included, goes to the waiter
            waiter.set_exception(exc)
        return None
    finally:  # on the loop's thread, whichever thread drives it
        with _lock:
            _in_flight -= 1
            if _in_flight == 0 and _idle is not None:
                _idle.set()
                _idle = None


def _submit(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> Future[T]:
    waiter: Future[T] = Future()
    # The caller's context goes with the coroutine (LangChain's run config and callbacks live in contextvars),
    # as it does when the caller drives the loop itself.
    context = contextvars.copy_context()

    def start() -> None:
        task = loop.create_task(_tracked(coro, waiter), context=context)
        _tasks.add(task)  # the loop keeps only weak references to its tasks
        task.add_done_callback(_tasks.discard)

    loop.call_soon_threadsafe(start)
    return waiter


async def _until_idle() -> None:
    global _idle
    with _lock:
        if _in_flight == 0:
            return
        _idle = asyncio.Event()
        idle = _idle
    await idle.wait()


def _drive_until_idle(loop: asyncio.AbstractEventLoop) -> None:
    global _driven
    while True:
        loop.run_until_complete(_until_idle())
        with _lock:
            if _in_flight == 0:
                _driven = False
                return


def _start_helper(loop: asyncio.AbstractEventLoop) -> None:
    threading.Thread(target=_drive_until_idle, args=(loop,), name="reactgraph-sync-bridge", daemon=True).start()


def _in_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on the shared loop and wait for its result (driving the loop if nobody does)."""
    global _in_flight, _driven
    with _lock:
        loop = _shared_loop()
        _in_flight += 1
        drive = not _driven and not _in_running_loop()
        if not _driven and not drive:
            _start_helper(loop)
        _driven = True
    if not drive:
        return _submit(loop, coro).result()
    try:
        return loop.run_until_complete(_tracked(coro))  # without a waiter, _tracked returns coro's value
    finally:
        with _lock:
            if _in_flight == 0:
                _driven = False
            else:  # others' coroutines are still running on the loop: a helper drives it on
                _start_helper(loop)
