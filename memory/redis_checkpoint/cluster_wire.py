"""Round trips to a Redis Cluster: the savers' and the store's batches, each command sent to the node owning its
key's slot by redis-py's `RedisCluster` pipeline (which follows MOVED/ASK and re-reads the slot map).

Every script keeps to one slot (a thread's keys share its `{<thread>}` hash tag; the store's keys share one
tag of their own), so a batch is split by node, never a command by slot. Commands that name no key are
handled here: SCAN walks each primary in turn behind one cursor, PING asks every primary.

The standalone wire (wire.py) stays as it is: on one Redis it talks RESP on checked-out connections,
which redis-py's per-command path would slow down 2-4x; a cluster pays that path for its routing.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

from reactgraph.memory.redis_checkpoint.scripts import Script
from reactgraph.memory.redis_checkpoint.settings import PoolLimits, client_kwargs, parse_cluster_url, unavailable

Command = tuple[Any, ...]
_DOWN = (redis.ConnectionError, redis.TimeoutError, OSError, redis.exceptions.ClusterError)
CLUSTER_CLIENTS = (redis.RedisCluster, redis.asyncio.RedisCluster)


def is_cluster_client(client: Any) -> bool:
    return isinstance(client, CLUSTER_CLIENTS)


def new_cluster_client(url: str, options: dict[str, Any], limits: PoolLimits, asyncio_client: bool) -> Any:
    """A `RedisCluster` (redis-py's, sync or asyncio) on the URL's seed nodes, `limits.max_connections` per node."""
    named = parse_cluster_url(url)
    kwargs = {**client_kwargs("", options), **named.options, "max_connections": limits.max_connections}
    if named.username:
        kwargs["username"] = named.username
    if named.password is not None:
        kwargs["password"] = named.password
    if named.tls:
        kwargs["ssl"] = True
    if asyncio_client:
        nodes = [redis.asyncio.cluster.ClusterNode(host, port) for host, port in named.seeds]
        return redis.asyncio.RedisCluster(startup_nodes=nodes, **kwargs)  # connects on first use
    try:  # the sync client reads the slot map now
        return redis.RedisCluster(startup_nodes=[redis.cluster.ClusterNode(h, p) for h, p in named.seeds], **kwargs)
    except (*_DOWN, redis.exceptions.RedisClusterException) as exc:  # e.g. "cannot be connected"
        raise unavailable(named.shown(), exc, kwargs.get("socket_timeout")) from exc


def connection_kwargs(client: Any) -> dict[str, Any]:
    """The per-node connection settings of a cluster client (for its socket timeout in messages)."""
    holder = client.nodes_manager if isinstance(client, redis.RedisCluster) else client
    return dict(getattr(holder, "connection_kwargs", {}))


def check_cluster_client(client: Any) -> None:
    if connection_kwargs(client).get("decode_responses"):
        raise ValueError("the Redis client must be created with decode_responses=False")


def _encode(command: Command) -> Command:
    head = command[0]
    return ("EVALSHA", head.sha, *command[1:]) if isinstance(head, Script) else command


def _scan_start(cursor: Any) -> tuple[int, int]:
    """(primary index, that primary's cursor) from our cursor "<index>:<cursor>" (0 = the start)."""
    text = cursor.decode() if isinstance(cursor, bytes) else str(cursor)
    index, _, inner = text.partition(":")
    return (int(index), int(inner)) if inner else (0, 0)


def _scan_next(index: int, count: int, reply: Any) -> tuple[bytes, list[Any]]:
    inner, keys = reply
    if isinstance(inner, dict):  # redis-py answers a targeted SCAN with {node name: cursor}
        [inner] = inner.values()
    if int(inner) == 0:
        return (b"0" if index + 1 >= count else b"%d:0" % (index + 1)), keys
    return b"%d:%d" % (index, int(inner)), keys


class _Replies:
    """The reply list of a batch, with what needs a second pass: scripts the server did not know."""

    @staticmethod
    def missing(replies: list[Any]) -> list[int]:
        return [i for i, r in enumerate(replies) if isinstance(r, redis.exceptions.NoScriptError)]

    @staticmethod
    def first_error(replies: list[Any]) -> list[Any]:
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies


class ClusterWire:
    """`SyncWire`'s interface over a `redis.RedisCluster`; safe across threads (redis-py's pools are)."""

    is_async = False
    is_cluster = True

    def __init__(self, client: redis.RedisCluster, url: str, limits: PoolLimits) -> None:
        check_cluster_client(client)
        self.client, self.url, self.limits = client, url, limits
        self.answer_wait = connection_kwargs(client).get("socket_timeout")
        self._executor: ThreadPoolExecutor | None = None
        self._pid = os.getpid()

    def call(self, command: Command) -> Any:
        return self.batch([command])[0]

    def batch(self, commands: list[Command]) -> list[Any]:
        try:
            return self._batch(commands)
        except _DOWN as exc:  # a refused login too (AuthenticationError is a ConnectionError)
            raise unavailable(self.url, exc, self.answer_wait) from exc

    def _batch(self, commands: list[Command]) -> list[Any]:
        if not commands:
            return []
        if commands[0][0] == "SCAN":  # the plans send a SCAN alone
            return [self._scan(commands[0])]
        if commands[0][0] == "PING":
            return [all(self.client.execute_command("PING", target_nodes=node) for node in self.client.get_primaries())]
        replies = self._pipeline(commands)
        missing = _Replies.missing(replies)
        if missing:
            for script in {commands[i][0] for i in missing}:
                self.client.script_load(script.source)  # redis-py loads it on every primary
            for i, reply in zip(missing, self._pipeline([commands[i] for i in missing]), strict=True):
                replies[i] = reply
        return _Replies.first_error(replies)

    def _pipeline(self, commands: list[Command]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*_encode(command))
        return pipe.execute(raise_on_error=False)

    def _scan(self, command: Command) -> tuple[bytes, list[Any]]:
        primaries = sorted(self.client.get_primaries(), key=lambda n: n.name)
        index, inner = _scan_start(command[1])
        if index >= len(primaries):  # the cluster shrank meanwhile: nothing more to walk
            return b"0", []
        reply = self.client.execute_command("SCAN", inner, *command[2:], target_nodes=primaries[index])
        return _scan_next(index, len(primaries), reply)

    async def acall(self, command: Command) -> Any:
        return (await self.abatch([command]))[0]

    async def abatch(self, commands: list[Command]) -> list[Any]:
        """`batch` for asyncio callers, on a worker thread: any event loop, and none of them blocked."""
        if self._pid != os.getpid():
            self._executor, self._pid = None, os.getpid()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.limits.max_connections, thread_name_prefix="reactgraph-redis")
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.batch, commands)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None


