"""A Redis URL and what it sets, and how the Redis saver and store fail, each as one line: a bad URL or setting,
no usable server, or no free connection in time.

The pool's limits: how many Redis connections the savers and the store hold, and how long a caller waits.

A connection per concurrent caller does not scale: at a few hundred concurrent sessions redis-py's default
pool (100) refused the rest at once. So a pool has a fixed size and a caller waits for a free connection.
It waits as long as connections keep coming free (under load the queue is long but it moves: with 1,000
sessions on one event loop a fixed 10 s wait failed 90 % of them while Redis was idle), and gives up when
none has come free for `timeout` seconds: that is reported as a busy pool, never as an unreachable server.

A connection's own wait is bounded too, and set here rather than left to redis-py (whose 5 s default fails
a slow but healthy script, and only says "timed out"): a server that stops answering mid-reply fails the
call after `socket_timeout` seconds (30; $REACTGRAPH_REDIS_TIMEOUT), with one line saying so.

Naming a Redis Cluster: `redis+cluster://[user:password@]host:port[,host:port…]/` (TLS: `rediss+cluster://`).

A plain `redis://` URL cannot say whether the server behind it is a cluster, and redis-py has no URL for one
(its `RedisCluster.from_url` takes one node's `redis://` URL). So the scheme says it, as Celery/Kombu's
`redis+sentinel://` does for Sentinel and Pomerium's `redis+cluster://` for a cluster, and the host part
lists seed nodes, any of which is enough to find the rest. A cluster has only database 0.

Parsing imports no redis-py, so a bad URL fails with one line before anything is loaded.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from reactgraph.errors import ReactGraphError

_SCHEMES = ("redis", "rediss", "unix")
# redis-py words its connect errors as "Error 111 connecting to host:port. Connection refused."
_CONNECT_REASON = re.compile(r"^Error [-\w]+ (?:connecting to|while writing to socket\.?) ?\S*?\.? (.+?)\.?$")


class InvalidRedisURL(ReactGraphError, ValueError):
    """The Redis URL cannot be parsed; the message names it with any password hidden."""


class InvalidRedisSetting(ReactGraphError, ValueError):
    """A connection setting (an option or its environment variable) is not a usable number."""


class CheckpointStoreUnavailable(ReactGraphError, ConnectionError):
    """Redis did not answer, or refused us; the message names the URL (no password) and the reason."""


class RedisPoolExhausted(CheckpointStoreUnavailable):
    """Every connection the pool may open stayed busy for the whole wait: a load problem, not a dead server."""


def redact(url: str) -> str:
    """The URL as it may be shown: the password replaced, the query dropped."""
    try:
        if is_cluster_url(url):
            return parse_cluster_url(url).shown()
        parts = urlsplit(url)
        if parts.scheme == "unix":
            return f"unix://{parts.path}"
        host = parts.hostname or "localhost"
        port = parts.port or 6379
        db = (parts.path or "/0").lstrip("/") or "0"
        user = f"{parts.username}@" if parts.username and parts.username != "default" else ""
        return f"{parts.scheme}://{user}{host}:{port}/{db}"
    except ValueError:  # InvalidRedisURL, InvalidRedisSetting too
        # Unparseable: still never echo a password back.
        return re.sub(r"(//[^/@]*?:)[^/@]*@", r"\1***@", url.split("?")[0])


def client_url(client: object) -> str:
    """The redacted URL of an existing redis-py client (sync or asyncio, standalone or cluster), for messages."""
    if getattr(client, "connection_pool", None) is None:  # a RedisCluster: its seed nodes
        hosts = ",".join(sorted(client.nodes_manager.startup_nodes))  # type: ignore[attr-defined]
        return f"redis+cluster://{hosts}/"
    kwargs = client.connection_pool.connection_kwargs  # type: ignore[attr-defined]
    if kwargs.get("path"):
        return f"unix://{kwargs['path']}"
    return f"redis://{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"


def check_url(url: str) -> str:
    """Raise InvalidRedisURL unless `url` is something redis-py can connect with; returns it unchanged."""
    if is_cluster_url(url):
        parse_cluster_url(url)
        return url
    shown = redact(url)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is what validates it
    except ValueError as exc:
        raise InvalidRedisURL(f"invalid Redis URL {shown!r}: {exc}") from None
    if parts.scheme not in _SCHEMES:
        raise InvalidRedisURL(f"invalid Redis URL {shown!r}: scheme must be redis://, rediss:// or unix:// "
                             "(redis+cluster:// for a Redis Cluster)")
    if parts.scheme != "unix" and not parts.hostname:
        raise InvalidRedisURL(f"invalid Redis URL {shown!r}: no host")
    db = (parts.path or "/0").lstrip("/") or "0"
    if parts.scheme != "unix" and not db.isdigit():
        raise InvalidRedisURL(f"invalid Redis URL {shown!r}: database {db!r} is not a number")
    return url


def unavailable(url: str, exc: BaseException, answer_wait: float | None = None) -> CheckpointStoreUnavailable:
    """The one-line error for a Redis that cannot be reached, will not let us in, or stopped answering
    (`answer_wait`: the connection's socket timeout, in seconds)."""
    import redis  # here: the error types above must import without redis-py

    if isinstance(exc, redis.AuthenticationError):
        return CheckpointStoreUnavailable(f"Redis at {url} refused the credentials: {_first_line(exc)}")
    if isinstance(exc, redis.TimeoutError):
        if answer_wait is not None and not is_connect_timeout(exc):
            return CheckpointStoreUnavailable(f"Redis at {url} did not answer within {answer_wait:g} s")
        return CheckpointStoreUnavailable(f"cannot reach Redis at {url}: timed out")
    message = _first_line(exc)
    match = _CONNECT_REASON.match(message)
    return CheckpointStoreUnavailable(f"cannot reach Redis at {url}: {match.group(1) if match else message}")


def is_connect_timeout(exc: BaseException) -> bool:
    """Whether a redis-py TimeoutError is about connecting (else a sent command got no answer in time)."""
    return "connecting" in str(exc)


def resend_after(exc: BaseException) -> bool:
    """A dropped connection is worth one resend; a refused login, or a server that stopped answering, is not."""
    import redis

    if isinstance(exc, redis.AuthenticationError):
        return False
    return not isinstance(exc, redis.TimeoutError) or is_connect_timeout(exc)


def exhausted(url: str, connections: int, waited: float) -> RedisPoolExhausted:
    """The one-line error for a caller that waited its full time for one of the pool's connections."""
    return RedisPoolExhausted(
        f"all {connections} Redis connections to {url} busy for {waited:g} s: raise "
        "REACTGRAPH_REDIS_MAX_CONNECTIONS (the pool's size) or REACTGRAPH_REDIS_POOL_TIMEOUT (the wait)")


def checkout_error(url: str, limits: Any, exc: BaseException, answer_wait: float | None = None) -> BaseException:
    """What a failed checkout from redis-py's pool means: it is full, the server refused us, or is unreachable."""
    import redis

    if isinstance(exc, redis.exceptions.MaxConnectionsError) or str(exc) == "No connection available.":
        return exhausted(url, limits.max_connections, limits.timeout)  # the pool's own limit or wait
    if isinstance(exc, redis.ResponseError):
        return refused(url, exc)
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, OSError)):
        return unavailable(url, exc, answer_wait)  # a new connection's set-up (SELECT, AUTH) may time out
    return exc


