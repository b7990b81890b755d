"""Waiting for what a test can observe, instead of sleeping for a while and hoping it has happened."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def until(condition: Callable[[], object], timeout_s: float = 10.0) -> None:
    """Yield to the event loop until `condition()` is true; fail after `timeout_s` (a bound, never a pace)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"still not true after {timeout_s:g} s: {condition}")
        await asyncio.sleep(0.001)
