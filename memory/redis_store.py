"""`RedisStore`: LangGraph's long-term store (`BaseStore`) on plain Redis 6+ / Valkey, strings and sorted sets, no
modules — namespaced JSON items shared across threads (sessions), e.g. a user's Q&A log or Reflexion's lessons.

It does get, put, delete, search by namespace prefix with value filters (newest first), list namespaces, per-item
TTLs; no semantic (vector) search. Search filters mean what they mean in LangGraph's InMemoryStore (and, for
top-level fields, its Postgres store): a plain value is equality (mappings and lists element by element),
`{"$op": v}` applies $eq/$ne/$gt/$gte/$lt/$lte. One deliberate difference: an ordering operator on values that
cannot be compared (a missing field, text against a number) does not match, where InMemoryStore raises.

Keys, under a prefix `<p>` (default `reactgraph:store:`; on a Redis Cluster `{reactgraph:store}:`, so every key of
the store shares one hash slot and a script may touch several), with `<ns>` the namespace's labels joined by "."
(labels hold neither "." nor NUL, which LangGraph's namespace validation guarantees):

    <p>ns            ZSET  "<ns>." for every namespace holding an item, score 0: a namespace prefix
                           ("a", "b") is the lex range ["a.b." .. "a.b/"), one ZRANGEBYLEX
    <p>u:<ns>        ZSET  key -> updated_at (microseconds): newest first is a ZREVRANGE; it expires with its
                           longest-lived item (no TTL while it holds an item without one)
    <p>i:<ns>\\0<key> STRING "<created_us>\\0<updated_us>\\0<ttl minutes or empty>\\0<JSON value>"
    <p>exp           ZSET  "<ns>\\0<key>" -> expiry (ms) of items with a TTL; readers sweep the expired
                           ones out of the indexes (Redis deletes the item keys itself)

Each operation is one Lua script, one atomic round trip; timestamps come from the server's TIME, so items written
by several processes order by one clock and expiry (PEXPIRE) and the expiry index agree.

What comes back is Redis content, untrusted: plain JSON objects only, nothing revived or built. An item whose
header is not two timestamps and an empty or positive, finite TTL is refused rather than half-read; an index
entry not as PUT writes it is dropped; an item that cannot be read names its key — `get` raises `UnreadableItem`,
`search` skips it with a warning, so one bad item does not stop every run that searches its namespace. Failures
to reach Redis are the checkpointer's `InvalidRedisURL` / `CheckpointStoreUnavailable`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import operator
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
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
from reactgraph.memory.redis_checkpoint.layout import normalise_prefix
from reactgraph.memory.redis_checkpoint.pool import WiredClient
from reactgraph.memory.redis_checkpoint.scripts import Script
from reactgraph.memory.redis_checkpoint.settings import client_url, redact
from reactgraph.memory.redis_checkpoint.wire import Command

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


# now_us / now_ms: the server clock. sweep: drop index entries of items whose key Redis has expired.
_PRELUDE = r"""
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function sweep(P)
  local due = redis.call('ZRANGEBYSCORE', P .. 'exp', '-inf', math.floor(now_us() / 1000), 'LIMIT', 0, 1000)
  for _, m in ipairs(due) do
    local cut = string.find(m, '\0', 1, true)
    if not cut then
      redis.call('ZREM', P .. 'exp', m)  -- not a "<ns>\0<key>" we wrote: it names no item
    elseif redis.call('EXISTS', P .. 'i:' .. m) == 0 then
      local ns, key = string.sub(m, 1, cut - 1), string.sub(m, cut + 1)
      local u = P .. 'u:' .. ns
      redis.call('ZREM', u, key)
      if redis.call('ZCARD', u) == 0 then redis.call('ZREM', P .. 'ns', ns .. '.') end
      redis.call('ZREM', P .. 'exp', m)
    end
  end
end
-- a TTL in minutes as PUT writes it: a positive, finite number (NaN fails n > 0)
local function minutes_ok(text)
  local n = tonumber(text)
  return n ~= nil and n > 0 and n < math.huge
end
-- an item's created stamp and TTL text ('' = none); nil when its header is garbled
local function header(blob)
  local a = string.find(blob, '\0', 1, true)
  local b = a and string.find(blob, '\0', a + 1, true)
  local c = b and string.find(blob, '\0', b + 1, true)
  if not c then return nil end
  local created, ttl = string.sub(blob, 1, a - 1), string.sub(blob, b + 1, c - 1)
  if #created > 19 or not string.match(created, '^%d+$') or (ttl ~= '' and not minutes_ok(ttl)) then return nil end
  return created, ttl
