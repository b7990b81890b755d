"""`RedisSaver`: the LangGraph checkpointer on plain Redis 6+ / Valkey (no modules), on redis-py's sync client.

It serves `invoke`/`stream`/`get_state` on the caller's thread and `ainvoke`/`astream`/`aget_state` too:
an async call's round trip runs on one of the wire's worker threads (at most one per connection), so any
event loop can use it and none is blocked by it.
"""

from __future__ import annotations

from typing import Any

import redis
from langgraph.checkpoint.serde.base import SerializerProtocol

from reactgraph.memory.redis_checkpoint.errors import client_url, redact
from reactgraph.memory.redis_checkpoint.pool import WiredClient
from reactgraph.memory.redis_checkpoint.saver_api import BatchSaver
from reactgraph.memory.redis_checkpoint.wire import Command


class RedisSaver(WiredClient, BatchSaver):
    """Stores LangGraph checkpoints in plain Redis; each put and put_writes is one atomic round trip.

    `max_connections` and `pool_timeout` (default: $REACTGRAPH_REDIS_MAX_CONNECTIONS, 50, and
    $REACTGRAPH_REDIS_POOL_TIMEOUT, 10 s) bound the connections it holds and how long a call waits for one.
    """

    def __init__(self, client: redis.Redis, *, prefix: str = "reactgraph", ttl: float | None = None,
                 serde: SerializerProtocol | None = None, url: str | None = None,
                 max_connections: int | None = None, pool_timeout: float | None = None) -> None:
        shown = redact(url) if url else client_url(client)
        super().__init__(url=shown, prefix=prefix, ttl=ttl, serde=serde)
        self._wire_up(client, shown, max_connections, pool_timeout)

    @classmethod
    def from_url(cls, url: str, *, prefix: str = "reactgraph", ttl: float | None = None,
                 serde: SerializerProtocol | None = None, max_connections: int | None = None,
                 pool_timeout: float | None = None, **client_options: Any) -> RedisSaver:
        """A saver on the client that every `RedisSaver` and `RedisStore` `from_url` on this URL shares;
        close it with `close()` or use `with RedisSaver.from_url(...) as saver`."""
        return cls._from_shared(url, client_options, max_connections, pool_timeout,
                                prefix=prefix, ttl=ttl, serde=serde)

    def _batch(self, commands: list[Command]) -> list[Any]:
        return self._wire.batch(commands)

    async def _abatch(self, commands: list[Command]) -> list[Any]:
        return await self._wire.abatch(commands)
