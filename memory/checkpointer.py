"""One URL → one checkpointer: `redis://`, `rediss://`, `unix://`, `memory`, `sqlite:///path`, or the default.

The default (no URL, no REDIS_URL) is the embedded Redis, so sessions persist across commands with
nothing to install or run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

# Each backend is imported in its own branch: `--store memory` never loads redis-py (~0.2 s with its
# OpenTelemetry hooks), and the Redis path never loads SQLite.
from reactgraph.memory.redis_checkpoint.errors import redact

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from reactgraph.memory.redis_checkpoint import RedisSaver

REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


class CheckpointerConfigError(ValueError):
    """The checkpointer URL names nothing we can open; the message lists what is accepted."""


@dataclass(frozen=True)
class OpenedCheckpointer:
    """A checkpointer plus the words that tell a user where their sessions live."""

    saver: BaseCheckpointSaver
    description: str
    redis_url: str | None = None  # the Redis behind it, for stores that should live beside the checkpoints


def resolve_url(url: str | None = None) -> str:
    """The URL to use: the argument, else $REDIS_URL, else the embedded Redis (started on demand)."""
    chosen = (url or os.environ.get("REDIS_URL") or "").strip()
    return chosen or "embedded"


def open_checkpointer(url: str | None = None) -> OpenedCheckpointer:
    """Open the checkpointer for `url` (see `resolve_url`); Redis is pinged now, so a bad one fails early."""
    chosen = resolve_url(url)
    if chosen == "memory":
        from langgraph.checkpoint.memory import InMemorySaver
        return OpenedCheckpointer(InMemorySaver(), "in-process memory (lost when the process exits)")
    if chosen.startswith("sqlite:///"):
        return OpenedCheckpointer(_sqlite(chosen.removeprefix("sqlite:///")), f"SQLite {chosen}")
    if chosen == "embedded":
        from reactgraph.memory.embedded_redis import data_dir, ensure_running

        redis_url = ensure_running()
        return OpenedCheckpointer(_redis(redis_url), f"embedded Redis ({data_dir()})", redis_url)
    if chosen.startswith(REDIS_SCHEMES):
        return OpenedCheckpointer(_redis(chosen), f"Redis {redact(chosen)}", chosen)
    raise CheckpointerConfigError(f"unknown checkpointer URL {redact(chosen)!r}: use redis://host:port/db, "
                                  "rediss://…, unix:///path/redis.sock, memory, or sqlite:///path/file.db")


def _redis(url: str) -> RedisSaver:
    from reactgraph.memory.redis_checkpoint import RedisSaver

    saver = RedisSaver.from_url(url)  # a store `from_url` on the same URL shares its client and pool
    try:
        saver.ping()  # raises CheckpointStoreUnavailable with the URL (password hidden) and the reason
    except BaseException:
        saver.close()
        raise
    return saver


def _sqlite(path: str) -> BaseCheckpointSaver:
    try:
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError as exc:
        raise CheckpointerConfigError("sqlite:// needs langgraph-checkpoint-sqlite: "
                                      "pip install langgraph-checkpoint-sqlite") from exc
    Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
    return SqliteSaver(sqlite3.connect(Path(path).expanduser(), check_same_thread=False))
