"""Naming a Redis Cluster: `redis+cluster://[user:password@]host:port[,host:port…]/` (TLS: `rediss+cluster://`).

A plain `redis://` URL cannot say whether the server behind it is a cluster, and redis-py has no URL for one
(its `RedisCluster.from_url` takes one node's `redis://` URL). So the scheme says it, as Celery/Kombu's
`redis+sentinel://` does for Sentinel and Pomerium's `redis+cluster://` for a cluster, and the host part
lists seed nodes, any of which is enough to find the rest. A cluster has only database 0.

Parsing imports no redis-py, so a bad URL fails with one line before anything is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

from reactgraph.memory.redis_checkpoint.errors import InvalidRedisSetting, InvalidRedisURL

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
