"""`ToolThreads`: the worker threads sync tools run on, bounded in number and never in the way of process exit.

concurrent.futures' pools join their threads at interpreter shutdown, so one hung sync tool kept the CLI alive
after it had printed its answer; these threads are daemons. A call that gives up (its timeout, a cancelled
run) leaves its thread running the tool: that thread is *stuck* until the tool returns. Stuck threads are
counted per tool and do not count against the threads for calls that are still awaited, so they never starve
the other tools; a tool that keeps hanging is refused new threads instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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
    """One sync call on its way to a thread; `state` moves queued → running → done (or queued → dropped)."""

    tool: str
    work: Callable[[], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
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
        job = _Job(tool, work, loop, loop.create_future())
        with self._lock:
            self._queue.append(job)
            self._start_thread_if_needed()
            self._work_ready.notify()
        try:
            return await job.future
        except asyncio.CancelledError:  # the call's timeout or its run's cancellation; the tool cannot be stopped
            with self._lock:
                if job.state == "running":
                    job.abandoned = True
                    self._stuck[tool] += 1
                    self._stuck_total += 1
                    self._start_thread_if_needed()  # the stuck thread no longer counts: queued calls may start
                elif job.state == "queued":
                    job.state = "dropped"  # never started, and never will
                    self._queue.remove(job)
            raise

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
    def settle() -> None:
        if job.future.done():  # cancelled between the thread's end and this callback
            return
        ok, payload = outcome
        if ok:
            job.future.set_result(payload)
        else:
            job.future.set_exception(payload)

    with contextlib.suppress(RuntimeError):  # the caller's loop is closed: nobody waits for this outcome now
        job.loop.call_soon_threadsafe(settle)
