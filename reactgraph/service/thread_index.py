"""A thread record written together with its index entries (reactgraph/service/index.py): one script on
one Redis; on a Redis Cluster, the entries right after the record (before it, for a create under a quota).

What a thread is indexed under: its status and its metadata's short scalar fields; it sorts by its status and
state_updated_at as well as by updated_at and created_at.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import redis.asyncio

from reactgraph.service.index import INDEX_LUA, RecordIndex, check_fields, entry, metadata_terms, term_of
from reactgraph.service.keys import ServiceKeys
from reactgraph.service.quotas import QuotaReached

# KEYS: the record, the index's entries. ARGV: record, index base, id, entry, quota limit or ''.
_PUT = INDEX_LUA + """
if index_apply(ARGV[2], ARGV[3], ARGV[4], ARGV[5]) == -1 then return -1 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
"""
# KEYS: the record, the index's entries. ARGV: index base, id. The record and its entries go together.
_DROP = INDEX_LUA + """
redis.call('DEL', KEYS[1])
return index_apply(ARGV[1], ARGV[2], '', '')
"""

# KEYS: the record, the index's entries. ARGV: index base, id, entry ('' to remove), the record as it was read.
# A search's repair of an entry its record did not match, unless the record has been written since (whose
# writer indexed it).
_REPAIR = INDEX_LUA + """
if (redis.call('GET', KEYS[1]) or '') ~= ARGV[4] then return 0 end
return index_apply(ARGV[1], ARGV[2], ARGV[3], '')
"""


def thread_terms(record: Mapping[str, Any]) -> list[str]:
    return [f"st={record.get('status')}", *metadata_terms(record.get("metadata"))]


def thread_entry(record: Mapping[str, Any], owner: str | None = None) -> str:
    sort = {"thread_id": str(record.get("thread_id")), "status": str(record.get("status") or ""),
            "state_updated_at": str(record.get("state_updated_at") or "")}
    return entry(thread_terms(record), record, sort, owner)


class ThreadIndex:
    """Thread records and their index entries, written together."""

    def __init__(self, client: redis.asyncio.Redis, keys: ServiceKeys) -> None:
        self.client, self.keys = client, keys
        self.index = RecordIndex(client, keys.prefix, "t")
        self._put, self._drop = client.register_script(_PUT), client.register_script(_DROP)
        self._repair = client.register_script(_REPAIR)

    async def put(self, record: dict[str, Any], text: str, owner: str | None = None, limit: int | None = None
                  ) -> None:
        """Store the thread's record `text` and its entries; `owner` and `limit`: a create under that quota
        (QuotaReached, nothing written, when the owner has `limit` threads)."""
        check_fields(record.get("metadata"), "a thread")
        thread_id, key = record["thread_id"], self.keys.thread(record["thread_id"])
        found = thread_entry(record, owner)
        if not self.index.on_cluster:
            done = await self._put(keys=[key, self.index.entries],
                                   args=[text, self.index.base, thread_id, found, "" if limit is None else limit])
        elif limit is not None:  # a create: its quota first, so a refusal writes nothing
            done = 1 if await self.index.apply(thread_id, found, limit) else -1
            if done == 1:
                await self.client.set(key, text)
        else:
            await self.client.set(key, text)
            done = 1 if await self.index.apply(thread_id, found) else -1
        if done == -1 and limit is not None:
            raise QuotaReached("threads", limit, str(owner))

    async def ids_where(self, name: str, value: Any, batch: int = 1000) -> list[str]:
        """Every thread whose metadata `name` is `value` (a short scalar: an indexed term), read page by page."""
        term = term_of(name, value)
        if term is None:
            raise ValueError(f"metadata {name!r} = {str(value)[:40]!r} is not an indexed value")
        found: list[str] = []
        while True:
            ids, total = await self.index.page([term], "c", len(found), len(found) + batch - 1, False)
            found += ids
            if not ids or len(found) >= total:
                return found

    def status_args(self, record: Mapping[str, Any]) -> list[str]:
        """What a script that replaces the record in place (records._SET_THREAD_IF) needs to index it too (one
        Redis); on a Cluster, nothing (`after_replace` indexes it)."""
        return [] if self.index.on_cluster else [self.index.base, record["thread_id"], thread_entry(record)]

    async def after_replace(self, record: Mapping[str, Any]) -> None:
        if self.index.on_cluster:
            await self.index.apply(record["thread_id"], thread_entry(record))

    async def drop(self, thread_id: str) -> None:
        """Delete the thread's record and its entries."""
        if self.index.on_cluster:
            await self.client.delete(self.keys.thread(thread_id))
            await self.index.apply(thread_id, "")
        else:
            await self._drop(keys=[self.keys.thread(thread_id), self.index.entries],
                             args=[self.index.base, thread_id])

    async def repair(self, thread_id: str, raw: Any, record: Mapping[str, Any] | None) -> None:
        """Set the entry of a thread a search read as `raw` (decoded: `record`, None if absent or unreadable)
        right, unless the record has changed since (on a Cluster, without that check)."""
        found = "" if record is None else thread_entry(record)
        if self.index.on_cluster:
            await self.index.apply(thread_id, found)
        else:
            await self._repair(keys=[self.keys.thread(thread_id), self.index.entries],
                               args=[self.index.base, thread_id, found, raw or ""])
