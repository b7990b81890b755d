"""The record index: the sorted sets that a thread or assistant search, count and quota read instead of the
records, kept by one Lua script, and the searches over them.

A record is indexed under its terms — `all`, its status or graph, each short scalar metadata field (at most
INDEXED_FIELDS) — each a sorted set of ids by updated_at and by created_at, beside an entry hash of each id's
terms, sort fields and quota owner. All index keys share one hash tag, so one script changes a record's entries
at once: on one Redis the script that writes the record (exact counts), on a Cluster a second one right after
it. A filter made only of terms is exact: its page and count come from the index alone. Any other condition is
checked on the records of the narrowest indexed set, BATCH at a time, and an entry its record no longer matches
is repaired on the way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

import redis.asyncio

from reactgraph.service.wire import BadRequest

INDEXED_FIELDS = 64  # metadata fields of one record given a term of their own
MAX_TERM_CHARS = 256  # a longer field name or value is not indexed (a search for it reads records)
LEGACY_OWNER = "-"  # the quota owner of records written before the index (they count against nobody)

# index_apply(P, id, entry JSON or '' to remove, quota limit or ''): -1 when a new id would pass its owner's
# quota (nothing written), else 1. An entry without `o` keeps the owner it had.
INDEX_LUA = """
local function index_apply(P, id, entry, limit)
  local E = P .. 'e'
  local raw = redis.call('HGET', E, id)
  local old = raw and cjson.decode(raw) or nil
  local had = {}
  if old then for _, t in ipairs(old.t) do had[t] = true end end
  if entry == '' then
    for t in pairs(had) do redis.call('ZREM', P .. 'u:' .. t, id); redis.call('ZREM', P .. 'c:' .. t, id) end
    if old then redis.call('ZREM', P .. 'n:' .. old.o, id); redis.call('HDEL', E, id) end
    return 1
  end
  local new = cjson.decode(entry)
  if new.o == nil then new.o = old and old.o or '-' end
  if not old and limit ~= '' and redis.call('ZCARD', P .. 'n:' .. new.o) >= tonumber(limit) then return -1 end
  local keep = {}
  for _, t in ipairs(new.t) do
    keep[t] = true
    redis.call('ZADD', P .. 'u:' .. t, new.u, id)
    redis.call('ZADD', P .. 'c:' .. t, new.c, id)
  end
  for t in pairs(had) do
    if not keep[t] then redis.call('ZREM', P .. 'u:' .. t, id); redis.call('ZREM', P .. 'c:' .. t, id) end
  end
  if old and old.o ~= new.o then redis.call('ZREM', P .. 'n:' .. old.o, id) end
  redis.call('ZADD', P .. 'n:' .. new.o, new.c, id)
  redis.call('HSET', E, id, cjson.encode(new))
  return 1
