"""The sync bridge: every synchronous caller's gateway coroutines run on one event loop, driven by a caller's
own thread when it can be (no hand-off to another thread), from any number of threads, inside Jupyter-like
running loops too, and no caller is ever left waiting on a loop that nobody runs."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from reactgraph.tools.threads import run_sync

HELPER = "reactgraph-sync-bridge"  # the thread that drives the loop on for coroutines their caller left running


def no_helper(deadline: float) -> bool:
    """No helper thread drives the loop (one may take a moment to see that nothing is left to run)."""
    while any(thread.name == HELPER for thread in threading.enumerate()):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def settled(within_s: float = 5.0) -> bool:
    """Nothing in flight and nobody driving the loop, as a caller sees it: no helper thread, and a lone call from
    a new thread runs on that thread (nobody else drives the loop) and leaves no helper behind (nothing else was
    in flight)."""
    deadline = time.monotonic() + within_s
    if not no_helper(deadline):
        return False

    async def where() -> str:
        return threading.current_thread().name

    ran_on: list[str] = []
    probe = threading.Thread(target=lambda: ran_on.append(run_sync(where())), name="settled-probe", daemon=True)
    probe.start()
    probe.join(max(deadline - time.monotonic(), 0.1))  # a call left waiting on a loop nobody runs: not settled
    return ran_on == ["settled-probe"] and no_helper(deadline)


def test_a_lone_call_runs_on_the_callers_own_thread():
    async def where() -> str:
        return threading.current_thread().name

    assert run_sync(where()) == threading.current_thread().name and settled()


def test_calls_from_many_threads_share_one_loop_and_all_return():
    loops, peak, active = set(), [0], [0]

    async def work(i: int) -> int:
        loops.add(asyncio.get_running_loop())
        active[0] += 1
        peak[0] = max(peak[0], active[0])
        await asyncio.sleep(0.0005 * (i % 3))  # calls end out of order, while others still run
        active[0] -= 1
        return i

    def caller(k: int) -> None:
        for i in range(40):
            assert run_sync(work(k * 100 + i)) == k * 100 + i

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads), "a caller was left waiting"
    assert len(loops) == 1 and peak[0] > 1 and settled()


def test_a_caller_inside_a_running_loop_submits_and_is_answered():
    async def twice(x: int) -> int:
        await asyncio.sleep(0)
        return 2 * x

    async def notebook_cell() -> int:  # e.g. Jupyter: the caller's thread runs a loop of its own
        return run_sync(twice(21))

    assert asyncio.run(notebook_cell()) == 42 and settled()


def test_an_exception_reaches_the_caller_from_either_path():
    async def boom() -> None:
        raise LookupError("no such tool")

    with pytest.raises(LookupError, match="no such tool"):
        run_sync(boom())

    async def notebook_cell() -> None:
        run_sync(boom())

    with pytest.raises(LookupError, match="no such tool"):
        asyncio.run(notebook_cell())
    assert settled()
