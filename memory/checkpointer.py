"""One URL → one checkpointer: `redis://`, `rediss://`, `unix://`, `redis+cluster://`, `memory`, `sqlite:///path`,
or the default.

The default (no URL, no REDIS_URL) is the embedded Redis, so sessions persist across commands with
nothing to install or run. SQLite URLs read as SQLAlchemy's do: `sqlite:///sessions.db` is relative to the
working directory, `sqlite:////var/lib/app/sessions.db` (four slashes) is absolute.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reactgraph.errors import ReactGraphError

# Each backend is imported in its own branch: `--store memory` never loads redis-py (~0.2 s with its
# OpenTelemetry hooks), and the Redis path never loads SQLite.
from reactgraph.memory.redis_checkpoint.settings import redact

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from reactgraph.memory.redis_checkpoint import RedisSaver

REDIS_SCHEMES = ("redis://", "rediss://", "unix://", "redis+cluster://", "rediss+cluster://")


class CheckpointerConfigError(ReactGraphError, ValueError):
    """The checkpointer URL names nothing we can open; the message lists what is accepted."""


@dataclass(frozen=True)
class OpenedCheckpointer:
    """A checkpointer plus the words that tell a user where their sessions live."""

    saver: BaseCheckpointSaver
    description: str
    redis_url: str | None = None  # the Redis behind it, for stores that should live beside the checkpoints
    sqlite_path: Path | None = None  # the SQLite file behind it, likewise
    ttl: float | None = None  # seconds a session is kept after its last use (Redis only); None: until pruned


def resolve_url(url: str | None = None) -> str:
    """The URL to use: the argument, else $REDIS_URL, else the embedded Redis (started on demand)."""
    chosen = (url or os.environ.get("REDIS_URL") or "").strip()
    return chosen or "embedded"


def open_checkpointer(url: str | None = None, *, ttl: float | None = None) -> OpenedCheckpointer:
    """Open the checkpointer for `url` (see `resolve_url`); Redis is pinged now, so a bad one fails early.

    `ttl` (seconds) makes every key of a session expire that long after its last write or read (Redis only;
    in memory it is moot, SQLite refuses it)."""
    chosen = resolve_url(url)
    if ttl is not None and chosen.startswith("sqlite:"):
        raise CheckpointerConfigError("a TTL needs a Redis store: SQLite keeps sessions until they are deleted")
    if chosen == "memory":
        from langgraph.checkpoint.memory import InMemorySaver
        return OpenedCheckpointer(InMemorySaver(), "in-process memory (lost when the process exits)")
    if chosen.startswith("sqlite:"):
        path = sqlite_path(chosen)
        return OpenedCheckpointer(_sqlite(path), f"SQLite {path}", sqlite_path=path)
    if chosen == "embedded":
        from reactgraph.memory.embedded_redis import data_dir, ensure_running

        redis_url = ensure_running()
        # a socket outside the data directory is there because the home's path is too long for one: say where
        elsewhere = "" if redis_url.startswith(f"unix://{data_dir().resolve()}/") else f", socket {redis_url}"
        return OpenedCheckpointer(_redis(redis_url, ttl), f"embedded Redis ({data_dir()}{elsewhere})", redis_url,
                                  ttl=ttl)
    if chosen.startswith(REDIS_SCHEMES):
        return OpenedCheckpointer(_redis(chosen, ttl), f"Redis {redact(chosen)}", chosen, ttl=ttl)
    raise CheckpointerConfigError(f"unknown checkpointer URL {redact(chosen)!r}: use redis://host:port/db, "
                                  "rediss://…, unix:///path/redis.sock, redis+cluster://host:port,host:port/, "
                                  "memory, or sqlite:///path/file.db "
                                  "(sqlite:////… for an absolute path)")


def _redis(url: str, ttl: float | None = None) -> RedisSaver:
    from reactgraph.memory.redis_checkpoint import RedisSaver

    saver = RedisSaver.from_url(url, ttl=ttl)  # a store `from_url` on the same URL shares its client and pool
    try:
        saver.ping()  # raises CheckpointStoreUnavailable with the URL (password hidden) and the reason
    except BaseException:
        saver.close()
        raise
    return saver


def sqlite_path(url: str) -> Path:
    """The file a `sqlite:///…` URL names, as SQLAlchemy reads it: what follows the third slash, so a fourth
    makes it absolute (`~` is expanded too)."""
    path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else ""
    if not path.strip() or path == ":memory:":
        raise CheckpointerConfigError(f"{url!r} names no file: use sqlite:///sessions.db (relative to the working "
                                      "directory) or sqlite:////absolute/path/sessions.db, or memory")
    return Path(path).expanduser().absolute()


def _sqlite(path: Path) -> BaseCheckpointSaver:
    try:
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError as exc:
        raise CheckpointerConfigError("sqlite:// needs langgraph-checkpoint-sqlite: "
                                      "pip install langgraph-checkpoint-sqlite") from exc
    from reactgraph.memory.redis_checkpoint.serde import AllowListSerializer  # loads no redis-py

    path.parent.mkdir(parents=True, exist_ok=True)
    # The same allow-listed decoding as the Redis savers: a crafted row is refused, never built or called.
    return SqliteSaver(sqlite3.connect(path, check_same_thread=False), serde=AllowListSerializer())
