"""Sync and async across threads: sync tools run off the caller's thread, sync callers run the gateway's pipeline
without an event loop, and what still needs one runs on one shared loop.

`ToolThreads` are the worker threads sync tools run on, bounded in number and never in the way of process exit.
concurrent.futures' pools join their threads at interpreter shutdown, so one hung sync tool kept the CLI alive
after it had printed its answer; these threads are daemons. A call that gives up (its timeout, a cancelled
run) leaves its thread running the tool: that thread is *stuck* until the tool returns. Stuck threads are
counted per tool and do not count against the threads for calls that are still awaited, so they never starve
the other tools; a tool that keeps hanging is refused new threads instead.

The pipeline's steps are written once, as coroutines, and run two ways. Under asyncio they are awaited. For a sync
caller (the graphs' `invoke`, LangChain tools' `.invoke()`: `ToolGateway.execute_sync`) `run_blocking` runs the
same coroutine to its end on the caller's thread, with no event loop: the call record says it is blocking, and
each step then waits by blocking this thread instead of suspending (`ToolThreads.call` for a sync tool, up to
the call's deadline; `pause`; the concurrency limit's thread semaphores). A coroutine driven so never suspends.

`run_sync` is the sync bridge, for what only asyncio can run (an async tool, a Redis breaker store, LangChain's
async tool-call middleware, MCP): it runs coroutines on one long-lived event loop, shared so that every sync
caller's awaits meet on one loop whatever thread LangGraph runs them on. The loop has no thread of its own. The
first caller drives it on its own thread, so a lone call never waits for another thread to be scheduled (on a
busy machine that hand-off costs more than the call); callers arriving meanwhile submit to the running loop and
wait. If the driver's coroutine finishes while others are still running, a helper thread drives the loop until
they are done. A caller whose thread already runs an event loop
(Jupyter) never drives: it submits, and a helper thread drives.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from reactgraph.errors import ReactGraphError


class ToolAborted(ReactGraphError):
    """What a sync tool raised, when it cannot travel to the event loop as itself.

    A BaseException that is no Exception (SystemExit, KeyboardInterrupt, CancelledError, …) raised on the loop
    would end the loop or cancel the caller; a Future refuses StopIteration. Wrapped, each is an ordinary error.
    """

    def __init__(self, cause: BaseException) -> None:
        super().__init__(type(cause).__name__)
        self.cause = cause


@dataclass(eq=False, slots=True)
class _Job:
    """One sync call on its way to a thread; `state` moves queued → running → done (or queued → dropped).

    Its outcome goes to an awaiting caller's `future` (on that caller's `loop`), or, with no loop, to `outcome`
    with `finished` released for a caller blocked on it."""

    tool: str
    work: Callable[[], Any]
    loop: asyncio.AbstractEventLoop | None = None
    future: asyncio.Future[Any] | None = None
    finished: Any = None  # a held `threading.Lock` (a blocked caller's), released once `outcome` is set
    outcome: tuple[bool, Any] | None = None
    state: str = "queued"
    # Set when the caller gave up while the thread still ran the tool: the thread is then stuck.
    abandoned: bool = False
    context: contextvars.Context = field(default_factory=contextvars.copy_context)


class ToolThreads:
    """Daemon threads: at most `max_threads` run calls that are still awaited; stuck ones come on top, bounded.

    A tool with `max_stuck_per_tool` stuck threads gets no more; once `max_stuck` threads of all tools are
    stuck, no tool that has a stuck thread gets another. Tools without stuck threads always get threads.
    """

    def __init__(self, max_threads: int = 32, max_stuck_per_tool: int = 4, max_stuck: int | None = None,
                 idle_s: float = 60.0) -> None:
        if max_threads < 1 or max_stuck_per_tool < 1:
            raise ValueError("max_threads and max_stuck_per_tool must be >= 1")
        self.max_threads = max_threads
        self.max_stuck_per_tool = max_stuck_per_tool
        self.max_stuck = max_threads if max_stuck is None else max_stuck
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._work_ready = threading.Condition(self._lock)
        self._queue: deque[_Job] = deque()
        self._threads = 0  # alive worker threads
        self._waiting = 0  # of those, the ones waiting for a job
        self._stuck: Counter[str] = Counter()
        self._stuck_total = 0

    # -- what `reactgraph tools` and the refusal read ---------------------------------------------------------

    def stuck(self, tool: str | None = None) -> int:
        """Threads still running a call whose caller gave up: of one tool, or of all."""
        with self._lock:
            return self._stuck[tool] if tool is not None else self._stuck_total

    def refusal(self, tool: str) -> int | None:
        """The tool's stuck-thread count if it may not have another thread now, else None."""
        with self._lock:
            mine = self._stuck[tool]
            if mine >= self.max_stuck_per_tool or (mine and self._stuck_total >= self.max_stuck):
                return mine
        return None

    def counts(self) -> dict[str, int]:
        """Threads alive, idle and stuck, for status reports."""
        with self._lock:
            return {"threads": self._threads, "idle": self._waiting, "stuck": self._stuck_total,
                    "max_threads": self.max_threads}

    # -- running a call -----------------------------------------------------------------------------------------

    async def run(self, tool: str, work: Callable[[], Any]) -> Any:
        """`work()` on a worker thread (in a copy of the caller's context); its value, or its exception."""
        loop = asyncio.get_running_loop()
        job = self._queued(_Job(tool, work, loop, loop.create_future()))
        try:
            return await job.future  # type: ignore[misc]  # an awaiting caller's job has its future
        except asyncio.CancelledError:  # the call's timeout or its run's cancellation; the tool cannot be stopped
            self._give_up(job)
            raise

    def call(self, tool: str, work: Callable[[], Any], deadline: float | None) -> Any:
        """`run` for a blocked caller: `work()` on a worker thread while this one waits, up to `deadline`
        (`time.monotonic()`), then `TimeoutError` (the thread is left stuck, as a cancelled `run` leaves it)."""
        finished = threading.Lock()
        finished.acquire()
        job = _Job(tool, work, finished=finished)
        try:
            self._queued(job)
            if not _wait(finished, deadline):
                with self._lock:  # it may have ended meanwhile: then its outcome stands
                    ended = job.state == "done"
                if not ended:
                    raise TimeoutError(f"{tool} ran past its deadline")
        except BaseException:  # the deadline, or a user's Ctrl-C while this (main) thread waits
            self._give_up(job)
            raise
        ok, payload = job.outcome  # type: ignore[misc]  # set before `finished` is released
        if ok:
            return payload
        raise payload

    def _queued(self, job: _Job) -> _Job:
        with self._lock:
            self._queue.append(job)
            self._start_thread_if_needed()
            self._work_ready.notify()
        return job

    def _give_up(self, job: _Job) -> None:
        """The caller no longer waits: a running job's thread is stuck until the tool returns, a queued one never
        starts."""
        with self._lock:
            if job.state == "running":
                job.abandoned = True
                self._stuck[job.tool] += 1
                self._stuck_total += 1
                self._start_thread_if_needed()  # the stuck thread no longer counts: queued calls may start
            elif job.state == "queued":
                job.state = "dropped"  # never started, and never will
                with contextlib.suppress(ValueError):  # (a Ctrl-C may come before it was queued)
                    self._queue.remove(job)

    def _start_thread_if_needed(self) -> None:
        """A new thread when queued calls outnumber idle threads and the awaited calls' threads are below the cap."""
        if len(self._queue) > self._waiting and self._threads - self._stuck_total < self.max_threads:
            thread = threading.Thread(target=self._serve, name=f"reactgraph-tool-{self._threads + 1}", daemon=True)
            try:
                thread.start()
            except RuntimeError:  # the OS has no thread to give: the call waits for a thread, up to its timeout
                return
            self._threads += 1

    def _serve(self) -> None:
        """A worker thread: take jobs until idle for `idle_s`."""
        while True:
            with self._lock:
                job = self._next_job()
                if job is None:
                    self._threads -= 1
                    return
                job.state = "running"
            outcome = _run(job)
            with self._lock:
                job.state = "done"
                job.outcome = outcome
                if job.abandoned:
                    self._stuck_total -= 1
                    self._stuck[job.tool] -= 1
                    if not self._stuck[job.tool]:
                        del self._stuck[job.tool]
            if not job.abandoned:
                _deliver(job, outcome)

    def _next_job(self) -> _Job | None:
        """The next job not dropped, waiting for one up to `idle_s`; None once idle that long (lock held)."""
        while True:
            while self._queue:
                job = self._queue.popleft()
                if job.state == "queued":
                    return job
            self._waiting += 1
            woken = self._work_ready.wait(self.idle_s)
            self._waiting -= 1
            if not woken and not self._queue:
                return None


