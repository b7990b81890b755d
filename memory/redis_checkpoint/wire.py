"""Round trips to Redis: a batch of commands in, their replies out, on at most N connections of a redis-py pool.

The savers keep their connections checked out of the client's pool instead of going through
`Redis.execute_command` per call: redis-py 8's per-command path (pool checkout with a socket poll,
observability hooks, response callbacks) costs 2-4x the network round trip itself on a local Redis,
and a checkpointer pays it on every graph step. Connections, auth, TLS and RESP parsing stay redis-py's.

A wire holds at most `PoolLimits.max_connections` connections; a caller that finds them all busy waits,
and gets `RedisPoolExhausted` once none has come free for `PoolLimits.timeout` (settings.py). Savers
and stores on one client share its wire (`wire_of`), so they share that budget as well as the pool. Between
batches a wire keeps at most `idle_kept` connections checked out and gives the others back: the pool also
serves the client's own commands (the session lease's), which a burst of batches must not leave without one.
A server that does not answer within the connection's socket timeout fails the call with one line (see
`settings.unavailable`), not resent: a resend would only wait as long again.

The wire's bytes: a batch of commands RESP-encoded in one buffer (scripts by their SHA), and the replies' checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis
import redis.asyncio

from reactgraph.memory.redis_checkpoint import cluster_wire
from reactgraph.memory.redis_checkpoint.scripts import Script
from reactgraph.memory.redis_checkpoint.settings import (
    LoopSlots,
    PoolLimits,
    ThreadSlots,
    answer_wait,
    checkout_error,
    exhausted,
    redact,
    refused,
    resend_after,
    unavailable,
)

Command = tuple[Any, ...]  # ("CMD", *args) or (Script, numkeys, *keys_and_args)


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


def pack(commands: list[Command]) -> list[bytes]:
    out: list[bytes] = []
    for command in commands:
        _resp(_encode(command), out)
    return [b"".join(out)]


def missing_scripts(replies: list[Any]) -> list[int]:
    return [i for i, r in enumerate(replies) if isinstance(r, redis.exceptions.NoScriptError)]


def raise_first_error(replies: list[Any]) -> list[Any]:
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies


log = logging.getLogger("reactgraph.memory.redis")
_DOWN = (redis.ConnectionError, redis.TimeoutError, OSError)


def _log_down(url: str, exc: BaseException, event: str) -> None:
    """A connection lost: `reconnect` (the batch is sent once more on a new one), `unavailable` (given up), or
    `connect_failed` (no connection could be made)."""
    level = logging.WARNING if event == "reconnect" else logging.ERROR
    if isinstance(exc, Exception) and log.isEnabledFor(level):  # not a cancellation or a Ctrl-C
        shown, error = redact(url), f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
        what = {"reconnect": "connection dropped ({}); reconnecting and sending again",
                "unavailable": "connection dropped ({}); giving up"}.get(event, "cannot connect ({})")
        log.log(level, "redis %s: %s", shown, what.format(error),
                extra={"redis": {"event": event, "url": shown, "error": error}})


def check_client(client: Any) -> None:
    """A standalone (or Sentinel) client that returns bytes: checkpoints are binary."""
    pool = getattr(client, "connection_pool", None)
    if pool is None:
        raise TypeError(f"expected a redis.Redis client (standalone or Sentinel), got {type(client).__name__}")
    if pool.connection_kwargs.get("decode_responses"):
        raise ValueError("the Redis client must be created with decode_responses=False")


_WIRES: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_WIRES_LOCK = threading.Lock()


def wire_of(client: Any, url: str, limits: PoolLimits) -> Any:
    """The wire over `client`, made on first use: every saver and store on one client shares it (and its limits)."""
    with _WIRES_LOCK:
        wire = _WIRES.get(client)
        if wire is None:
            standalone = AsyncWire if isinstance(client, redis.asyncio.Redis) else SyncWire
            kind = cluster_wire.wire_kind(client) or standalone
            wire = _WIRES[client] = kind(client, url, limits)
        return wire


IDLE_KEPT = 8


def idle_kept(limits: PoolLimits) -> int:
    """How many idle connections a wire keeps out of its pool: enough for the usual concurrency of a process (a
    few graph steps at once), and never more than half the pool, so its other users always find one."""
    return min(IDLE_KEPT, limits.max_connections // 2)


class SyncWire:
    """Sends batches over connections checked out of a `redis.Redis` pool; safe across threads."""

    is_async = False

    def __init__(self, client: redis.Redis, url: str, limits: PoolLimits) -> None:
        check_client(client)
        self.pool, self.url = client.connection_pool, url
        self.limits = limits.within(self.pool)
        self.idle_kept = idle_kept(self.limits)
        self.answer_wait = answer_wait(self.pool)
        self._executor: ThreadPoolExecutor | None = None
        self._reset()

    def _reset(self) -> None:
        # list.pop/append are atomic, so threads need no lock; the semaphore counts connections out.
        self._free: list[Any] = []
        self._slots = ThreadSlots(self.limits)
        self._pid = os.getpid()
        self._executor = None

    def call(self, command: Command) -> Any:
        return self.batch([command])[0]

    def batch(self, commands: list[Command]) -> list[Any]:
        """One round trip (two the first time a script meets a server): replies in command order."""
        if not commands:
            return []
        conn = self._acquire()
        try:
            replies = self._round_trip(conn, commands)
            missing = missing_scripts(replies)
            if missing:
                for script in {commands[i][0] for i in missing}:
                    raise_first_error(self._round_trip(conn, [("SCRIPT", "LOAD", script.source)]))
                for i, reply in zip(missing, self._round_trip(conn, [commands[i] for i in missing]), strict=True):
                    replies[i] = reply
        except BaseException:
            conn.disconnect()  # interrupted half-way, it may hold unread replies: reconnect on next use
            raise
        finally:
            if len(self._free) < self.idle_kept:
                self._free.append(conn)
            else:
                self.pool.release(conn)
            self._slots.give()
        return raise_first_error(replies)

    async def acall(self, command: Command) -> Any:
        return (await self.abatch([command]))[0]

    async def abatch(self, commands: list[Command]) -> list[Any]:
        """`batch` for asyncio callers, on a worker thread: any event loop, and none of them blocked."""
        if self._pid != os.getpid():
            self._reset()
        if self._executor is None:  # at most one thread per connection: more could only wait for one
            self._executor = ThreadPoolExecutor(self.limits.max_connections, thread_name_prefix="reactgraph-redis")
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.batch, commands)

    def _round_trip(self, conn: Any, commands: list[Command]) -> list[Any]:
        packed = pack(commands)
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
                # Every batch the savers send is idempotent, so one resend after a dropped connection is safe.
                if attempt == 2 or not resend_after(exc):
                    _log_down(self.url, exc, "unavailable")
                    raise unavailable(self.url, exc, self.answer_wait) from exc
                _log_down(self.url, exc, "reconnect")
            except redis.ResponseError as exc:  # only a reconnection's set-up (AUTH, SELECT) answers here
                conn.disconnect()
                raise refused(self.url, exc) from exc
        raise AssertionError("unreachable")

    def _acquire(self) -> Any:
        if self._pid != os.getpid():
            # A forked child must not talk on its parent's sockets; the pool makes it fresh ones.
            self._reset()
        if not self._slots.take():
            raise exhausted(self.url, self.limits.max_connections, self.limits.timeout)
        try:
            return self._free.pop()
        except IndexError:
            pass
        try:
            return self.pool.get_connection()
        except BaseException as exc:
            self._slots.give()
            _log_down(self.url, exc, "connect_failed")
            raise checkout_error(self.url, self.limits, exc, self.answer_wait) from exc

    def close(self) -> None:
        """Give the idle connections back to the pool (and stop the worker threads, once idle)."""
        while self._free:
            self.pool.release(self._free.pop())
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None


class AsyncWire:
    """The same as `SyncWire`, over a `redis.asyncio.Redis` pool; safe across tasks of one event loop."""

    is_async = True

    def __init__(self, client: redis.asyncio.Redis, url: str, limits: PoolLimits) -> None:
        check_client(client)
        self.pool, self.url = client.connection_pool, url
        self.limits = limits.within(self.pool)
        self.idle_kept = idle_kept(self.limits)
        self.answer_wait = answer_wait(self.pool)
        self._free: list[Any] = []
        self._slots = LoopSlots(self.limits)
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None  # set by the first batch

    async def call(self, command: Command) -> Any:
        return (await self.batch([command]))[0]

    async def batch(self, commands: list[Command]) -> list[Any]:
        if not commands:
            return []
        conn, slots = await self._acquire()
        try:
            replies = await self._round_trip(conn, commands)
            missing = missing_scripts(replies)
            if missing:
                for script in {commands[i][0] for i in missing}:
                    raise_first_error(await self._round_trip(conn, [("SCRIPT", "LOAD", script.source)]))
                for i, reply in zip(missing, await self._round_trip(conn, [commands[i] for i in missing]), strict=True):
                    replies[i] = reply
        except BaseException:
            await conn.disconnect(nowait=True)  # cancelled half-way, it may hold unread replies
            raise
        finally:
            if len(self._free) < self.idle_kept:
                self._free.append(conn)
            else:
                await self.pool.release(conn)
            slots.give()
        return raise_first_error(replies)

    async def _round_trip(self, conn: Any, commands: list[Command]) -> list[Any]:
        packed = pack(commands)
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
                if attempt == 2 or not resend_after(exc):
                    _log_down(self.url, exc, "unavailable")
                    raise unavailable(self.url, exc, self.answer_wait) from exc
                _log_down(self.url, exc, "reconnect")
            except redis.ResponseError as exc:
                await conn.disconnect()
                raise refused(self.url, exc) from exc
        raise AssertionError("unreachable")

    async def _acquire(self) -> tuple[Any, LoopSlots]:
        loop = asyncio.get_running_loop()
        if loop is not self.loop:
            await self._move_to(loop)
        slots = self._slots  # released to this one even if the wire moves to another loop meanwhile
        if not await slots.take():
            raise exhausted(self.url, self.limits.max_connections, self.limits.timeout)
        try:
            return self._free.pop(), slots
        except IndexError:
            pass
        try:
            return await self.pool.get_connection(), slots
        except BaseException as exc:
            slots.give()
            _log_down(self.url, exc, "connect_failed")
            raise checkout_error(self.url, self.limits, exc, self.answer_wait) from exc

    async def _move_to(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serve another event loop: asyncio connections and waiters belong to the loop that made them."""
        stale, self._free = self._free, []
        self._slots, self.loop = LoopSlots(self.limits), loop
        for conn in stale:
            with contextlib.suppress(Exception):  # its loop may be closed; the pool reconnects it on next use
                await conn.disconnect(nowait=True)
            await self.pool.release(conn)

    async def close(self) -> None:
        while self._free:
            await self.pool.release(self._free.pop())
