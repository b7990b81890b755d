"""The pool's limits: how many Redis connections the savers and the store hold, and how long a caller waits.

A connection per concurrent caller does not scale: at a few hundred concurrent sessions redis-py's default
pool (100) refused the rest at once. So a pool has a fixed size and a caller waits for a free connection.
It waits as long as connections keep coming free (under load the queue is long but it moves: with 1,000
sessions on one event loop a fixed 10 s wait failed 90 % of them while Redis was idle), and gives up when
none has come free for `timeout` seconds: that is reported as a busy pool, never as an unreachable server.

A connection's own wait is bounded too, and set here rather than left to redis-py (whose 5 s default fails
a slow but healthy script, and only says "timed out"): a server that stops answering mid-reply fails the
call after `socket_timeout` seconds (30; $REACTGRAPH_REDIS_TIMEOUT), with one line saying so.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from reactgraph.memory.redis_checkpoint.errors import InvalidRedisSetting

MAX_CONNECTIONS_ENV = "REACTGRAPH_REDIS_MAX_CONNECTIONS"
POOL_TIMEOUT_ENV = "REACTGRAPH_REDIS_POOL_TIMEOUT"
DEFAULT_MAX_CONNECTIONS = 50
DEFAULT_POOL_TIMEOUT = 10.0
SOCKET_TIMEOUT_ENV = "REACTGRAPH_REDIS_TIMEOUT"
# Long enough for any script we send on a loaded server, short enough that a renewal of a session's 30 s lease
# that hangs fails before the lease runs out (renewals come every 10 s).
DEFAULT_SOCKET_TIMEOUT = 10.0
DEFAULT_CONNECT_TIMEOUT = 5.0


@dataclass(frozen=True)
class PoolLimits:
    """A pool's size and how long (seconds) a caller waits for one of its connections."""

    max_connections: int = DEFAULT_MAX_CONNECTIONS
    timeout: float = DEFAULT_POOL_TIMEOUT

    @classmethod
    def resolve(cls, max_connections: int | None = None, timeout: float | None = None) -> PoolLimits:
        """The arguments where given, else $REACTGRAPH_REDIS_MAX_CONNECTIONS / $REACTGRAPH_REDIS_POOL_TIMEOUT,
        else the defaults; anything else than a positive count and a non-negative, finite wait is refused."""
        size = max_connections if max_connections is not None else _env(MAX_CONNECTIONS_ENV, int)
        wait = timeout if timeout is not None else _env(POOL_TIMEOUT_ENV, float)
        size = DEFAULT_MAX_CONNECTIONS if size is None else size
        wait = DEFAULT_POOL_TIMEOUT if wait is None else wait
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 100_000:
            raise InvalidRedisSetting(f"max_connections must be a whole number from 1 to 100000, not {size!r}")
        if isinstance(wait, bool) or not isinstance(wait, int | float) or not (0 <= wait < math.inf):
            raise InvalidRedisSetting(f"pool_timeout must be a number of seconds, 0 or more, not {wait!r}")
        return cls(size, float(wait))

    def within(self, pool: Any) -> PoolLimits:
        """These limits, never more connections than `pool` (a client's own pool) may open."""
        size = min(self.max_connections, getattr(pool, "max_connections", None) or self.max_connections)
        return PoolLimits(size, self.timeout)


def _env(name: str, kind: type) -> Any:
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        return kind(text)
    except ValueError:
        raise InvalidRedisSetting(f"{name}={text!r} is not a {'whole ' if kind is int else ''}number") from None


def socket_timeout(timeout: Any = None) -> float:
    """How long a call waits for Redis to answer: the argument, else $REACTGRAPH_REDIS_TIMEOUT, else 10 s."""
    wait = timeout if timeout is not None else _env(SOCKET_TIMEOUT_ENV, float)
    wait = DEFAULT_SOCKET_TIMEOUT if wait is None else wait
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not (0 < wait < math.inf):
        raise InvalidRedisSetting(f"socket_timeout must be a number of seconds above 0, not {wait!r}")
    return float(wait)


def answer_wait(pool: Any) -> float | None:
    """The socket timeout of a redis-py pool's connections (None: they wait for good), for error messages."""
    wait = pool.connection_kwargs.get("socket_timeout")
    return float(wait) if isinstance(wait, int | float) and not isinstance(wait, bool) else None


def client_kwargs(url: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """redis-py options for a client we own: binary replies, and bounded waits for a dead host or a hung server
    (a `socket_timeout=` or `socket_connect_timeout=` in the URL's query wins, as redis-py applies it last)."""
    if kwargs.get("decode_responses"):
        raise ValueError("decode_responses=True would corrupt binary values")
    in_url = parse_qs(urlsplit(url).query) if "?" in url else {}
    options = {"socket_connect_timeout": DEFAULT_CONNECT_TIMEOUT, **kwargs, "decode_responses": False}
    if "socket_connect_timeout" in in_url:
        del options["socket_connect_timeout"]
    if "socket_timeout" in in_url:
        options.pop("socket_timeout", None)
    else:
        options["socket_timeout"] = socket_timeout(options.get("socket_timeout"))
    return options


class ThreadSlots:
    """At most `max_connections` connections out at once, across threads (see the module's note on waiting)."""

    def __init__(self, limits: PoolLimits) -> None:
        self.limits, self.last_free = limits, time.monotonic()
        self._free = threading.BoundedSemaphore(limits.max_connections)

    def take(self) -> bool:
        """A slot (True), or False when none came free for `limits.timeout` seconds."""
        if self._free.acquire(blocking=False):
            return True
        while not self._free.acquire(timeout=self.limits.timeout):
            if time.monotonic() - self.last_free >= self.limits.timeout:
                return False
        return True

    def give(self) -> None:
        self.last_free = time.monotonic()
        self._free.release()


class LoopSlots:
    """The same as `ThreadSlots` for the tasks of one event loop."""

    def __init__(self, limits: PoolLimits) -> None:
        self.limits, self.last_free = limits, time.monotonic()
        self._free = asyncio.Semaphore(limits.max_connections)

    async def take(self) -> bool:
        if not self._free.locked():
            await self._free.acquire()
            return True
        # One acquire kept across the checks, so the caller keeps its place in the queue.
        acquiring = asyncio.ensure_future(self._free.acquire())
        try:
            while not acquiring.done():
                await asyncio.wait({acquiring}, timeout=self.limits.timeout)
                if not acquiring.done() and time.monotonic() - self.last_free >= self.limits.timeout:
                    return False
            return True
        finally:
            if not acquiring.done():
                acquiring.cancel()  # a permit it got meanwhile goes on to the next waiter (asyncio.Semaphore)

    def give(self) -> None:
        self.last_free = time.monotonic()
        self._free.release()
