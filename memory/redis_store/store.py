"""`RedisStore`: LangGraph's long-term memory (`BaseStore`) on plain Redis 6+ (no modules), its search filters, and
how it reads items back.

Search filters have the same semantics as LangGraph's InMemoryStore (and, for top-level fields, its Postgres
store): a plain value means equality (nested mappings and lists compare element by element), `{"$op": v}`
applies $eq/$ne/$gt/$gte/$lt/$lte. One deliberate difference: an ordering operator on values that cannot be
compared (a missing field, text against a number) does not match, where InMemoryStore raises.

Reading store items back from Redis, which is untrusted: plain JSON objects only, nothing revived or built. An
item that cannot be read names its Redis key: `get` raises `UnreadableItem`; `search` skips the item with a
warning, so one bad item does not stop every run that searches its namespace.
"""

from __future__ import annotations

import asyncio
import logging
import operator
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

import redis
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from reactgraph.errors import ReactGraphError
from reactgraph.memory.redis_checkpoint.pool import WiredClient
from reactgraph.memory.redis_checkpoint.settings import client_url, redact
from reactgraph.memory.redis_checkpoint.wire import Command
from reactgraph.memory.redis_store import layout, scripts

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


_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}


def matches(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether an item's value passes every condition of a search filter."""
    return not filter or all(_compare(value.get(field), wanted) for field, wanted in filter.items())


def _compare(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_apply(actual, op, operand) for op, operand in wanted.items())
        return isinstance(actual, Mapping) and all(_compare(actual.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (isinstance(actual, (list, tuple)) and len(actual) == len(wanted)
                and all(_compare(a, w) for a, w in zip(actual, wanted, strict=True)))
    return actual == wanted


def _apply(actual: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return actual == operand
    if op == "$ne":
        return actual != operand
    compare = _ORDER.get(op)
    if compare is None:
        raise ValueError(f"Unsupported operator: {op} (supported: $eq, $ne, $gt, $gte, $lt, $lte)")
    try:
        return compare(float(actual), float(operand))  # numbers, and numeric text, like InMemoryStore
    except (TypeError, ValueError):
        pass
    if isinstance(actual, str) and isinstance(operand, str):
        return compare(actual, operand)
    return False


def namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """A prefix or suffix condition ("*" matches any one label), as InMemoryStore applies it."""
    path = condition.path
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"Unsupported match type: {condition.match_type}")
    return all(p == "*" or n == p for n, p in pairs)


def fixed_prefix(conditions: tuple[MatchCondition, ...] | None) -> tuple[str, ...]:
    """The leading labels every listed namespace must have (narrows the index range to read)."""
    best: tuple[str, ...] = ()
    for condition in conditions or ():
        if condition.match_type == "prefix":
            labels = []
            for label in condition.path:
                if label == "*":
                    break
                labels.append(label)
            if len(labels) > len(best):
                best = tuple(labels)
    return best


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