def refused(url: str, exc: BaseException) -> CheckpointStoreUnavailable:
    """The one-line error for a server that answered the connection's set-up with an error (e.g. SELECT 999)."""
    return CheckpointStoreUnavailable(f"Redis at {url}: {_first_line(exc)}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


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


CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
_QUERY_OPTIONS = ("socket_timeout", "socket_connect_timeout")  # the waits, as in a redis:// URL's query
MAX_SEEDS = 64


def is_cluster_url(url: object) -> bool:
    return isinstance(url, str) and url.split("://", 1)[0] in CLUSTER_SCHEMES


@dataclass(frozen=True)
class ClusterURL:
    """What a cluster URL names: seed nodes, credentials, TLS, and the waits given in its query."""

    seeds: tuple[tuple[str, int], ...]
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: bool = False
    options: dict[str, float] = field(default_factory=dict)

    def shown(self) -> str:
        """The URL as it may be shown: no password, no query."""
        user = f"{self.username}@" if self.username and self.username != "default" else ""
        hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.seeds)
        return f"{'rediss' if self.tls else 'redis'}+cluster://{user}{hosts}/"


def parse_cluster_url(url: str) -> ClusterURL:
    """The seeds and settings of a `redis+cluster://` URL; InvalidRedisURL (one line, no password) otherwise."""
    scheme, _, rest = url.partition("://")
    if scheme not in CLUSTER_SCHEMES:
        raise InvalidRedisURL("invalid Redis Cluster URL: scheme must be redis+cluster:// or rediss+cluster://")
    authority, slash, tail = rest.partition("/")
    if not slash:
        authority, _, query = authority.partition("?")
        path = ""
    else:
        path, _, query = tail.partition("?")
    userinfo, at, hosts = authority.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username, password = (unquote(user) or None), (unquote(secret) if colon else None)
    shown = f"{scheme}://{'…@' if at else ''}{hosts}/"
    seeds = []
    for part in hosts.split(","):
        try:
            parsed = urlsplit(f"redis://{part.strip()}")
            port = parsed.port
        except ValueError as exc:
            raise InvalidRedisURL(f"invalid Redis Cluster URL {shown!r}: {exc}") from None
        if not parsed.hostname or parsed.path or parsed.username is not None:
            raise InvalidRedisURL(f"invalid Redis Cluster URL {shown!r}: {part.strip()!r} is not host:port")
        seeds.append((parsed.hostname, port or 6379))
    if len(seeds) > MAX_SEEDS:
        raise InvalidRedisURL(f"invalid Redis Cluster URL {shown!r}: more than {MAX_SEEDS} seed nodes")
    if path not in ("", "0"):
        raise InvalidRedisURL(f"invalid Redis Cluster URL {shown!r}: a Redis Cluster has only database 0, "
                              f"so the URL must not name database {path!r}")
    return ClusterURL(tuple(seeds), username, password, scheme == "rediss+cluster", _query_options(query, shown))


def _query_options(query: str, shown: str) -> dict[str, float]:
    options: dict[str, float] = {}
    for name, values in parse_qs(query, keep_blank_values=True).items():
        if name not in _QUERY_OPTIONS:
            raise InvalidRedisURL(f"invalid Redis Cluster URL {shown!r}: unknown option {name!r} "
                                  f"(known: {', '.join(_QUERY_OPTIONS)})")
        try:
            options[name] = float(values[-1])
        except ValueError:
            raise InvalidRedisSetting(f"{name}={values[-1]!r} in {shown!r} is not a number of seconds") from None
    return options
