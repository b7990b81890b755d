"""The open SSE streams, joins and waits of one API process: at most `limit` at once, each reading its run's
events on a Redis client of their own.

A reader holds a Redis connection in a blocking XREAD for as long as it is open. Without a bound, enough of
them (150 joins did) empty the pool every other request waits on, and all of them answer 503; with one, a
reader beyond the bound is told to come back later (429 with Retry-After) and nothing else is slowed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from reactgraph.service.wire import BadRequest

RETRY_AFTER_S = 5


class StreamSlots:
    """Slots for the process's event readers, and the Redis client they read with (a pool of `limit` + 1)."""

    def __init__(self, client: Any, limit: int) -> None:
        self.client, self.limit, self.open = client, limit, 0

    def take(self) -> None:
        """One slot, or a 429 naming the limit (the caller gives it back with `give_back`)."""
        if self.open >= self.limit:
            raise BadRequest(429, f"this server has {self.limit} streams and waits open, its limit: retry later",
                             headers={"Retry-After": str(RETRY_AFTER_S)})
        self.open += 1

    def give_back(self) -> None:
        self.open = max(0, self.open - 1)

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        self.take()
        try:
            yield
        finally:
            self.give_back()
