"""Round trips to Redis: a batch of commands in, their replies out, on connections borrowed from redis-py.

The savers keep a few connections checked out of the client's pool instead of going through
`Redis.execute_command` per call: redis-py 8's per-command path (pool checkout with a socket poll,
observability hooks, response callbacks) costs 2-4x the network round trip itself on a local Redis,
and a checkpointer pays it on every graph step. Connections, auth, TLS and RESP parsing stay redis-py's.
"""

from __future__ import annotations

import os
from typing import Any

import redis
import redis.asyncio

from reactgraph.memory.redis_checkpoint.errors import unavailable
from reactgraph.memory.redis_checkpoint.scripts import Script

Command = tuple[Any, ...]  # ("CMD", *args) or (Script, numkeys, *keys_and_args)
_DOWN = (redis.ConnectionError, redis.TimeoutError, OSError)


def _encode(command: Command) -> Command:
    head = command[0]
    return ("EVALSHA", head.sha, *command[1:]) if isinstance(head, Script) else command


def _resp(command: Command, out: list[bytes]) -> None:
    """RESP-encode one command; 10x cheaper than redis-py's general packer for our str/bytes/int args."""
    out.append(b"*%d\r\n" % len(command))
    for arg in command:
        if isinstance(arg, str):
            arg = arg.encode()
        elif isinstance(arg, int):
            arg = b"%d" % arg
        out.append(b"$%d\r\n" % len(arg))
        out.append(arg)
        out.append(b"\r\n")


def _pack(commands: list[Command]) -> list[bytes]:
    out: list[bytes] = []
    for command in commands:
        _resp(_encode(command), out)
    return [b"".join(out)]


def _missing_scripts(replies: list[Any]) -> list[int]:
    return [i for i, r in enumerate(replies) if isinstance(r, redis.exceptions.NoScriptError)]


def _raise_first_error(replies: list[Any]) -> list[Any]:
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies


def check_client(client: Any) -> None:
    """A standalone (or Sentinel) client that returns bytes: checkpoints are binary."""
    pool = getattr(client, "connection_pool", None)
    if pool is None:
        raise TypeError(f"expected a redis.Redis client (standalone or Sentinel), got {type(client).__name__}")
    if pool.connection_kwargs.get("decode_responses"):
        raise ValueError("the Redis client must be created with decode_responses=False")


class SyncWire:
    """Sends batches over connections checked out of a `redis.Redis` pool; safe across threads."""

    def __init__(self, client: redis.Redis, url: str) -> None:
        check_client(client)
        self.client, self.url = client, url
        self._free: list[Any] = []  # list.pop/append are atomic, so threads need no lock
        self._pid = os.getpid()

    def call(self, command: Command) -> Any:
        return self.batch([command])[0]

    def batch(self, commands: list[Command]) -> list[Any]:
        """One round trip (two the first time a script meets a server): replies in command order."""
        if not commands:
            return []
        conn = self._acquire()
        try:
            replies = self._round_trip(conn, commands)
            missing = _missing_scripts(replies)
            if missing:
                for script in {commands[i][0] for i in missing}:
                    _raise_first_error(self._round_trip(conn, [("SCRIPT", "LOAD", script.source)]))
                for i, reply in zip(missing, self._round_trip(conn, [commands[i] for i in missing]), strict=True):
                    replies[i] = reply
        finally:
            self._free.append(conn)
        return _raise_first_error(replies)

    def _round_trip(self, conn: Any, commands: list[Command]) -> list[Any]:
        packed = _pack(commands)
        for attempt in (1, 2):
            try:
                conn.send_packed_command(packed, check_health=False)
                replies = []
                for _ in commands:
                    try:
                        replies.append(conn.read_response())
                    except redis.ResponseError as exc:
                        replies.append(exc)
                return replies
            except _DOWN as exc:
                conn.disconnect()
                # Every batch the savers send is idempotent, so one resend after a dropped connection
                # is safe; a refused login is not worth repeating.
                if attempt == 2 or isinstance(exc, redis.AuthenticationError):
                    raise unavailable(self.url, exc) from exc
        raise AssertionError("unreachable")

    def _acquire(self) -> Any:
        if self._pid != os.getpid():
            # A forked child must not talk on its parent's sockets; the pool makes it fresh ones.
            self._free, self._pid = [], os.getpid()
        try:
            return self._free.pop()
        except IndexError:
            pass
        try:
            return self.client.connection_pool.get_connection()
        except _DOWN as exc:
            raise unavailable(self.url, exc) from exc

    def close(self) -> None:
        while self._free:
            self.client.connection_pool.release(self._free.pop())


