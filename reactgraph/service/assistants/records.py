"""The assistants clients created, in Redis: each one's current record and every version of it, their index
entries, and their search.

A record and its versions share one hash tag, so one script changes both, and on one Redis the same script
writes the index entries (on a Cluster a second one does, after it; before it for a create under its quota). A
version is never removed on its own: an update adds version n+1 and makes it current, `set_latest` makes an
earlier one current again. A record read back must be one this service wrote, for a graph it serves
(AssistantRecord, checked), or it is absent. A search narrows by the index's terms (graph, short scalar
metadata) and checks the rest (`@>` metadata, name) on the records; the graphs' own assistants are indexed at
start under owner `system` and read from memory.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any, NotRequired, TypedDict, cast

import redis.asyncio

from reactgraph.service.assistants.catalogue import Assistants
from reactgraph.service.auth import matches
from reactgraph.service.index import (
    INDEX_LUA,
    LEGACY_OWNER,
    Query,
    RecordIndex,
    Source,
    check_fields,
    entry,
    filter_terms,
    metadata_terms,
    term_of,
)
from reactgraph.service.keys import ServiceKeys
from reactgraph.service.quotas import QuotaReached
from reactgraph.service.wire import BadRequest, decode_record, encoded, report_unreadable

REQUIRED = ("assistant_id", "graph_id", "created_at", "name")
_MAPPINGS = ("config", "context", "metadata")
_PASSES = 5  # an update that lost a race to another one is tried again this many times

# Create unless there is one: returns the existing record (nothing written), -1 past the owner's quota, else nil.
# ARGV[3..]: its index entry (none on a Cluster).
_CREATE = INDEX_LUA + """
local existing = redis.call('GET', KEYS[1])
if existing then return existing end
if ARGV[3] and index_apply(ARGV[3], ARGV[4], ARGV[5], ARGV[6]) == -1 then return -1 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], '1', ARGV[2])
return false
"""
# Replace the record if it is still the one read (else 0: read again), adding a version when one is given.
_REPLACE = INDEX_LUA + """
local current = redis.call('GET', KEYS[1])
if not current then return -1 end
if current ~= ARGV[1] then return 0 end
if ARGV[3] ~= '' then
  if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[5]) then return -2 end
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
end
redis.call('SET', KEYS[1], ARGV[2])
if ARGV[6] then index_apply(ARGV[6], ARGV[7], ARGV[8], '') end
return 1
"""
# Delete the assistant and its index entries.
_DELETE = INDEX_LUA + """
redis.call('DEL', KEYS[1], KEYS[2])
return index_apply(ARGV[1], ARGV[2], '', '')
"""


class AssistantRecord(TypedDict):
    """An assistant as it is stored and answered: langgraph_sdk.schema.Assistant's fields (dates as ISO text).

    Required: what a record read back is checked for (`AssistantRecords._checked`): its ids, date and name
    strings, a graph this service serves, an int version, objects for its settings and metadata; `updated_at` and
    `description` are written with every one but taken as found."""

    assistant_id: str
    graph_id: str
    created_at: str
    name: str
    version: int
    config: dict[str, Any]
    context: dict[str, Any]
    metadata: dict[str, Any]
    updated_at: NotRequired[str]
    description: NotRequired[str | None]


class AssistantVersion(TypedDict):
    """One version of a created assistant (langgraph_sdk.schema.AssistantVersion's fields: a record without
    `updated_at`, its `created_at` when the version was made). Required: what `versions` checks when reading one."""

    assistant_id: str
    graph_id: str
    version: int
    config: dict[str, Any]
    context: dict[str, Any]
    metadata: dict[str, Any]
    created_at: NotRequired[str]
    name: NotRequired[str]
    description: NotRequired[str | None]


def version_of(record: AssistantRecord) -> AssistantVersion:
    """The version entry for an assistant record (what `get_versions` lists: no `updated_at`)."""
    return {"assistant_id": record["assistant_id"], "version": record["version"], "graph_id": record["graph_id"],
            "config": record["config"], "context": record["context"], "metadata": record["metadata"],
            "created_at": record["updated_at"], "name": record["name"], "description": record.get("description")}


def assistant_terms(record: AssistantRecord) -> list[str]:
    return [f"g={record.get('graph_id')}", *metadata_terms(record.get("metadata"))]


def assistant_entry(record: AssistantRecord, owner: str | None = None) -> str:
    sort = {k: str(record.get(k) or "").lower() for k in ("assistant_id", "graph_id", "name")}
    return entry(assistant_terms(record), record, sort, owner)


class AssistantRecords:
    """The created assistants of one service (one key prefix of one Redis)."""

    def __init__(self, client: redis.asyncio.Redis, keys: ServiceKeys, graphs: tuple[str, ...],
                 versions_limit: int | None = None) -> None:
        self.client, self.keys, self.graphs = client, keys, graphs
        self._create, self._replace = client.register_script(_CREATE), client.register_script(_REPLACE)
        self._delete = client.register_script(_DELETE)
        self.index = RecordIndex(client, keys.prefix, "a")
        self.versions_limit = versions_limit  # the `versions` quota (reactgraph/service/quotas.py)

    def _script_keys(self, assistant_id: str) -> list[str]:
        """The keys of a script that writes the assistant: its record and versions, and on one Redis (not a
        Cluster, where they sit in another slot) its index's entries."""
        own = [self.keys.assistant(assistant_id), self.keys.assistant_versions(assistant_id)]
        return own if self.index.on_cluster else [*own, self.index.entries]

    def _indexed(self, record: AssistantRecord, owner: str | None = None, limit: int | None = None) -> list[Any]:
        """The index arguments of a script that writes `record` (none on a Cluster: written by a second script)."""
        if self.index.on_cluster:
            return []
        return [self.index.base, record["assistant_id"], assistant_entry(record, owner), "" if limit is None else limit]

    def _checked(self, raw: Any, key: str) -> AssistantRecord | None:
        record = decode_record(raw, key, REQUIRED)
        if record is None:
            return None
        if (record["graph_id"] not in self.graphs or not isinstance(record.get("version"), int)
                or any(not isinstance(record.get(name), dict) for name in _MAPPINGS)):
            report_unreadable(key, "not an assistant of a graph this service serves", False)
            return None
        return cast(AssistantRecord, record)

    async def get(self, assistant_id: str) -> AssistantRecord | None:
        key = self.keys.assistant(assistant_id)
        record = self._checked(await self.client.get(key), key)
        return record if record is None or record["assistant_id"] == assistant_id else None

    async def create(self, record: AssistantRecord, owner: str, limit: int | None
                     ) -> tuple[bool, AssistantRecord | None]:
        """Store a new assistant (version 1) under `owner`'s `assistants` quota `limit` (QuotaReached past it):
        (True, None); when one with its id exists, (False, that one — None if it cannot be read back)."""
        assistant_id = record["assistant_id"]
        check_fields(record.get("metadata"), "an assistant")
        text = encoded(record, "assistant")
        keys = self._script_keys(assistant_id)
        if self.index.on_cluster and not await self.index.apply(assistant_id, assistant_entry(record, owner), limit):
            raise QuotaReached("assistants", limit or 0, owner)
        existing = await self._create(keys=keys, args=[text, json.dumps(version_of(record), ensure_ascii=False),
                                                       *self._indexed(record, owner, limit)])
        if existing == -1:
            raise QuotaReached("assistants", limit or 0, owner)
        if existing is not None:
            return False, self._checked(existing, self.keys.assistant(assistant_id))
        await self.client.zadd(self.keys.assistants, {assistant_id: time.time() * 1000})
        return True, None

    async def replace(self, assistant_id: str, change: Callable[[AssistantRecord, int], AssistantRecord], *,
                      new_version: bool) -> AssistantRecord | None:
        """Apply `change(current record, next version number)` → the new record; None when there is none.
        `new_version`: the new record is also kept as version n+1 (an update); else it only becomes current."""
        key, versions = self.keys.assistant(assistant_id), self.keys.assistant_versions(assistant_id)
        for _ in range(_PASSES):
            raw = await self.client.get(key)
            current = self._checked(raw, key)
            if current is None:
                return None
            record = change(current, int(await self.client.hlen(versions)) + 1)
            number, kept = (str(record["version"]), json.dumps(version_of(record), ensure_ascii=False)
                            ) if new_version else ("", "")
            check_fields(record.get("metadata"), "an assistant")
            limit = self.versions_limit or 2 ** 31
            done = await self._replace(keys=self._script_keys(assistant_id),
                                       args=[raw or "", encoded(record, "assistant"), number, kept, limit,
                                             *self._indexed(record)])
            if done == 1:
                if self.index.on_cluster:
                    await self.index.apply(assistant_id, assistant_entry(record))
                return record
            if done == -1:
                return None
            if done == -2:
                raise QuotaReached("versions", limit, f"assistant {assistant_id!r}")
        raise BadRequest(409, f"assistant {assistant_id!r} is being changed by others: try again")

    async def versions(self, assistant_id: str) -> list[AssistantVersion]:
        """Every version, newest first (unreadable ones left out)."""
        key = self.keys.assistant_versions(assistant_id)
        found: Any = await self.client.hgetall(key)
        entries = [decode_record(raw, f"{key}[{number!r}]", ("assistant_id", "graph_id"))
                   for number, raw in found.items()]
        kept = [e for e in entries if e is not None and e["assistant_id"] == assistant_id
                and isinstance(e.get("version"), int) and e["graph_id"] in self.graphs
                and all(isinstance(e.get(name), dict) for name in _MAPPINGS)]
        return sorted(cast(list[AssistantVersion], kept), key=lambda e: e["version"], reverse=True)

    async def load(self, ids: list[str]) -> list[AssistantRecord | None]:
        """The records of `ids` (None: absent or unreadable), read in one pipeline."""
        pipe = self.client.pipeline(transaction=False)
        for assistant_id in ids:
            pipe.get(self.keys.assistant(assistant_id))
        found = [self._checked(raw, self.keys.assistant(i)) for i, raw in zip(ids, await pipe.execute(), strict=True)]
        return [r if r is not None and r["assistant_id"] == i else None for i, r in zip(ids, found, strict=True)]

    async def delete(self, assistant_id: str) -> None:
        """The assistant, its versions and its index entries (together on one Redis)."""
        keys = [self.keys.assistant(assistant_id), self.keys.assistant_versions(assistant_id), self.index.entries]
        if self.index.on_cluster:
            await self.client.delete(*keys[:2])
            await self.index.apply(assistant_id, "")
        else:
            await self._delete(keys=keys, args=[self.index.base, assistant_id])
        await self.client.zrem(self.keys.assistants, assistant_id)