end
-- an item's bytes, false when there is none, '' for a key of another type (the reader reports it)
local function item_of(name)
  local blob = redis.pcall('GET', name)
  if type(blob) == 'table' and blob.err then return '' end
  return blob
end
-- a namespace's index u: lives as long as its longest-lived item: PTTL -1 means it holds an item without a TTL
local function ms_of(minutes)
  return math.max(1, math.floor(tonumber(minutes) * 60000))
end
local function expire(P, member, minutes)
  local ms = ms_of(minutes)
  if redis.call('PEXPIRE', P .. 'i:' .. member, ms) == 1 then
    redis.call('ZADD', P .. 'exp', math.floor(now_us() / 1000) + ms, member)
    local u = P .. 'u:' .. string.sub(member, 1, string.find(member, '\0', 1, true) - 1)
    local left = redis.call('PTTL', u)
    if left >= 0 and left < ms then redis.call('PEXPIRE', u, ms) end
  end
end
"""


def _script(name: str, body: str) -> Script:
    return Script(name, _PRELUDE + body)


# KEYS[1] the item; ARGV prefix, namespace text, key, JSON value, TTL in minutes ('' = none).
# The namespace's index keeps the newest item on top: a put within the same microsecond as the newest
# one still sorts above it.
PUT = _script("store_put", r"""
local P, ns, key = ARGV[1], ARGV[2], ARGV[3]
local u = P .. 'u:' .. ns
local now = now_us()
local top = redis.call('ZREVRANGE', u, 0, 0, 'WITHSCORES')
if top[2] and tonumber(top[2]) >= now then now = tonumber(top[2]) + 1 end
local stamp = string.format('%.0f', now)
local created = stamp
local old = item_of(KEYS[1])
if old then created = header(old) or stamp end  -- a garbled item is replaced as if new
redis.call('SET', KEYS[1], created .. '\0' .. stamp .. '\0' .. ARGV[5] .. '\0' .. ARGV[4])
local fresh = redis.call('EXISTS', u) == 0
redis.call('ZADD', u, stamp, key)
redis.call('ZADD', P .. 'ns', 0, ns .. '.')
if ARGV[5] ~= '' then
  if fresh then redis.call('PEXPIRE', u, ms_of(ARGV[5])) end
  expire(P, ns .. '\0' .. key, ARGV[5])
else
  redis.call('ZREM', P .. 'exp', ns .. '\0' .. key)
  redis.call('PERSIST', u)
end
return 1
""")

# KEYS[1] the item; ARGV prefix, namespace text, key
DELETE = _script("store_delete", r"""
local P, ns, key = ARGV[1], ARGV[2], ARGV[3]
local u = P .. 'u:' .. ns
redis.call('DEL', KEYS[1])
redis.call('ZREM', u, key)
redis.call('ZREM', P .. 'exp', ns .. '\0' .. key)
if redis.call('ZCARD', u) == 0 then redis.call('ZREM', P .. 'ns', ns .. '.') end
return 1
""")

# KEYS[1] the item; ARGV prefix, "<namespace text>\0<key>", refresh ('1' restarts the item's TTL)
GET = _script("store_get", r"""
local blob = item_of(KEYS[1])
if blob and ARGV[3] == '1' then
  local _, ttl = header(blob)
  if ttl and ttl ~= '' then expire(ARGV[1], ARGV[2], ttl) end