class AsyncClusterWire:
    """`AsyncWire`'s interface over a `redis.asyncio.RedisCluster`, bound (like it) to one event loop."""

    is_async = True
    is_cluster = True

    def __init__(self, client: redis.asyncio.RedisCluster, url: str, limits: PoolLimits) -> None:
        check_cluster_client(client)
        self.client, self.url, self.limits = client, url, limits
        self.answer_wait = connection_kwargs(client).get("socket_timeout")
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None

    async def call(self, command: Command) -> Any:
        return (await self.batch([command]))[0]

    async def batch(self, commands: list[Command]) -> list[Any]:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        try:
            return await self._batch(commands)
        except _DOWN as exc:
            raise unavailable(self.url, exc, self.answer_wait) from exc

    async def _batch(self, commands: list[Command]) -> list[Any]:
        if not commands:
            return []
        if commands[0][0] == "SCAN":
            return [await self._scan(commands[0])]
        if commands[0][0] == "PING":
            await self.client.initialize()
            answers = [await self.client.execute_command("PING", target_nodes=n) for n in self.client.get_primaries()]
            return [all(answers)]
        replies = await self._pipeline(commands)
        missing = _Replies.missing(replies)
        if missing:
            for script in {commands[i][0] for i in missing}:
                await self.client.script_load(script.source)
            for i, reply in zip(missing, await self._pipeline([commands[i] for i in missing]), strict=True):
                replies[i] = reply
        return _Replies.first_error(replies)

    async def _pipeline(self, commands: list[Command]) -> list[Any]:
        pipe = self.client.pipeline()
        for command in commands:
            pipe.execute_command(*_encode(command))
        return await pipe.execute(raise_on_error=False)

    async def _scan(self, command: Command) -> tuple[bytes, list[Any]]:
        await self.client.initialize()
        primaries = sorted(self.client.get_primaries(), key=lambda n: n.name)
        index, inner = _scan_start(command[1])
        if index >= len(primaries):
            return b"0", []
        reply = await self.client.execute_command("SCAN", inner, *command[2:], target_nodes=primaries[index])
        return _scan_next(index, len(primaries), reply)

    async def close(self) -> None:
        """Nothing held between batches: the client's own pools are closed with the client."""


def wire_kind(client: Any) -> type | None:
    """The wire class for a cluster client, None for any other."""
    if isinstance(client, redis.asyncio.RedisCluster):
        return AsyncClusterWire
    return ClusterWire if isinstance(client, redis.RedisCluster) else None
