"""The clients the Redis savers and store share: `from_url` on one URL (and, for asyncio, on one event loop)
gives every saver and store one client, one pool of `PoolLimits` size, and one wire over it."""

from __future__ import annotations

import asyncio
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

import redis
import redis.asyncio

from reactgraph.memory.redis_checkpoint.settings import (
    PoolLimits,
    check_url,
    client_kwargs,
    is_cluster_url,
    redact,
    socket_timeout,
)
from reactgraph.memory.redis_checkpoint.wire import SyncWire, wire_of


def new_client(url: str, options: dict[str, Any], limits: PoolLimits, asyncio_client: bool) -> Any:
    """A client of our own for `url` over a pool of `limits.max_connections` that waits `limits.timeout`."""
    check_url(url)  # first, so a bad URL fails with one clear line
    if is_cluster_url(url):
        from reactgraph.memory.redis_checkpoint.cluster_wire import new_cluster_client

        return new_cluster_client(url, options, limits, asyncio_client)
    module: Any = redis.asyncio if asyncio_client else redis
    pool = module.BlockingConnectionPool.from_url(url, max_connections=limits.max_connections,
                                                  timeout=limits.timeout, **client_kwargs(url, options))
    return module.Redis.from_pool(pool)  # the client owns the pool: closing one closes the other


@dataclass
class Shared:
    """A client and the wire over it, and how many savers and stores use them."""

    client: Any
    wire: Any
    users: int = 0
    key: tuple = field(default=(), repr=False)


class SharedClients:
    """The clients `from_url` made, one per (URL, options, limits, event loop); closed with their last user."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shared: dict[tuple, Shared] = {}

    def acquire(self, url: str, options: dict[str, Any], limits: PoolLimits, asyncio_client: bool) -> Shared:
        """The shared client for these, made if there is none yet (or its event loop has closed); one user more."""
        loop = _running_loop() if asyncio_client else None
        if "socket_timeout=" not in url:  # resolved (and checked) now: a client made earlier may have another one
            options = {**options, "socket_timeout": socket_timeout(options.get("socket_timeout"))}
        key = (asyncio_client, url, repr(sorted(options.items())), limits, loop)
        with self._lock:
            for stale in [k for k, s in self._shared.items() if k[-1] is not None and k[-1].is_closed()]:
                del self._shared[stale]  # its loop is gone, and asyncio connections die with their loop
            shared = self._shared.get(key)
            if shared is None:
                client = new_client(url, options, limits, asyncio_client)
                shared = self._shared[key] = Shared(client, wire_of(client, redact(url), limits), key=key)
            shared.users += 1
            return shared

    def release(self, shared: Shared) -> bool:
        """One user fewer; True when it was the last, and the caller closes the client."""
        with self._lock:
            shared.users -= 1
            if shared.users > 0:
                return False
            if self._shared.get(shared.key) is shared:
                del self._shared[shared.key]
            return True


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


SHARED = SharedClients()


class WiredClient:
    """What the sync Redis saver and store share: a client (maybe shared by `from_url`), its wire, and closing."""

    client: Any
    _wire: SyncWire
    _shared: Any = None  # a pool.Shared when from_url made (or found) the client

    def _wire_up(self, client: Any, url: str, max_connections: int | None, pool_timeout: float | None) -> None:
        self.client = client
        self._wire = wire_of(client, url, PoolLimits.resolve(max_connections, pool_timeout))

    @classmethod
    def _from_shared(cls, url: str, options: dict[str, Any], max_connections: int | None,
                     pool_timeout: float | None, **settings: Any) -> Any:
        """An instance on the client every sync saver and store `from_url` on this URL (and options) uses."""
        shared = SHARED.acquire(url, options, PoolLimits.resolve(max_connections, pool_timeout), False)
        try:
            made = cls(shared.client, url=url, **settings)  # type: ignore[call-arg]
        except BaseException:
            if SHARED.release(shared):
                shared.client.close()
            raise
        made._shared = shared
        return made

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Give the idle connections back; the last user of a `from_url` client closes it."""
        shared, self._shared = self._shared, None
        if shared is None:
            self._wire.close()
        elif SHARED.release(shared):
            shared.wire.close()
            shared.client.close()

    def ping(self) -> None:
        """Raise CheckpointStoreUnavailable (naming the URL, never its password) now, not at first use."""
        self._wire.call(("PING",))


# asyncio client -> its sync twin; the twin's connections close when the asyncio client is collected
_TWINS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_TWINS_LOCK = threading.Lock()


def sync_twin(client: Any) -> Any:
    """A sync redis-py client to the same server(s) as a redis.asyncio one, with the same connection settings
    (TLS, credentials, timeouts) and connections of its own, for the lease-renewing threads. One per client."""
    with _TWINS_LOCK:
        twin = _TWINS.get(client)
        if twin is None:
            twin = _TWINS[client] = _new_twin(client)
            weakref.finalize(client, twin.close)
        return twin


def _new_twin(client: Any) -> Any:
    if isinstance(client, redis.asyncio.RedisCluster):
        from redis.cluster import ClusterNode

        nodes = [ClusterNode(node.host, node.port) for node in client.get_nodes()] or [
            ClusterNode(*hostport.rsplit(":", 1)) for hostport in client.nodes_manager.startup_nodes]
        kwargs = {k: v for k, v in client.nodes_manager.connection_kwargs.items()
                  if k not in ("host", "port", "connection_class", "connection_pool_class")}
        return redis.RedisCluster(startup_nodes=nodes, **kwargs)
    pool = client.connection_pool
    # redis.asyncio.SSLConnection -> redis.SSLConnection, and so on: the kwargs are the same for both
    kind = getattr(redis.connection, pool.connection_class.__name__, redis.connection.Connection)
    # Blocking: renewals of many leases at once wait for a free connection instead of failing with "too many"
    return redis.Redis(connection_pool=redis.BlockingConnectionPool(connection_class=kind, max_connections=8,
                                                                    timeout=5, **pool.connection_kwargs))