end
return blob
""")

# KEYS[1] the namespace index; ARGV prefix, lex min, lex max, items per namespace (0 = all).
# Returns "<namespace text>\\0<key length>\\0<key><blob>" (decode_hit) for the newest items of every
# namespace in the range; the blob is '' for a key of another type.
SEARCH = _script("store_search", r"""
local P, per = ARGV[1], tonumber(ARGV[4])
sweep(P)
local out = {}
for _, m in ipairs(redis.call('ZRANGEBYLEX', KEYS[1], ARGV[2], ARGV[3])) do
  local ns = string.sub(m, 1, -2)
  local keys = redis.call('ZREVRANGE', P .. 'u:' .. ns, 0, per - 1)
  for i = 1, #keys, 1000 do
    local names = {}
    for j = i, math.min(i + 999, #keys) do names[#names + 1] = P .. 'i:' .. ns .. '\0' .. keys[j] end
    local blobs = redis.call('MGET', unpack(names))
    for j = 1, #names do
      -- one reply element per item (RESP parsing is the client's main cost); MGET answers nil for an
      -- expired item and for a key of another type, which is still there
      local blob = blobs[j] or (redis.call('EXISTS', names[j]) == 1 and '')
      local key = keys[i + j - 1]
      if blob then out[#out + 1] = ns .. '\0' .. #key .. '\0' .. key .. blob end
    end
  end
end
return out
""")

# KEYS[1] the namespace index; ARGV prefix, lex min, lex max. Returns "<namespace text>." members.
LIST = _script("store_list", r"""
sweep(ARGV[1])
return redis.call('ZRANGEBYLEX', KEYS[1], ARGV[2], ARGV[3])
""")

# KEYS[1] the expiry index; ARGV prefix, then ("<namespace text>\0<key>", TTL minutes) pairs
TOUCH = _script("store_touch", r"""
for i = 2, #ARGV, 2 do expire(ARGV[1], ARGV[i], ARGV[i + 1]) end
return 1
""")


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
    """`decode_item`, checked: raises UnreadableItem naming `key`."""
    try:
        value, created, updated, ttl = decode_item(blob)
        value = _object(value)
    except (ValueError, IndexError, UnicodeDecodeError, RecursionError) as exc:
        raise UnreadableItem(f"store item {key!r} is unreadable: {_reason(exc)}") from None
    return value, created, updated, ttl


def read_hit(prefix: str, hit: bytes) -> tuple[bytes, bytes, int, int, float | None, dict[str, Any]] | None:
    """A search hit's (namespace, key, created, updated, ttl, value); None (and a warning naming the key) if
    its item cannot be read."""
    namespace, key, blob = decode_hit(hit)
    try:
        value, created, updated, ttl = decode_item(blob)
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
        self.prefix = store_prefix(prefix, getattr(self._wire, "is_cluster", False))

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
            self._wire.call((TOUCH, 1, self.prefix + "exp", self.prefix, *touches))
        if writes:
            self._wire.batch(writes)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    # --- commands and replies -----------------------------------------------------------------------

    def _write_command(self, op: PutOp) -> Command:
        key = item_key(self.prefix, op.namespace, op.key)
        args = (self.prefix, ns_text(op.namespace), op.key)
        if op.value is None:
            return (DELETE, 1, key, *args)
        ttl = "" if op.ttl is None else _minutes(op.ttl)
        return (PUT, 1, key, *args, encode_value(op.value), ttl)

    def _read_command(self, op: ReadOp) -> Command:
        if isinstance(op, GetOp):
            key = item_key(self.prefix, op.namespace, op.key)
            return (GET, 1, key, self.prefix, member(op.namespace, op.key),
                    "1" if op.refresh_ttl else "0")
        index = self.prefix + "ns"
        if isinstance(op, SearchOp):
            low, high = lex_range(op.namespace_prefix)
            # Unfiltered, the page can only come from each namespace's newest offset+limit items.
            per_namespace = 0 if op.filter else max(op.offset + op.limit, 1)  # 0 = all
            return (SEARCH, 1, index, self.prefix, low, high, per_namespace)
        low, high = lex_range(fixed_prefix(op.match_conditions))
        return (LIST, 1, index, self.prefix, low, high)

    def _read_result(self, op: ReadOp, reply: Any, touches: list[str]) -> Result:
        if isinstance(op, GetOp):
            if reply is None:
                return None
            value, created, updated, _ = read_item(item_key(self.prefix, op.namespace, op.key), reply)
            return Item(value=value, key=op.key, namespace=op.namespace, created_at=as_datetime(created),
                        updated_at=as_datetime(updated))
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
            item = SearchItem(namespace=ns_tuple(namespace), key=key.decode(), value=value,
                              created_at=as_datetime(created), updated_at=as_datetime(updated))
            if op.refresh_ttl and ttl is not None:
                touches += [member(tuple(item.namespace), item.key), _minutes(ttl)]
            items.append(item)
        return items

    @staticmethod
    def _namespaces_result(op: ListNamespacesOp, reply: list[bytes]) -> list[tuple[str, ...]]:
        namespaces = [ns_tuple(m[:-1]) for m in reply]
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
