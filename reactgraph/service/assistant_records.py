"""Created assistants in Redis: each one's current record and every version of it, under one hash tag (so a
script may change both at once on a Redis Cluster), and an index of them all.

A version is never removed on its own: an update adds version n+1 and makes it current, `set_latest` makes an
earlier one current again. A record read back is Redis content: it must be one this service wrote, for a graph
this service serves, or it is treated as absent (and logged).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

import redis.asyncio

from reactgraph.service.keys import ServiceKeys
from reactgraph.service.stored_json import decode_record, encoded, report_unreadable
from reactgraph.service.wire import BadRequest

MAX_ASSISTANTS = 1000  # created assistants a service keeps (a create past it is a 409; a search reads them all)
MAX_VERSIONS = 1000  # versions of one assistant (an update past it is a 409)
REQUIRED = ("assistant_id", "graph_id", "created_at", "name")
_MAPPINGS = ("config", "context", "metadata")
_PASSES = 5  # an update that lost a race to another one is tried again this many times

# Create unless there is one: returns the existing record (nothing written), else nil.
_CREATE = """
local existing = redis.call('GET', KEYS[1])
if existing then return existing end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], '1', ARGV[2])
return false
"""
# Replace the record if it is still the one read (else 0: read again), adding a version when one is given.
_REPLACE = """
local current = redis.call('GET', KEYS[1])
if not current then return -1 end
if current ~= ARGV[1] then return 0 end
if ARGV[3] ~= '' then
  if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[5]) then return -2 end
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
end
redis.call('SET', KEYS[1], ARGV[2])
return 1
"""


def version_of(record: Mapping[str, Any]) -> dict[str, Any]:
    """The version entry for an assistant record (what `get_versions` lists: no `updated_at`)."""
    return {"assistant_id": record["assistant_id"], "version": record["version"], "graph_id": record["graph_id"],
            "config": record["config"], "context": record["context"], "metadata": record["metadata"],
            "created_at": record["updated_at"], "name": record["name"], "description": record.get("description")}


class AssistantRecords:
    """The created assistants of one service (one key prefix of one Redis)."""

    def __init__(self, client: redis.asyncio.Redis, keys: ServiceKeys, graphs: tuple[str, ...]) -> None:
        self.client, self.keys, self.graphs = client, keys, graphs
        self._create, self._replace = client.register_script(_CREATE), client.register_script(_REPLACE)

    def _checked(self, raw: Any, key: str) -> dict[str, Any] | None:
        record = decode_record(raw, key, REQUIRED)
        if record is None:
            return None
        if (record["graph_id"] not in self.graphs or not isinstance(record.get("version"), int)
                or any(not isinstance(record.get(name), dict) for name in _MAPPINGS)):
            report_unreadable(key, "not an assistant of a graph this service serves", False)
            return None
        return record

    async def get(self, assistant_id: str) -> dict[str, Any] | None:
        key = self.keys.assistant(assistant_id)
        record = self._checked(await self.client.get(key), key)
        return record if record is None or record["assistant_id"] == assistant_id else None

    async def create(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """Store a new assistant (version 1); when one with its id exists, that one is returned instead."""
        assistant_id = record["assistant_id"]
        if await self.client.zcard(self.keys.assistants) >= MAX_ASSISTANTS:
            raise BadRequest(409, f"this server keeps at most {MAX_ASSISTANTS} assistants: delete some first")
        text = encoded(record, "assistant")
        keys = [self.keys.assistant(assistant_id), self.keys.assistant_versions(assistant_id)]
        existing = await self._create(keys=keys, args=[text, json.dumps(version_of(record), ensure_ascii=False)])
        if existing is not None:
            return self._checked(existing, self.keys.assistant(assistant_id)) or {}
        await self.client.zadd(self.keys.assistants, {assistant_id: time.time() * 1000})
        return None

    async def replace(self, assistant_id: str, change: Callable[[dict[str, Any], int], dict[str, Any]], *,
                      new_version: bool) -> dict[str, Any] | None:
        """Apply `change(current record, next version number)` → the new record; None when there is none.
        `new_version`: the new record is also kept as version n+1 (an update); else it only becomes current."""
        key, versions = self.keys.assistant(assistant_id), self.keys.assistant_versions(assistant_id)
        for _ in range(_PASSES):
            raw = await self.client.get(key)
            current = self._checked(raw, key)
            if current is None:
                return None
            record = change(current, int(await self.client.hlen(versions)) + 1)
            number, entry = (str(record["version"]), json.dumps(version_of(record), ensure_ascii=False)
                             ) if new_version else ("", "")
            done = await self._replace(keys=[key, versions],
                                       args=[raw or "", encoded(record, "assistant"), number, entry, MAX_VERSIONS])
            if done == 1:
                return record
            if done == -1:
                return None
            if done == -2:
                raise BadRequest(409, f"assistant {assistant_id!r} has {MAX_VERSIONS} versions, the most kept: "
                                      "create a new assistant instead")
        raise BadRequest(409, f"assistant {assistant_id!r} is being changed by others: try again")

    async def versions(self, assistant_id: str) -> list[dict[str, Any]]:
        """Every version, newest first (unreadable ones left out)."""
        key = self.keys.assistant_versions(assistant_id)
        found: Any = await self.client.hgetall(key)
        entries = [decode_record(raw, f"{key}[{number!r}]", ("assistant_id", "graph_id"))
                   for number, raw in found.items()]
        kept = [e for e in entries if e is not None and e["assistant_id"] == assistant_id
                and isinstance(e.get("version"), int) and e["graph_id"] in self.graphs
                and all(isinstance(e.get(name), dict) for name in _MAPPINGS)]
        return sorted(kept, key=lambda e: e["version"], reverse=True)

    async def all(self) -> list[dict[str, Any]]:
        """Every created assistant's record (at most MAX_ASSISTANTS), read in pipelined batches."""
        ids: Any = await self.client.zrange(self.keys.assistants, 0, MAX_ASSISTANTS - 1)
        names = [i.decode() if isinstance(i, bytes) else str(i) for i in ids]
        found: list[dict[str, Any]] = []
        for start in range(0, len(names), 500):
            pipe = self.client.pipeline(transaction=False)
            for assistant_id in names[start:start + 500]:
                pipe.get(self.keys.assistant(assistant_id))
            for assistant_id, raw in zip(names[start:start + 500], await pipe.execute(), strict=True):
                record = self._checked(raw, self.keys.assistant(assistant_id))
                if record is not None and record["assistant_id"] == assistant_id:
                    found.append(record)
        return found

    async def delete(self, assistant_id: str) -> None:
        await self.client.delete(self.keys.assistant(assistant_id), self.keys.assistant_versions(assistant_id))
        await self.client.zrem(self.keys.assistants, assistant_id)
