"""Running the gateway's async API from the graph's synchronous `invoke`/`stream` paths."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _bridge_loop() -> asyncio.AbstractEventLoop:
    # One long-lived loop on a daemon thread serves every synchronous caller. Sharing one loop is what
    # keeps the gateway's concurrency limits global when LangGraph runs sync tasks on many threads,
    # and it works whether or not the caller's own thread already runs a loop (e.g. Jupyter).
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="reactgraph-sync-bridge", daemon=True).start()
        return _loop


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on the bridge loop and wait for its result."""
    return asyncio.run_coroutine_threadsafe(coro, _bridge_loop()).result()
