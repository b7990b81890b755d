"""Quotas on what an owner holds at once, counted as it is taken (reactgraph/service/quotas.py): the runs they
have pending or running (`runs_in_flight`) and the store items they put through the API (`store_items`).

Each count is a sorted set per owner in the index's slot, added to by one script that checks it first (concurrent
takes never pass the quota). What ends elsewhere — a run its worker ends, an item that expires or that a graph or
another caller deletes — is not taken out there: when an owner's set is full, the members whose thing has gone
are let go (each looked at once, at most the quota's number) and the script tries once more.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from reactgraph.service.index import index_tag
from reactgraph.service.quotas import QuotaReached
from reactgraph.service.records import FINAL_RUN_STATUSES, ServiceRecords

_RESERVE = """
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 1 end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1
"""


class OwnedCounts:
    """One quota's counted sets (`name`, one of QUOTAS; `kind`: its key's letter); `alive(member)` says whether
    what a member counts is still held."""

    def __init__(self, client: Any, prefix: str, name: str, kind: str,
                 alive: Callable[[str], Awaitable[bool]]) -> None:
        self.client, self.prefix, self.name, self.kind, self.alive = client, prefix, name, kind, alive
        self._reserve = client.register_script(_RESERVE)

    def key(self, owner: str) -> str:
        return f"{self.prefix}{index_tag(self.prefix)}:{self.kind}:n:{owner}"

    async def take(self, owner: str, limit: int | None, member: str) -> None:
        """Count `member` against `owner` (once however often it is taken), or QuotaReached when `limit` of
        theirs are held."""
        if limit is None:
            return
        args: list[str | float] = [member, time.time() * 1000, limit]
        if await self._reserve(keys=[self.key(owner)], args=args):
            return
        await self._let_go_of_gone(self.key(owner))
        if not await self._reserve(keys=[self.key(owner)], args=args):
            raise QuotaReached(self.name, limit, owner)

    async def give_back(self, owner: str, member: str) -> None:
        """A member counted but not held after all (not created, or deleted by its owner)."""
        await self.client.zrem(self.key(owner), member)

    async def _let_go_of_gone(self, key: str) -> None:
        members: Any = await self.client.zrange(key, 0, -1)
        gone = [m for m in members if not await self.alive(m.decode() if isinstance(m, bytes) else str(m))]
        if gone:
            await self.client.zrem(key, *gone)


def runs_in_flight(records: ServiceRecords) -> OwnedCounts:
    """Runs counted from their create until they end; a member is `<thread id> <run id>`."""
    async def going(member: str) -> bool:
        thread_id, _, run_id = member.partition(" ")
        run = await records.get_run(thread_id, run_id)
        return run is not None and run["status"] not in FINAL_RUN_STATUSES
    return OwnedCounts(records.client, records.keys.prefix, "runs_in_flight", "r", going)


def store_items(client: Any, prefix: str, store: Any) -> OwnedCounts:
    """Store items a caller put through the API, until they are gone; a member is `[namespace, key]` as JSON."""
    async def kept(member: str) -> bool:
        try:
            namespace, key = json.loads(member)
            return await store.aget(tuple(namespace), key, refresh_ttl=False) is not None
        except (ValueError, TypeError):
            return False  # not a member this module wrote: nothing to keep counting
    return OwnedCounts(client, prefix, "store_items", "s", kept)


def item_member(namespace: tuple[str, ...], key: str) -> str:
    return json.dumps([list(namespace), key], ensure_ascii=False)


async def create_counted(records: ServiceRecords, owner: str, limit: int | None, run: dict[str, Any],
                         store: Callable[[dict[str, Any]], Awaitable[tuple[bool, list[str]]]] | None = None
                         ) -> tuple[bool, list[str]]:
    """`store(run)` (default `records.create_run`; a scheduled run's own) under `owner`'s `runs_in_flight` quota
    (not counted if it is not created)."""
    counted, member = runs_in_flight(records), f"{run['thread_id']} {run['run_id']}"
    await counted.take(owner, limit, member)
    try:
        created, ahead = await (store or records.create_run)(run)
    except BaseException:
        await counted.give_back(owner, member)
        raise
    if not created:
        await counted.give_back(owner, member)
    return created, ahead