SYSTEM_OWNER = "system"


def contains(held: Any, wanted: Any) -> bool:
    """Postgres' `@>` on JSON, as the Agent Server's metadata filter applies it."""
    if isinstance(wanted, Mapping):
        return isinstance(held, Mapping) and all(k in held and contains(held[k], v) for k, v in wanted.items())
    if isinstance(wanted, list):
        return isinstance(held, list) and all(any(contains(h, w) for h in held) for w in wanted)
    return held == wanted


def assistant_query(allowed: dict[str, Any] | None, graph_id: str | None, name: str | None,
                    metadata: dict[str, Any], sort: str, newest_first: bool) -> Query[AssistantRecord]:
    terms, exact = filter_terms(allowed)
    for key, value in metadata.items():
        term = term_of(key, value)
        exact = exact and term is not None
        terms += [term] if term else []
    if graph_id is not None:
        terms.append(f"g={graph_id}")
    exact = exact and not name

    def check(record: AssistantRecord) -> bool:
        return (graph_id in (None, record["graph_id"]) and (not name or name.lower() in str(record.get("name") or
                                                                                          "").lower())
                and contains(record["metadata"], metadata) and matches(record["metadata"], allowed))

    return Query(sorted(set(terms)) or ["all"], check, exact, assistant_terms, sort, newest_first)


