"""`AsyncRedisSaver`: the LangGraph checkpointer on plain Redis 6+ / Valkey (no modules), on redis.asyncio.

It serves `ainvoke`/`astream`/`aget_state` on its event loop, and sync calls (`get_state`, `invoke`) made
from other threads while that loop runs, by running them on the loop (as LangGraph's async Postgres and
SQLite savers do). A sync call on the loop's own thread would wait for the loop it blocks, so it is refused.
"""

from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio
from langgraph.checkpoint.serde.base import SerializerProtocol

from reactgraph.memory.redis_checkpoint.errors import client_url, redact
from reactgraph.memory.redis_checkpoint.limits import PoolLimits
from reactgraph.memory.redis_checkpoint.pool import SHARED, Shared
from reactgraph.memory.redis_checkpoint.saver_api import BatchSaver
from reactgraph.memory.redis_checkpoint.wire import AsyncWire, Command, wire_of

_ON_ITS_LOOP = ("AsyncRedisSaver was called synchronously (get_state, invoke, ...) on its own event loop's thread, "
                "which would block the loop the call needs: await the async API there (aget_state, ainvoke, "
                "astream), make the sync call from another thread (asyncio.to_thread), or use RedisSaver, "
                "which serves sync and async callers on any thread")
_NO_LOOP = ("AsyncRedisSaver answers sync calls (get_state, invoke, ...) only from another thread while its event "
            "loop runs, and it has none yet: use the async API (aget_state, ainvoke), or RedisSaver in sync code")


class AsyncRedisSaver(BatchSaver):
    """Stores LangGraph checkpoints in plain Redis from asyncio; each aput and aput_writes is one round trip.

    `max_connections` and `pool_timeout` (default: $REACTGRAPH_REDIS_MAX_CONNECTIONS, 50, and
    $REACTGRAPH_REDIS_POOL_TIMEOUT, 10 s) bound the connections it holds and how long a call waits for one.
    """

    _wire: AsyncWire

    def __init__(self, client: redis.asyncio.Redis, *, prefix: str = "reactgraph", ttl: float | None = None,
                 serde: SerializerProtocol | None = None, url: str | None = None,
                 max_connections: int | None = None, pool_timeout: float | None = None) -> None:
        shown = redact(url) if url else client_url(client)
        super().__init__(url=shown, prefix=prefix, ttl=ttl, serde=serde)
        self.client = client
        self._wire = wire_of(client, shown, PoolLimits.resolve(max_connections, pool_timeout))
        self._shared: Shared | None = None

    @classmethod
    def from_url(cls, url: str, *, prefix: str = "reactgraph", ttl: float | None = None,
                 serde: SerializerProtocol | None = None, max_connections: int | None = None,
                 pool_timeout: float | None = None, **client_options: Any) -> AsyncRedisSaver:
        """A saver on the client every `AsyncRedisSaver.from_url` on this URL and event loop shares; close it
        with `aclose()` or `async with AsyncRedisSaver.from_url(...)`."""
        shared = SHARED.acquire(url, client_options, PoolLimits.resolve(max_connections, pool_timeout), True)
        try:
            saver = cls(shared.client, prefix=prefix, ttl=ttl, serde=serde, url=url)
        except BaseException:
            SHARED.release(shared)  # a client that never connected holds nothing to close
            raise
        saver._shared = shared
        return saver

    async def __aenter__(self) -> AsyncRedisSaver:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Give the idle connections back; the last user of a `from_url` client closes it."""
        shared, self._shared = self._shared, None
        if shared is None:
            await self._wire.close()
        elif SHARED.release(shared):
            await shared.wire.close()
            await shared.client.aclose()

    async def ping(self) -> None:
        """Raise CheckpointStoreUnavailable now rather than at the first graph step."""
        await self._wire.call(("PING",))

    async def _abatch(self, commands: list[Command]) -> list[Any]:
        return await self._wire.batch(commands)

    def _batch(self, commands: list[Command]) -> list[Any]:
        """A sync caller's batch, run on the saver's event loop from the caller's (other) thread."""
        loop = self._wire.loop
        if loop is None or loop.is_closed() or not loop.is_running():
            raise asyncio.InvalidStateError(_NO_LOOP)
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            raise asyncio.InvalidStateError(_ON_ITS_LOOP)
        return asyncio.run_coroutine_threadsafe(self._wire.batch(commands), loop).result()