end
"""
_APPLY = INDEX_LUA + "return index_apply(ARGV[1], ARGV[2], ARGV[3], ARGV[4])"
_BACKFILL = INDEX_LUA + """
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then return 0 end
return index_apply(ARGV[1], ARGV[2], ARGV[3], '')
"""
# KEYS: the terms' sets (one score kind), then a scratch key. ARGV: start, stop, '1' for newest first.
# {ids in that range of their intersection, its size}.
_PAGE = """
local n = #KEYS - 1
local src = KEYS[1]
if n > 1 then
  redis.call('ZINTERSTORE', KEYS[#KEYS], n, unpack(KEYS, 1, n))
  src = KEYS[#KEYS]
end
local ids
if ARGV[3] == '1' then ids = redis.call('ZRANGE', src, ARGV[1], ARGV[2], 'REV')
else ids = redis.call('ZRANGE', src, ARGV[1], ARGV[2]) end
local total = redis.call('ZCARD', src)
if n > 1 then redis.call('DEL', src) end
return {ids, total}
"""


def index_tag(prefix: str) -> str:
    """The hash tag every index key of the service under `prefix` carries."""
    return "{" + prefix + "ix}"


def term_of(name: str, value: Any) -> str | None:
    """The term for metadata field `name` holding `value`, or None when it is not indexed (not a short scalar).
    A whole number is one term however it is written (1 and 1.0 are equal, as a filter compares them)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and abs(value) < 2 ** 53:
        value = int(value)
    finite = isinstance(value, float) and math.isfinite(value)
    if not (value is None or isinstance(value, str | bool | int) or finite):
        return None
    term = "m:" + json.dumps([name, value], ensure_ascii=False)
    return term if len(term) <= MAX_TERM_CHARS else None


def metadata_terms(metadata: Any) -> list[str]:
    if not isinstance(metadata, Mapping):
        return []
    names = sorted(name for name in metadata if isinstance(name, str))[:INDEXED_FIELDS]
    return [t for name in names if (t := term_of(name, metadata[name]))]


def check_fields(metadata: Any, what: str) -> None:
    """A 422 for metadata with more fields than are indexed (each one a term: a search for any finds it)."""
    if isinstance(metadata, Mapping) and len(metadata) > INDEXED_FIELDS:
        raise BadRequest(422, f"'metadata' of {what} may hold at most {INDEXED_FIELDS} fields, got {len(metadata)}")


def ms_of(stamp: Any) -> int:
    """An ISO time of a record in ms since the epoch (0 when it is not one)."""
    try:
        return int(datetime.fromisoformat(str(stamp)).timestamp() * 1000)
    except ValueError:
        return 0


def entry(terms: Iterable[str], record: Mapping[str, Any], sort: Mapping[str, Any], owner: str | None = None) -> str:
    """An id's entry: its terms, scores, fields to sort by, and (on a create) its quota owner."""
    found: dict[str, Any] = {"t": ["all", *terms], "u": ms_of(record.get("updated_at")),
                             "c": ms_of(record.get("created_at")), "s": dict(sort)}
    if owner is not None:
        found["o"] = owner
    return json.dumps(found, ensure_ascii=False)


class RecordIndex:
    """The index of one kind of record ("t" threads, "a" assistants) of the service under one key prefix."""

    def __init__(self, client: redis.asyncio.Redis, prefix: str, kind: str) -> None:
        self.client, self.kind = client, kind
        self.base = f"{prefix}{index_tag(prefix)}:{kind}:"
        self.entries = self.base + "e"
        self.on_cluster = not isinstance(client, redis.asyncio.Redis)  # a RedisCluster: records in other slots
        self._apply = client.register_script(_APPLY)
        self._backfill = client.register_script(_BACKFILL)
        self._page = client.register_script(_PAGE)

    def owned(self, owner: str) -> str:
        return f"{self.base}n:{owner}"

    async def apply(self, record_id: str, found: str, limit: int | None = None) -> bool:
        """Write `record_id`'s entry (`found`, '' to remove it); False when its owner's quota refused it."""
        done = await self._apply(keys=[self.entries], args=[self.base, record_id, found, "" if limit is None
                                                            else limit])
        return int(done) == 1

    async def backfill_in(self, pipe: Any, record_id: str, found: str) -> None:
        """Index (in `pipe`) a record written before the index existed, unless it has an entry (a newer one)."""
        await self._backfill(keys=[self.entries], args=[self.base, record_id, found, ""], client=pipe)

    async def owned_count(self, owner: str) -> int:
        return int(await self.client.zcard(self.owned(owner)))

    async def page(self, terms: list[str], by: str, start: int, stop: int, newest_first: bool
                   ) -> tuple[list[str], int]:
        """(ids `start`..`stop` of the terms' intersection in `by` order ("u" or "c"), the intersection's size)."""
        import uuid

        keys = [f"{self.base}{by}:{t}" for t in terms] + [f"{self.base}tmp:{uuid.uuid4().hex}"]
        ids, total = await self._page(keys=keys, args=[start, stop, "1" if newest_first else "0"])
        return [i.decode() if isinstance(i, bytes) else str(i) for i in ids], int(total)

    async def count(self, terms: list[str]) -> int:
        keys = [f"{self.base}u:{t}" for t in terms]
        if len(keys) == 1:
            return int(await self.client.zcard(keys[0]))
        return int(await self.client.execute_command("ZINTERCARD", len(keys), *keys))

    async def having(self, ids: list[str], terms: list[str], by: str) -> list[tuple[str, float]]:
        """The ids (of those given) under every term, with their `by` score."""
        if not ids:  # no ids asked for: none found (Redis refuses an empty ZMSCORE)
            return []
        pipe = self.client.pipeline(transaction=False)
        for term in terms:
            pipe.zmscore(f"{self.base}{by}:{term}", ids)
        scores = await pipe.execute()
        return [(i, float(s[0])) for i, *s in zip(ids, *scores, strict=True) if all(x is not None for x in s)]

    async def sort_fields(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """Each id's sort fields, from its entry (ids without one left out)."""
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(ids), 1000):
            batch = ids[start:start + 1000]
            for record_id, raw in zip(batch, await self.client.hmget(self.entries, batch), strict=True):
                try:
                    fields = json.loads(raw)["s"] if raw is not None else None
                except (ValueError, KeyError, TypeError):
                    fields = None
                if isinstance(fields, dict):
                    found[record_id] = fields
        return found


Record = TypeVar("Record", bound=Mapping[str, Any])  # a thread's or an assistant's record (records.py)
SCORED = {"updated_at": "u", "created_at": "c"}  # sort keys the index keeps scores for
BATCH = 100  # records read (and decoded) at once when a filter is checked on records


@dataclass
class Query(Generic[Record]):
    """What a search asks: the terms every hit has, the whole filter as a check on a record, and the order."""

    terms: list[str]
    check: Callable[[Record], bool]
    exact: bool  # the terms are the whole filter
    terms_of: Callable[[Record], list[str]]  # what a record is indexed under (to repair an entry left behind)
    sort: str = "updated_at"
    newest_first: bool = True
    ids: list[str] | None = None  # only these
    # a condition no index holds, checked on each record the rest keeps (the filter is then not exact)
    check_async: Callable[[Record], Awaitable[bool]] | None = None
    # what check_async needs of a batch of records, read for the whole batch at once before they are checked
    prepare: Callable[[list[Record]], Awaitable[None]] | None = None


@dataclass
class Source(Generic[Record]):
    """Where records come from: `load(ids)` (None for an absent or damaged one) and `repair(id, record)`, which
    rewrites (or, for None, removes) the index entry of a record that does not match it."""

    index: RecordIndex
    load: Callable[[list[str]], Awaitable[list[Record | None]]]
    repair: Callable[[str, Record | None], Awaitable[None]]


class _Ordered:
    """The query's ids in its order, a slice at a time: from the index's scores, else sorted once on the
    entries' sort fields (ids only: no record is read)."""

    def __init__(self, index: RecordIndex, query: Query[Any]) -> None:
        self.index, self.query = index, query
        self.listed: list[str] | None = None

    async def slice(self, start: int, stop: int) -> tuple[list[str], int]:
        """(ids start..stop, -1: to the end), how many the query has in all)."""
        q = self.query
        if q.ids is None and q.sort in SCORED:
            return await self.index.page(q.terms, SCORED[q.sort], start, stop, q.newest_first)
        if self.listed is None:
            self.listed = await self._listed()
        return self.listed[start:None if stop == -1 else stop + 1], len(self.listed)

    async def _listed(self) -> list[str]:
        q = self.query
        if q.ids is not None:
            scored = await self.index.having(q.ids, q.terms, SCORED.get(q.sort, "c"))
            if q.sort in SCORED:
                return [i for i, _s in sorted(scored, key=lambda p: (p[1], p[0]), reverse=q.newest_first)]
            ids = [i for i, _s in scored]
        else:
            ids, _total = await self.index.page(q.terms, "c", 0, -1, False)
        fields = await self.index.sort_fields(ids)
        return sorted((i for i in ids if i in fields), key=lambda i: (str(fields[i].get(q.sort, "")), i),
                      reverse=q.newest_first)


async def _kept(source: Source[Record], query: Query[Record], ids: list[str]) -> list[Record]:
    found, records = [], await source.load(ids)
    if query.prepare is not None:
        await query.prepare([r for r in records if r is not None and query.check(r)])
    for record_id, record in zip(ids, records, strict=True):
        if record is None or not set(query.terms) <= {"all", *query.terms_of(record)}:
            await source.repair(record_id, record)  # the index was behind the record: set it right
        elif query.check(record) and (query.check_async is None or await query.check_async(record)):
            found.append(record)
    return found


async def search(source: Source[Record], query: Query[Record], offset: int, limit: int) -> list[Record]:
    """The page `offset`..`offset + limit` of the records the query finds."""
    ordered = _Ordered(source.index, query)
    if query.exact:
        return await _kept(source, query, (await ordered.slice(offset, offset + limit - 1))[0])
    return (await _scan(source, query, ordered, offset + limit))[0][offset:]


async def count(source: Source[Record], query: Query[Record]) -> int:
    """How many records the query finds: from the index when it is exact, else by reading them."""
    if query.exact and query.ids is None:
        return await source.index.count(query.terms)
    ordered = _Ordered(source.index, query)
    if query.exact:
        return (await ordered.slice(0, -1))[1]
    return (await _scan(source, query, ordered, None))[1]


async def _scan(source: Source[Record], query: Query[Record], ordered: _Ordered, want: int | None
                ) -> tuple[list[Record], int]:
    """(the first `want` records the query keeps (None: none kept, only counted), how many it keeps in all or
    until `want`), reading BATCH records at a time in the query's order."""
    kept: list[Record] = []
    matched, start = 0, 0
    while True:
        ids, total = await ordered.slice(start, start + BATCH - 1)
        found = await _kept(source, query, ids)
        matched += len(found)
        if want is not None:
            kept.extend(found[:want - len(kept)])
            if len(kept) >= want:
                return kept, matched
        start += BATCH
        if start >= total or not ids:
            return kept, matched


def filter_terms(found: dict[str, Any] | None) -> tuple[list[str], bool]:
    """(the terms an auth handler's filter implies, whether they are the whole filter): its plain and `$eq`
    fields, and those of each `$and` group; `$or`, `$contains` and values that are not short scalars are
    checked on records instead."""

    terms: list[str] = []
    exact = True
    for name, wanted in (found or {}).items():
        if name == "$and":
            for group in wanted:
                inner, whole = filter_terms(group)
                terms, exact = terms + inner, exact and whole
            continue
        if isinstance(wanted, dict):
            operator, operand = next(iter(wanted.items()))
            term = term_of(name, operand) if operator == "$eq" and name != "$or" else None
        else:
            term = None if name == "$or" else term_of(name, wanted)
        if term is None:
            exact = False
        else:
            terms.append(term)
    return terms, exact
