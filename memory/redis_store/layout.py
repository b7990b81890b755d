"""Key names and byte formats of the Redis store, shared by `RedisStore` and the Lua scripts.

Under a prefix `<p>` (default `reactgraph:store:`; on a Redis Cluster `{reactgraph:store}:`, so that every
key of the store shares one hash slot and a script may touch several), with `<ns>` the namespace's labels joined by "."
(labels may contain neither "." nor NUL, which LangGraph's namespace validation guarantees):

    <p>ns            ZSET  "<ns>." for every namespace holding an item, score 0: a namespace prefix
                           ("a", "b") is the lex range ["a.b." .. "a.b/"), one ZRANGEBYLEX
    <p>u:<ns>        ZSET  key -> updated_at (microseconds): newest first is a ZREVRANGE; it expires with its
                           longest-lived item (no TTL while it holds an item without one)
    <p>i:<ns>\\0<key> STRING "<created_us>\\0<updated_us>\\0<ttl minutes or empty>\\0<JSON value>"
    <p>exp           ZSET  "<ns>\\0<key>" -> expiry (ms) of items with a TTL; readers sweep the expired
                           ones out of the indexes (Redis deletes the item keys itself)

Everything read back is Redis content, so decoding checks it: an item whose header is not two timestamps and
an empty or positive, finite TTL is refused (ValueError) rather than half-read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from reactgraph.memory.redis_checkpoint.layout import normalise_prefix

__all__ = ["as_datetime", "decode_hit", "decode_item", "encode_value", "item_key", "lex_range", "member",
           "normalise_prefix", "ns_text", "ns_tuple"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def store_prefix(prefix: str, on_cluster: bool) -> str:
    """`<p>:` on one Redis; `{<p>}:` on a Redis Cluster, where the store's scripts need all its keys in one slot."""
    normal = normalise_prefix(prefix)
    return "{" + normal[:-1] + "}:" if on_cluster and normal else normal


def ns_text(namespace: tuple[str, ...]) -> str:
    return ".".join(namespace)


def ns_tuple(text: str | bytes) -> tuple[str, ...]:
    if isinstance(text, bytes):
        text = text.decode()
    return tuple(text.split("."))


def member(namespace: tuple[str, ...], key: str) -> str:
    """An item's name in the expiry index; the item's key is `<p>i:` + this."""
    return f"{ns_text(namespace)}\0{key}"


def item_key(prefix: str, namespace: tuple[str, ...], key: str) -> str:
    return f"{prefix}i:{member(namespace, key)}"


def lex_range(labels: tuple[str, ...]) -> tuple[str, str]:
    """ZRANGEBYLEX bounds of the namespace index for every namespace starting with `labels`."""
    if not labels:
        return "-", "+"
    start = ns_text(labels) + "."
    return "[" + start, "(" + start[:-1] + "/"  # "/" is the byte after "."


def encode_value(value: Mapping[str, Any]) -> str:
    """Values are JSON, like LangGraph's Postgres store; anything else is refused before any write."""
    try:
        return json.dumps(dict(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"store values must be JSON-serialisable mappings: {exc}") from None


def as_datetime(us: int) -> datetime:
    """A stored timestamp (microseconds since the epoch, server clock) as an aware UTC datetime."""
    return _EPOCH + timedelta(microseconds=us)


def _header(created: bytes, updated: bytes, ttl: bytes) -> tuple[int, int, float | None]:
    if not (created.isdigit() and updated.isdigit() and len(created) <= 19 and len(updated) <= 19):
        raise ValueError("its header's timestamps are not what RedisStore writes")
    minutes = float(ttl) if ttl else None  # float() refuses anything but a number (ValueError)
    if minutes is not None and not (math.isfinite(minutes) and minutes > 0):
        raise ValueError(f"its TTL {minutes!r} is not a positive number of minutes")
    return int(created), int(updated), minutes


def decode_item(blob: bytes) -> tuple[dict[str, Any], int, int, float | None]:
    """(value, created_at, updated_at in microseconds, ttl in minutes) of a stored item; ValueError if garbled."""
    if not blob:
        raise ValueError("it is empty, or not a Redis string")  # the scripts answer "" for a key of another type
    parts = blob.split(b"\0", 3)
    if len(parts) < 4:
        raise ValueError("it has no header (created, updated, TTL) before its value")
    created, updated, ttl = _header(*parts[:3])
    return json.loads(parts[3]), created, updated, ttl


def decode_hit(hit: bytes) -> tuple[bytes, bytes, bytes]:
    """(namespace text, key, stored blob) of one search reply element: "<ns>\\0<key length>\\0<key><blob>".

    The key's length comes first, so a key with NUL in it and a blob garbled anyhow stay apart."""
    namespace, _, rest = hit.partition(b"\0")
    length, _, rest = rest.partition(b"\0")
    if not length.isdigit() or int(length) > len(rest):
        raise ValueError("the search reply element is malformed")  # our script wrote it: not an item's fault
    cut = int(length)
    return namespace, rest[:cut], rest[cut:]
