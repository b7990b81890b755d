"""The open SSE streams, joins and waits of one API process: at most `limit` at once, each reading its run's
events on a Redis client of their own.

A reader holds a Redis connection in a blocking XREAD for as long as it is open. Without a bound, enough of
them (150 joins did) empty the pool every other request waits on, and all of them answer 503; with one, a
reader beyond the bound is told to come back later (429 with Retry-After) and nothing else is slowed. Each owner
(reactgraph/service/quotas.py) may hold at most its `stream_slots` quota of them, so one caller cannot take them
all. A request holds at most one slot; whose it is is kept in the request's context (the response that gives it
back runs in that context), so a reader gives it back without naming the owner again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any

from reactgraph.service.quotas import ANONYMOUS, QuotaReached
from reactgraph.service.wire import BadRequest

_HOLDER: ContextVar[str | None] = ContextVar("stream_slot_holder", default=None)

RETRY_AFTER_S = 5


class StreamSlots:
    """Slots for the process's event readers, and the Redis client they read with (a pool of `limit` + 1)."""

    def __init__(self, client: Any, limit: int, per_owner: int | None = None) -> None:
        self.client, self.limit, self.per_owner, self.open = client, limit, per_owner, 0
        self.held_by: dict[str, int] = {}

    def take(self, owner: str = ANONYMOUS) -> None:
        """One slot for `owner`, or a 429 naming the limit or the quota (given back with `give_back`)."""
        if self.per_owner is not None and self.held_by.get(owner, 0) >= self.per_owner:
            raise QuotaReached("stream_slots", self.per_owner, owner)
        if self.open >= self.limit:
            raise BadRequest(429, f"this server has {self.limit} streams and waits open, its limit: retry later",
                             headers={"Retry-After": str(RETRY_AFTER_S)})
        self.open += 1
        self.held_by[owner] = self.held_by.get(owner, 0) + 1
        _HOLDER.set(owner)

    def give_back(self) -> None:
        """The slot this request holds."""
        owner = _HOLDER.get()
        if owner is None:
            return
        _HOLDER.set(None)
        self.open = max(0, self.open - 1)
        left = self.held_by.get(owner, 1) - 1
        if left > 0:
            self.held_by[owner] = left
        else:
            self.held_by.pop(owner, None)

    @asynccontextmanager
    async def held(self, owner: str = ANONYMOUS) -> AsyncIterator[None]:
        self.take(owner)
        try:
            yield
        finally:
            self.give_back()