def assistant_source(created: AssistantRecords, assistants: Assistants) -> Source[AssistantRecord]:
    async def load(ids: list[str]) -> list[AssistantRecord | None]:
        own = {i: a.record() for i in ids if (a := assistants.find(i)) is not None and a.stored is None}
        stored = iter(await created.load([i for i in ids if i not in own]))
        return [own[i] if i in own else next(stored) for i in ids]

    async def repair(assistant_id: str, record: AssistantRecord | None) -> None:
        await created.index.apply(assistant_id, "" if record is None else assistant_entry(record))

    return Source(created.index, load, repair)


async def index_own_and_backfill(created: AssistantRecords, assistants: Assistants) -> None:
    """At start: the graphs' own assistants into the index, and (once) the assistants created before it."""
    for assistant in assistants.all():
        await created.index.apply(assistant.assistant_id, assistant_entry(assistant.record(), SYSTEM_OWNER))
    marker = f"{created.index.base}backfilled"
    if await created.client.exists(marker):
        return
    done = 0
    while raw := await created.client.zrange(created.keys.assistants, done, done + 499):
        batch = [i.decode() if isinstance(i, bytes) else str(i) for i in raw]
        pipe = created.client.pipeline(transaction=False)
        for assistant_id, record in zip(batch, await created.load(batch), strict=True):
            if record is not None:
                await created.index.backfill_in(pipe, assistant_id, assistant_entry(record, LEGACY_OWNER))
        await pipe.execute()
        done += len(batch)
    await created.client.set(marker, "1")