class AsyncWire:
    """The same as `SyncWire`, over a `redis.asyncio.Redis` pool; safe across tasks of one event loop."""

    def __init__(self, client: redis.asyncio.Redis, url: str) -> None:
        check_client(client)
        self.client, self.url = client, url
        self._free: list[Any] = []

    async def call(self, command: Command) -> Any:
        return (await self.batch([command]))[0]

    async def batch(self, commands: list[Command]) -> list[Any]:
        if not commands:
            return []
        conn = await self._acquire()
        try:
            replies = await self._round_trip(conn, commands)
            missing = _missing_scripts(replies)
            if missing:
                for script in {commands[i][0] for i in missing}:
                    _raise_first_error(await self._round_trip(conn, [("SCRIPT", "LOAD", script.source)]))
                for i, reply in zip(missing, await self._round_trip(conn, [commands[i] for i in missing]), strict=True):
                    replies[i] = reply
        finally:
            self._free.append(conn)
        return _raise_first_error(replies)

    async def _round_trip(self, conn: Any, commands: list[Command]) -> list[Any]:
        packed = _pack(commands)
        for attempt in (1, 2):
            try:
                await conn.send_packed_command(packed, check_health=False)
                replies = []
                for _ in commands:
                    try:
                        replies.append(await conn.read_response())
                    except redis.ResponseError as exc:
                        replies.append(exc)
                return replies
            except _DOWN as exc:
                await conn.disconnect()
                if attempt == 2 or isinstance(exc, redis.AuthenticationError):
                    raise unavailable(self.url, exc) from exc
        raise AssertionError("unreachable")

    async def _acquire(self) -> Any:
        try:
            return self._free.pop()
        except IndexError:
            pass
        try:
            return await self.client.connection_pool.get_connection()
        except _DOWN as exc:
            raise unavailable(self.url, exc) from exc

    async def close(self) -> None:
        while self._free:
            await self.client.connection_pool.release(self._free.pop())


def client_kwargs(url: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """redis-py options for a client we own: binary replies, and a bounded wait for a dead host."""
    if kwargs.get("decode_responses"):
        raise ValueError("decode_responses=True would corrupt binary values")
    options = {"socket_connect_timeout": 5.0, **kwargs, "decode_responses": False}
    if "socket_connect_timeout=" in url:
        del options["socket_connect_timeout"]  # the URL's own setting wins
    return options


class WiredClient:
    """What the Redis-backed saver and store share: a client (maybe their own), the wire over it, and closing."""

    client: Any
    _wire: SyncWire
    _owns_client: bool = False

    @staticmethod
    def connect(url: str, options: dict[str, Any]) -> Any:
        """A client of our own for `url` (validated first, so a bad URL fails with one clear line)."""
        import redis

        from reactgraph.memory.redis_checkpoint.errors import check_url
        return redis.Redis.from_url(check_url(url), **client_kwargs(url, options))

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Give the borrowed connections back, and close the client if we made it."""
        self._wire.close()
        if self._owns_client:
            self.client.close()

    def ping(self) -> None:
        """Raise CheckpointStoreUnavailable (naming the URL, never its password) now, not at first use."""
        self._wire.call(("PING",))