# The main thread's longest sleep before it looks for a Ctrl-C: a SIGINT that lands just before a lock wait starts
# does not interrupt it (only one that lands during it does), so the main thread waits in slices.
SIGNAL_CHECK_S = 0.1


def _wait(finished: threading.Lock, deadline: float | None) -> bool:
    """Acquire `finished` by `deadline` (`time.monotonic()`, None: no limit); False once it passed."""
    on_main = threading.current_thread() is threading.main_thread()
    while True:
        left = 1e9 if deadline is None else max(deadline - time.monotonic(), 0.0)
        step = min(left, SIGNAL_CHECK_S) if on_main else (-1.0 if deadline is None else left)
        if finished.acquire(timeout=step):
            return True
        if step == left:
            return False


def _run(job: _Job) -> tuple[bool, Any]:
    try:
        return True, job.context.run(job.work)
    except StopIteration as exc:
        return False, ToolAborted(exc)
    except Exception as exc:  # noqa: BLE001 - carried to the caller, who decides what it means
        return False, exc
    except BaseException as exc:  # noqa: BLE001 - a tool's SystemExit must not end its caller's event loop
        return False, ToolAborted(exc)


def _deliver(job: _Job, outcome: tuple[bool, Any]) -> None:
    if job.finished is not None:  # a blocked caller: `outcome` is on the job already
        job.finished.release()
        return
    future, loop = job.future, job.loop
    assert future is not None and loop is not None  # an awaiting caller's job

    def settle() -> None:
        if future.done():  # cancelled between the thread's end and this callback
            return
        ok, payload = outcome
        if ok:
            future.set_result(payload)
        else:
            future.set_exception(payload)

    with contextlib.suppress(RuntimeError):  # the caller's loop is closed: nobody waits for this outcome now
        loop.call_soon_threadsafe(settle)


