"""Runs created with `after_seconds`: stored at once, started no earlier than that.

Such a run is kept out of its thread's `pending` list — the list a worker holding the thread takes runs from —
in the thread's `scheduled` sorted set (run id → when it is due, ms), and named in a global sorted set
(`<thread id> <run id>` → due ms) that the workers' promote step reads. Promoting a due run is one script on
the thread's keys: it leaves the thread's set (only one promoter, or a cancel, can take it out), and unless it
was deleted or cancelled meanwhile it joins the end of `pending`; then the thread is notified and the global
entry dropped. A promoter that dies between the two steps leaves the global entry, which the next one finds
and drops (its script answers 0). Every script touches only one thread's keys (one hash tag): Cluster-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import redis.asyncio

from reactgraph.service.connections import REDIS_DOWN
from reactgraph.service.keys import ServiceKeys
from reactgraph.service.records import ServiceRecords, encoded, now_iso
from reactgraph.service.work_queue import WorkQueue

log = logging.getLogger("reactgraph.service")
PROMOTE_EVERY_S = 0.5  # how late past its time a scheduled run may start (plus the queue's own latency)
PROMOTE_BATCH = 200

# KEYS: scheduled, run, cancel mark, pending. ARGV: run id. 1: it joined `pending`; 0: nothing to do.
_PROMOTE = """
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
if redis.call('EXISTS', KEYS[2]) == 0 or redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
redis.call('RPUSH', KEYS[4], ARGV[1])
return 1
"""


def later_iso(seconds: float) -> str:
    """The ISO time `seconds` from now (a scheduled run's `created_at`, as langgraph-api gives it)."""
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()


async def schedule_run(records: ServiceRecords, record: dict[str, Any], after_s: float) -> tuple[bool, list[str]]:
    """Store `record` to start `after_s` seconds from now, under its multitask strategy as records.create_run
    does: (created, run ids ahead of it)."""
    thread_id, run_id, keys = record["thread_id"], record["run_id"], records.keys
    due_ms = int((time.time() + after_s) * 1000)
    created, ahead = await records.create_run(record, due_ms=due_ms)
    if not created:
        return False, []
    await records.client.zadd(keys.scheduled, {f"{thread_id} {run_id}": due_ms})
    return True, ahead


async def cancel_scheduled(records: ServiceRecords, run: dict[str, Any], action: str) -> bool:
    """Cancel a run still waiting for its time: it never starts; it reads `interrupted` (`rollback`: it is
    deleted). False when it is not waiting for its time (promoted, or not scheduled at all)."""
    thread_id, run_id = run["thread_id"], run["run_id"]
    if not await records.client.zrem(records.keys.scheduled_runs(thread_id), run_id):
        return False
    await records.count("cancelled_before_start")
    if action == "rollback":
        await records.delete_run(thread_id, run_id)
        return True
    current = await records.get_run(thread_id, run_id)
    if current is not None:  # nobody else writes it now: no worker will ever take it
        current.update(status="interrupted", updated_at=now_iso())
        await records.client.set(records.keys.run(thread_id, run_id), encoded(current, "run record"))
    return True


async def promote_due(client: redis.asyncio.Redis, keys: ServiceKeys, queue: WorkQueue) -> int:
    """Move the runs whose time has come into their threads' queues; how many were moved."""
    script = client.register_script(_PROMOTE)
    members: Any = await client.zrangebyscore(keys.scheduled, "-inf", int(time.time() * 1000), start=0,
                                              num=PROMOTE_BATCH)
    moved = 0
    for raw in members:
        member = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
        thread_id, _, run_id = member.partition(" ")
        if thread_id and run_id and await script(
                keys=[keys.scheduled_runs(thread_id), keys.run(thread_id, run_id), keys.cancel(thread_id, run_id),
                      keys.pending(thread_id)], args=[run_id]):
            await queue.notify(thread_id)
            moved += 1
        await client.zrem(keys.scheduled, raw)
    return moved


async def promote_forever(client: redis.asyncio.Redis, keys: ServiceKeys, queue: WorkQueue,
                          stopping: asyncio.Event) -> None:
    """A worker's promote step, every PROMOTE_EVERY_S until `stopping` (Redis outages are waited out)."""
    while not stopping.is_set():
        try:
            await promote_due(client, keys, queue)
        except REDIS_DOWN:
            pass  # the worker's own loop reports the outage; scheduled runs wait for Redis like the rest
        except Exception:  # a damaged entry must not stop every later scheduled run
            log.exception("promoting scheduled runs failed; trying again")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), PROMOTE_EVERY_S)
