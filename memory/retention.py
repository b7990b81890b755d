"""Retention: durations as users write them (`7d`, `12h`, `30m`, `3600`), and a session's long-term store items
(find, refresh, measure, drop) through LangGraph's `BaseStore` API, so it works on any store."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # parse_duration is used before anything heavy is loaded, so LangGraph is imported late
    from langgraph.store.base import BaseStore, TTLConfig

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw]?)", re.IGNORECASE)
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
MAX_DURATION_S = 100 * 365 * 86400  # beyond a century is a typo, and EXPIRE's arithmetic would overflow
_PAGE = 1000  # items read per search while walking a namespace
MAX_ITEMS = 100_000  # a bound on one session's items walked per call (untrusted Redis content)

ItemName = tuple[tuple[str, ...], str]  # (namespace, key)


def parse_duration(text: str | float) -> float:
    """Seconds from `3600`, `90s`, `30m`, `12h`, `7d` or `2w`; ValueError (one line, says what is accepted)."""
    match = _DURATION.fullmatch(str(text).strip())
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2).lower()] if match else math.nan
    if not 0 < seconds <= MAX_DURATION_S:
        raise ValueError(f"bad duration {str(text)!r}: use seconds (3600) or a number with s, m, h, d or w "
                         "(90s, 30m, 12h, 7d, 2w), more than 0 and at most 100 years")
    return seconds


def store_ttl(seconds: float | None) -> TTLConfig | None:
    """The store's TTLConfig for a session TTL in seconds: LangGraph's store TTLs are in minutes."""
    if not seconds:
        return None
    return {"default_ttl": seconds / 60, "refresh_on_read": True}


def session_items(store: BaseStore, prefixes: Sequence[tuple[str, ...]]) -> list[ItemName]:
    """Every item under these namespace prefixes, read without restarting their TTLs."""
    found: list[ItemName] = []
    for prefix in prefixes:
        for offset in range(0, MAX_ITEMS, _PAGE):
            page = store.search(prefix, limit=_PAGE, offset=offset, refresh_ttl=False)
            found += [(tuple(item.namespace), item.key) for item in page]
            if len(page) < _PAGE:
                break
    return list(dict.fromkeys(found))  # an item updated between two pages may show up twice


def store_sessions(store: BaseStore, roots: Sequence[str]) -> set[str]:
    """The second label of every namespace under these roots: ("sessions", S, ...) and ("lessons", S) give S."""
    return {ns[1] for root in roots
            for ns in store.list_namespaces(prefix=(root,), max_depth=2, limit=MAX_ITEMS) if len(ns) > 1}


def last_update(store: BaseStore, prefixes: Sequence[tuple[str, ...]]) -> datetime | None:
    """When the newest item under these prefixes was written (search is newest first), or None if none is."""
    times = [item.updated_at for prefix in prefixes for item in store.search(prefix, limit=1, refresh_ttl=False)]
    return max(times, default=None)


def refresh_items(store: BaseStore, prefixes: Sequence[tuple[str, ...]]) -> None:
    """Restart the TTL of every item under these prefixes (a search that refreshes on read)."""
    for prefix in prefixes:
        for offset in range(0, MAX_ITEMS, _PAGE):
            if len(store.search(prefix, limit=_PAGE, offset=offset, refresh_ttl=True)) < _PAGE:
                break


def drop_items(store: BaseStore, items: Sequence[ItemName]) -> None:
    """Delete these items, a page per batch."""
    from langgraph.store.base import PutOp

    for start in range(0, len(items), _PAGE):
        store.batch([PutOp(ns, key, None) for ns, key in items[start:start + _PAGE]])


def items_bytes(store: Any, items: Sequence[ItemName]) -> int | None:
    """Bytes the items and their namespaces' indexes take in Redis (MEMORY USAGE); None for other stores."""
    from reactgraph.memory.redis_store import RedisStore, item_key, ns_text

    if not isinstance(store, RedisStore) or not items:
        return None if not isinstance(store, RedisStore) else 0
    keys = [item_key(store.prefix, ns, key) for ns, key in items]
    keys += sorted({f"{store.prefix}u:{ns_text(ns)}" for ns, _ in items})
    sizes = store._wire.batch([("MEMORY", "USAGE", key, "SAMPLES", 0) for key in keys])
    return sum(size or 0 for size in sizes)