# -- the sync bridge: sync callers onto the shared event loop ----------------------------------------------------------

T = TypeVar("T")

_bridge_lock = threading.Lock()  # guards the four names below (_tasks is only touched on the loop's thread)
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
        with _bridge_lock:
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
    with _bridge_lock:
        if _in_flight == 0:
            return
        _idle = asyncio.Event()
        idle = _idle
    await idle.wait()


def _drive_until_idle(loop: asyncio.AbstractEventLoop) -> None:
    global _driven
    while True:
        loop.run_until_complete(_until_idle())
        with _bridge_lock:
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
    with _bridge_lock:
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
        with _bridge_lock:
            if _in_flight == 0:
                _driven = False
            else:  # others' coroutines are still running on the loop: a helper drives it on
                _start_helper(loop)


# -- the blocking driver: the gateway's coroutines run to their end on the caller's thread -----------------------------

def run_blocking(coro: Awaitable[T]) -> T:
    """Run a coroutine of the gateway's pipeline for a sync caller, on this thread, without an event loop.

    Its call record is blocking, so its steps wait by blocking this thread (see the module's docstring) and it
    ends without ever suspending; one that suspends would be waiting on an event loop nobody runs: a bug."""
    steps = coro.__await__()
    try:
        steps.send(None)
    except StopIteration as done:
        return done.value
    with contextlib.suppress(Exception):  # (only its finally blocks run now)
        steps.close()
    raise RuntimeError("a step of a blocking tool call awaited asyncio: only threads.py's waits may block")


def now(blocking: bool) -> float:
    """The clock of a call's deadline: its event loop's, or `time.monotonic()` for a blocking call."""
    return time.monotonic() if blocking else asyncio.get_running_loop().time()


async def pause(blocking: bool, seconds: float) -> None:
    """Sleep: awaited, or blocking this thread."""
    if blocking:
        time.sleep(seconds)  # noqa: ASYNC251 - a blocking call's coroutine runs on its caller's thread, no loop
    else:
        await asyncio.sleep(seconds)


async def awaited(blocking: bool, awaitable: Any, deadline: float | None = None) -> Any:
    """`await awaitable`; for a blocking call on the shared loop (`run_sync`), cut off at `deadline`
    (`time.monotonic()`) with `TimeoutError` as the asyncio timeout around it would."""
    if not blocking:
        return await awaitable
    return run_sync(_until(awaitable, deadline))


async def _until(awaitable: Any, deadline: float | None) -> Any:
    async with asyncio.timeout(None if deadline is None else deadline - time.monotonic()):
        return await awaitable
