"""The one event loop, on its own daemon thread, where every MCP session of the process lives.

An MCP session is bound to the task that opened it (anyio cancel scopes must be left in the task that entered
them), while the gateway's calls come from any loop: the sync bridge's, a user's `ainvoke`, Jupyter's. So each
session is owned by a long-lived task on this loop, and calls are submitted to it: a caller awaits the call's
future on its own loop (`run`), and cancelling that await (the gateway's timeout) cancels the call here.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import sys
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def mcp_loop() -> asyncio.AbstractEventLoop:
    """The MCP loop, started with its thread on first use."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="reactgraph-mcp", daemon=True).start()
            _loop = loop
        return _loop


def submit(coro: Coroutine[Any, Any, T]) -> Future[T]:
    """Start `coro` on the MCP loop; its future may be waited on from any thread."""
    return asyncio.run_coroutine_threadsafe(coro, mcp_loop())


async def run(coro: Coroutine[Any, Any, T]) -> T:
    """Await `coro` run on the MCP loop, from any other loop; cancelling this await cancels it there.

    Called on the MCP loop itself, it simply awaits (waiting on its own loop's future would deadlock nothing,
    but cost a hop).
    """
    if _loop is not None and asyncio.get_running_loop() is _loop:
        return await coro
    return await asyncio.wrap_future(submit(coro))


def run_blocking(coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
    """Wait for `coro` on the MCP loop from synchronous code, even inside another running loop (Jupyter)."""
    future = submit(coro)
    try:
        return future.result(timeout_s)
    except TimeoutError:
        future.cancel()
        raise


def _close_at_exit() -> None:
    """Close every session (a stdio server would otherwise outlive a crash-free exit only until its stdin ends)."""
    server = sys.modules.get("reactgraph.tools.mcp.server")  # never imported: no session was ever opened
    if _loop is None or _loop.is_closed() or server is None:
        return
    close_all = server.close_all
    with contextlib.suppress(Exception):  # at exit, a server that will not close must not stop the exit
        run_blocking(close_all(), 5.0)


atexit.register(_close_at_exit)
