"""Running the gateway's async API from the graph's synchronous `invoke`/`stream` paths."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

# One spare thread for callers that already run an event loop in this thread (e.g. Jupyter).
_loop_free_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reactgraph-sync")
_local = threading.local()


def _thread_loop() -> asyncio.AbstractEventLoop:
    # A loop kept per thread: creating one per call (asyncio.run) costs more than the tool calls it runs.
    loop = getattr(_local, "loop", None)
    if loop is None or loop.is_closed():
        loop = _local.loop = asyncio.new_event_loop()
    return loop


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code, with or without a running loop here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _thread_loop().run_until_complete(coro)
    return _loop_free_thread.submit(run_sync, coro).result()
