"""Running the gateway's async API from the graph's synchronous `invoke`/`stream` paths."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

# One spare thread for callers that already run an event loop in this thread (e.g. Jupyter).
_loop_free_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reactgraph-sync")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code, with or without a running loop here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    return _loop_free_thread.submit(asyncio.run, coro).result()
