"""The `runs_in_flight` quota: runs of one owner pending or running at once (reactgraph/service/quotas.py).

A run is counted from its create until its worker ends it. The count is a sorted set per owner in the index's
slot, added to by one script that checks it first (concurrent creates never pass the quota). Workers do not
update it: when the set is full, the runs in it that have ended (or are gone) are let go, reading their records
(at most the quota's number), and the script tries once more.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from reactgraph.service.quotas import QuotaReached
from reactgraph.service.record_index import index_tag
from reactgraph.service.records import FINAL_RUN_STATUSES, ServiceRecords

_RESERVE = """
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1
"""


class RunQuota:
    """Runs in flight, per owner, of the service under one key prefix."""

    def __init__(self, records: ServiceRecords) -> None:
        self.records = records
        self._reserve = records.client.register_script(_RESERVE)

    def key(self, owner: str) -> str:
        return f"{self.records.keys.prefix}{index_tag(self.records.keys.prefix)}:r:n:{owner}"

    async def take(self, owner: str, limit: int | None, thread_id: str, run_id: str) -> None:
        """Count the run against `owner`, or QuotaReached (429) when `limit` of theirs are in flight."""
        if limit is None:
            return
        args: list[str | float] = [f"{thread_id} {run_id}", time.time() * 1000, limit]
        if await self._reserve(keys=[self.key(owner)], args=args):
            return
        await self._let_go_of_ended(self.key(owner))
        if not await self._reserve(keys=[self.key(owner)], args=args):
            raise QuotaReached("runs_in_flight", limit, owner)

    async def give_back(self, owner: str, thread_id: str, run_id: str) -> None:
        """A run counted but not created after all."""
        await self.records.client.zrem(self.key(owner), f"{thread_id} {run_id}")

    async def _let_go_of_ended(self, key: str) -> None:
        members: Any = await self.records.client.zrange(key, 0, -1)
        ended = []
        for member in members:
            text = member.decode() if isinstance(member, bytes) else str(member)
            thread_id, _, run_id = text.partition(" ")
            run = await self.records.get_run(thread_id, run_id)
            if run is None or run["status"] in FINAL_RUN_STATUSES:
                ended.append(member)
        if ended:
            await self.records.client.zrem(key, *ended)


async def create_counted(records: ServiceRecords, owner: str, limit: int | None, run: dict[str, Any],
                         store: Callable[[dict[str, Any]], Awaitable[tuple[bool, list[str]]]] | None = None
                         ) -> tuple[bool, list[str]]:
    """`store(run)` (default `records.create_run`; a scheduled run's own) under `owner`'s `runs_in_flight` quota
    (not counted if it is not created)."""
    counted = RunQuota(records)
    await counted.take(owner, limit, run["thread_id"], run["run_id"])
    try:
        created, ahead = await (store or records.create_run)(run)
    except BaseException:
        await counted.give_back(owner, run["thread_id"], run["run_id"])
        raise
    if not created:
        await counted.give_back(owner, run["thread_id"], run["run_id"])
    return created, ahead
