"""The work queue: a Redis stream of "thread T has work" tokens, read by the workers' consumer group."""

from __future__ import annotations

from typing import Any

import redis.asyncio

from reactgraph.service.keys import ServiceKeys

GROUP = "workers"
MAX_QUEUE = 100_000  # approximate trim; every live thread also has its runs in its own `pending` list
_MAX_THREAD_ID = 256


class WorkQueue:
    def __init__(self, client: redis.asyncio.Redis, keys: ServiceKeys, consumer: str = "api") -> None:
        self.client, self.keys, self.consumer = client, keys, consumer

    async def ensure_group(self) -> None:
        try:
            await self.client.xgroup_create(self.keys.queue, GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def notify(self, thread_id: str) -> None:
        await self.client.xadd(self.keys.queue, {"t": thread_id}, maxlen=MAX_QUEUE, approximate=True)

    async def read(self, count: int, *, block_ms: int) -> list[tuple[str, str]]:
        """New tokens for this consumer: (entry id, thread id)."""
        try:
            answer: Any = await self.client.xreadgroup(GROUP, self.consumer, {self.keys.queue: ">"}, count=count,
                                                  block=block_ms)
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            await self.ensure_group()  # the queue key was deleted (FLUSHDB, retention): make it again
            return []
        return _tokens(answer[0][1] if answer else [])

    async def claim_idle(self, idle_s: float, count: int) -> list[tuple[str, str]]:
        """Tokens left unacknowledged for `idle_s` by any consumer (a holder that died, a busy thread)."""
        try:
            answer: Any = await self.client.xautoclaim(self.keys.queue, GROUP, self.consumer,
                                                  min_idle_time=max(1, int(idle_s * 1000)), start_id="0-0",
                                                  count=count)
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            return []
        return _tokens(answer[1] if len(answer) > 1 else [])

    async def leave(self) -> None:
        """Remove this consumer from the group if it holds no token (a clean exit), so the group's consumer list
        does not grow with every worker ever started; a consumer with tokens stays for others to claim them."""
        summary: Any = await self.client.xpending(self.keys.queue, GROUP)
        consumers = {(c["name"].decode() if isinstance(c["name"], bytes) else c["name"]): int(c["pending"])
                     for c in (summary or {}).get("consumers") or []}
        if consumers.get(self.consumer, 0) == 0:
            await self.client.xgroup_delconsumer(self.keys.queue, GROUP, self.consumer)

    async def ack(self, entry_id: str) -> None:
        await self.client.xack(self.keys.queue, GROUP, entry_id)
        await self.client.xdel(self.keys.queue, entry_id)


def _tokens(entries: list) -> list[tuple[str, str]]:
    found = []
    for raw_id, fields in entries:
        if not fields:  # deleted while pending
            continue
        entry = raw_id.decode() if isinstance(raw_id, bytes) else raw_id
        thread = fields.get(b"t", fields.get("t"))
        thread = thread.decode("utf-8", errors="replace") if isinstance(thread, bytes) else thread
        if isinstance(thread, str) and 0 < len(thread) <= _MAX_THREAD_ID:
            found.append((entry, thread))
    return found
