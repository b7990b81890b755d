"""Reading store items back from Redis, which is untrusted: plain JSON objects only, nothing revived or built.

An item that cannot be read names its Redis key: `get` raises `UnreadableItem`; `search` skips the item
with a warning, so one bad item does not stop every run that searches its namespace.
"""

from __future__ import annotations

import logging
from typing import Any

from reactgraph.errors import ReactGraphError
from reactgraph.memory.redis_store import layout

log = logging.getLogger("reactgraph.memory.redis_store")


class UnreadableItem(ReactGraphError, ValueError):
    """A stored item that is not what RedisStore writes (a JSON object after its header); names the key."""


def _reason(exc: Exception) -> str:
    detail = (str(exc).splitlines() or [""])[0][:120]
    return f"it cannot be decoded ({type(exc).__name__}: {detail})"


def _object(value: Any) -> dict[str, Any]:
    """Values are decoded by json.loads without object hooks (LangChain's "lc" JSON stays a dict); objects only."""
    if not isinstance(value, dict):
        raise ValueError(f"the value is a JSON {type(value).__name__}, not an object")
    return value


def read_item(key: str, blob: bytes) -> tuple[dict[str, Any], int, int, float | None]:
    """`layout.decode_item`, checked: raises UnreadableItem naming `key`."""
    try:
        value, created, updated, ttl = layout.decode_item(blob)
        value = _object(value)
    except (ValueError, IndexError, UnicodeDecodeError, RecursionError) as exc:
        raise UnreadableItem(f"store item {key!r} is unreadable: {_reason(exc)}") from None
    return value, created, updated, ttl


def read_hit(prefix: str, hit: bytes) -> tuple[bytes, bytes, int, int, float | None, dict[str, Any]] | None:
    """A search hit's (namespace, key, created, updated, ttl, value); None (and a warning naming the key) if
    its item cannot be read."""
    namespace, key, blob = layout.decode_hit(hit)
    try:
        value, created, updated, ttl = layout.decode_item(blob)
        return namespace, key, created, updated, ttl, _object(value)
    except (ValueError, IndexError, UnicodeDecodeError, RecursionError) as exc:
        name = f"{prefix}i:{namespace.decode(errors='replace')}\0{key.decode(errors='replace')}"
        log.warning("store item %r is unreadable, skipped: %s", name, _reason(exc))
        return None
