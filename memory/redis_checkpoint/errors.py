"""How the Redis saver and store fail, each as one line: a bad URL or setting, no usable server, or no free
connection in time."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

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
    from reactgraph.memory.redis_checkpoint.cluster_url import is_cluster_url, parse_cluster_url

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
    from reactgraph.memory.redis_checkpoint.cluster_url import is_cluster_url, parse_cluster_url

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
