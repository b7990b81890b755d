"""Open what an API process or a worker needs on one Redis: a client for the service's records, the async
checkpoint saver, the long-term store and the compiled graphs — the same key prefixes as the CLI, so a
session asked from the CLI is a thread of the service and the other way round."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from reactgraph.memory import RedisStore
from reactgraph.memory.redis_checkpoint import AsyncRedisSaver
from reactgraph.memory.redis_checkpoint.cluster_wire import new_cluster_client
from reactgraph.memory.redis_checkpoint.settings import PoolLimits, is_cluster_url, redact, unavailable
from reactgraph.service.assistants.catalogue import Assistants

if TYPE_CHECKING:
    from reactgraph.service.assistants.records import AssistantRecords
    from reactgraph.service.run_request import RunPolicy

CONNECT_TIMEOUT_S = 5.0


@asynccontextmanager
async def service_connections(
        redis_url: str, gateway: Any, *, run_policy: RunPolicy | None = None,
        created: Callable[[redis.asyncio.Redis], AssistantRecords] | None = None,
) -> AsyncIterator[tuple[redis.asyncio.Redis, Assistants]]:
    """(records client, assistants); Redis is pinged first, so a wrong URL fails in one line before serving.
    The assistants get the operator's `run_policy` and, in an API process, the records `created` makes on the
    client: whole at construction, never assigned later."""
    client = _records_client(redis_url)
    try:
        try:
            await client.ping()
        except (redis.ConnectionError, redis.TimeoutError, OSError, redis.exceptions.ClusterError) as exc:
            raise unavailable(redact(redis_url), exc) from None
        saver = AsyncRedisSaver.from_url(redis_url)
        saver.pass_over_damaged_latest = False  # a state read or a run on a damaged thread names it (never an older)
        store = RedisStore.from_url(redis_url)
        try:
            yield client, Assistants(gateway, saver, store, run_policy=run_policy,
                                     created=created(client) if created is not None else None)
        finally:
            store.close()
            await saver.aclose()
            breakers = getattr(gateway.breakers.store, "client", None)  # shared breakers: an asyncio client,
            if breakers is not None and hasattr(breakers, "aclose"):   # closed on the loop its calls ran on
                await breakers.aclose()
    finally:
        await client.aclose()


def _records_client(redis_url: str, max_connections: int | None = None) -> Any:
    """A redis.asyncio client for the records; a `RedisCluster` for a `redis+cluster://` URL (every key it
    touches together belongs to one thread, so to one slot). `max_connections`: its own pool's size."""
    if is_cluster_url(redis_url):
        options = {"socket_connect_timeout": CONNECT_TIMEOUT_S, "health_check_interval": 30}
        return new_cluster_client(redis_url, options, PoolLimits.resolve(max_connections, None), True)
    sized: dict[str, Any] = {"max_connections": max_connections} if max_connections else {}
    # A connection the server closed while it sat idle in the pool (Redis restarted) fails its next command:
    # that command is tried again on a new connection, so a restart costs no request a 503.
    retry = Retry(ExponentialBackoff(cap=0.5, base=0.05), 2)
    return redis.asyncio.Redis.from_url(redis_url, socket_connect_timeout=CONNECT_TIMEOUT_S, health_check_interval=30,
                                        retry=retry, retry_on_error=[redis.ConnectionError], **sized)


def stream_client(redis_url: str, streams: int) -> Any:
    """A client of its own for stream readers (each holds a connection in a blocking XREAD): with at most
    `streams` of them, its pool never runs dry, and theirs is never the pool other requests wait on."""
    return _records_client(redis_url, streams + 1)


# What a Redis outage raises: redis-py's errors, our savers' CheckpointStoreUnavailable (a ConnectionError), sockets.
REDIS_DOWN = (redis.ConnectionError, redis.TimeoutError, OSError)


class Outage:
    """Back-off for a loop that must outlive Redis going away: one log line when it goes, one when it is back."""

    def __init__(self, what: str, log: Any, *, first_s: float = 0.2, most_s: float = 5.0) -> None:
        self.what, self.log, self.first_s, self.most_s = what, log, first_s, most_s
        self.pause_s: float | None = None

    async def wait(self, exc: BaseException) -> None:
        import asyncio

        if self.pause_s is None:
            self.log.warning("%s: Redis unreachable (%s); retrying", self.what, str(exc).splitlines()[0][:200])
            self.pause_s = self.first_s
        await asyncio.sleep(self.pause_s)
        self.pause_s = min(self.most_s, self.pause_s * 2)

    def ok(self) -> None:
        if self.pause_s is not None:
            self.log.warning("%s: Redis answers again", self.what)
            self.pause_s = None
