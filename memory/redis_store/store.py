"""`RedisStore`: LangGraph's long-term memory (`BaseStore`) on plain Redis 6+ (no modules)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from functools import partial
from typing import Any

import redis
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from reactgraph.memory.redis_checkpoint.pool import WiredClient
from reactgraph.memory.redis_checkpoint.settings import client_url, redact
from reactgraph.memory.redis_checkpoint.wire import Command
from reactgraph.memory.redis_store import layout, scripts
from reactgraph.memory.redis_store.filters import fixed_prefix, matches, namespace_matches
from reactgraph.memory.redis_store.reading import read_hit, read_item

ReadOp = GetOp | SearchOp | ListNamespacesOp  # what one batch sends before its writes

_NO_INDEX = ("RedisStore has no semantic search: it runs on plain Redis without a vector index. Use "
             "filters and namespaces, or a store with an `index` (e.g. InMemoryStore, PostgresStore)")


class RedisStore(WiredClient, BaseStore):
    """Namespaced JSON items in plain Redis, shared by every thread, process and graph that uses the URL.

    Semantics follow LangGraph's stores: within one `batch`, reads see the data as it was before the
    batch's writes, and the last write to a key wins. `search` returns items newest first (by
    `updated_at`, like the Postgres and SQLite stores), filtered on their values; a `query` is ignored,
    as InMemoryStore without an index ignores it. `list_namespaces` lists namespaces that hold items
    (InMemoryStore keeps listing emptied ones). Items keep `created_at` across updates. TTLs are in
    minutes (`put(..., ttl=)` or `ttl={"default_ttl": ...}`), restarted by reads unless
    `refresh_on_read` is False; Redis expires the items itself.

    A batch costs one round trip (two when it mixes reads and writes, three when a search also restarts
    TTLs): every operation is one EVALSHA, atomic on the server. `abatch` runs `batch` on a worker
    thread: one connection pool then serves sync and async callers on any event loop (redis.asyncio
    connections belong to the loop that made them, and this project drives coroutines from several).
    """

    supports_ttl = True

    def __init__(self, client: redis.Redis, *, prefix: str = "reactgraph:store", ttl: TTLConfig | None = None,
                 index: Any = None, url: str | None = None, max_connections: int | None = None,
                 pool_timeout: float | None = None) -> None:
        if index is not None:
            raise NotImplementedError(_NO_INDEX)
        self.url = redact(url) if url else client_url(client)
        self.ttl_config = ttl
        # On a client a saver uses too (`RedisStore(saver.client)`), the store shares its connections.
        self._wire_up(client, self.url, max_connections, pool_timeout)
        # Its scripts touch an item with the prefix's indexes, so on a cluster every key of the store shares the
        # prefix as hash tag (one slot); on one Redis the keys stay as they were.
        self.prefix = layout.store_prefix(prefix, getattr(self._wire, "is_cluster", False))

    @classmethod
    def from_url(cls, url: str, *, prefix: str = "reactgraph:store", ttl: TTLConfig | None = None,
                 max_connections: int | None = None, pool_timeout: float | None = None,
                 **client_options: Any) -> RedisStore:
        """A store on the client that every `RedisSaver` and `RedisStore` `from_url` on this URL shares;
        close it with `close()` or `with RedisStore.from_url(...) as store`."""
        return cls._from_shared(url, client_options, max_connections, pool_timeout, prefix=prefix, ttl=ttl)

    def __repr__(self) -> str:
        return f"RedisStore({self.url!r}, prefix={self.prefix!r})"

    # --- BaseStore ----------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        results: list[Result] = [None] * len(ops)
        reads: list[tuple[int, ReadOp]] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for i, op in enumerate(ops):
            validate_op_namespace(op)
            if isinstance(op, PutOp):
                if not op.namespace:
                    raise InvalidNamespaceError("Namespace cannot be empty.")
                puts[(op.namespace, op.key)] = op  # the last write to a key wins
            elif isinstance(op, (GetOp, SearchOp, ListNamespacesOp)):
                reads.append((i, op))
            else:
                raise ValueError(f"Unknown operation type: {type(op)}")
        writes = [self._write_command(op) for op in puts.values()]  # encode first: a bad value writes nothing
        # Reads go before writes, and in a round trip of their own: a script the server has forgotten is
        # re-sent after the rest of its batch, which must not let a read see this batch's writes.
        replies = self._wire.batch([self._read_command(op) for _, op in reads]) if reads else []
        touches: list[str] = []
        for (i, op), reply in zip(reads, replies, strict=True):
            results[i] = self._read_result(op, reply, touches)
        if touches:
            self._wire.call((scripts.TOUCH, 1, self.prefix + "exp", self.prefix, *touches))
        if writes:
            self._wire.batch(writes)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    # --- commands and replies -----------------------------------------------------------------------

    def _write_command(self, op: PutOp) -> Command:
        key = layout.item_key(self.prefix, op.namespace, op.key)
        args = (self.prefix, layout.ns_text(op.namespace), op.key)
        if op.value is None:
            return (scripts.DELETE, 1, key, *args)
        ttl = "" if op.ttl is None else _minutes(op.ttl)
        return (scripts.PUT, 1, key, *args, layout.encode_value(op.value), ttl)

    def _read_command(self, op: ReadOp) -> Command:
        if isinstance(op, GetOp):
            key = layout.item_key(self.prefix, op.namespace, op.key)
            return (scripts.GET, 1, key, self.prefix, layout.member(op.namespace, op.key),
                    "1" if op.refresh_ttl else "0")
        index = self.prefix + "ns"
        if isinstance(op, SearchOp):
            low, high = layout.lex_range(op.namespace_prefix)
            # Unfiltered, the page can only come from each namespace's newest offset+limit items.
            per_namespace = 0 if op.filter else max(op.offset + op.limit, 1)  # 0 = all
            return (scripts.SEARCH, 1, index, self.prefix, low, high, per_namespace)
        low, high = layout.lex_range(fixed_prefix(op.match_conditions))
        return (scripts.LIST, 1, index, self.prefix, low, high)

    def _read_result(self, op: ReadOp, reply: Any, touches: list[str]) -> Result:
        if isinstance(op, GetOp):
            if reply is None:
                return None
            value, created, updated, _ = read_item(layout.item_key(self.prefix, op.namespace, op.key), reply)
            return Item(value=value, key=op.key, namespace=op.namespace, created_at=layout.as_datetime(created),
                        updated_at=layout.as_datetime(updated))
        if isinstance(op, SearchOp):
            return self._search_result(op, reply, touches)
        return self._namespaces_result(op, reply)

    def _search_result(self, op: SearchOp, reply: list[bytes], touches: list[str]) -> list[SearchItem]:
        found = []
        for hit in map(partial(read_hit, self.prefix), reply):
            if hit is None:  # unreadable: skipped with a warning naming its key
                continue
            namespace, key, created, updated, ttl, value = hit
            if matches(value, op.filter):
                found.append((updated, namespace, key, created, ttl, value))
        found.sort(key=lambda f: f[:3], reverse=True)  # newest first; ties in a fixed order
        page = found[op.offset:op.offset + op.limit] if op.limit >= 0 and op.offset >= 0 else []
        items = []
        for updated, namespace, key, created, ttl, value in page:
            item = SearchItem(namespace=layout.ns_tuple(namespace), key=key.decode(), value=value,
                              created_at=layout.as_datetime(created), updated_at=layout.as_datetime(updated))
            if op.refresh_ttl and ttl is not None:
                touches += [layout.member(tuple(item.namespace), item.key), _minutes(ttl)]
            items.append(item)
        return items

    @staticmethod
    def _namespaces_result(op: ListNamespacesOp, reply: list[bytes]) -> list[tuple[str, ...]]:
        namespaces = [layout.ns_tuple(m[:-1]) for m in reply]
        conditions = op.match_conditions or ()
        namespaces = [ns for ns in namespaces if all(namespace_matches(c, ns) for c in conditions)]
        if op.max_depth is not None:
            namespaces = sorted({ns[:op.max_depth] for ns in namespaces})
        else:
            namespaces = sorted(namespaces)
        return namespaces[op.offset:op.offset + op.limit]


def _minutes(ttl: float) -> str:
    if ttl <= 0:
        raise ValueError(f"ttl must be a positive number of minutes, not {ttl!r}")
    return repr(float(ttl))
