"""The work queue: "thread T has work" tokens on a Redis stream read by the workers' consumer group, the sweep
that gives a lost token back, and the promote step of runs scheduled with `after_seconds`.

Tokens name threads, not runs: the thread's lease decides who runs (reactgraph/service/worker.py). No accepted
run depends on the stream alone: it is never trimmed, every thread given work is in the `with_work` index
(written before its run is stored), and the sweep re-notifies a thread whose runs wait without a token. A
scheduled run waits in its thread's `scheduled` set rather than in `pending` until a promoter moves it there,
in one script on the thread's keys (Cluster-safe; a promoter that dies halfway leaves an entry the next drops).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import redis.asyncio

from reactgraph.service.connections import REDIS_DOWN
from reactgraph.service.keys import ServiceKeys
from reactgraph.service.records import RunRecord, ServiceRecords, encoded, now_iso
from reactgraph.service.wire import redis_text

log = logging.getLogger("reactgraph.service")
GROUP = "workers"
_MAX_THREAD_ID = 256
SWEEP_BATCH = 500  # threads looked at per round trip of the sweep
SWEEP_EVERY_S = 60.0  # how often the workers (one of them at a time) look for lost tokens
SWEEP_GRACE_S = 10.0  # a thread given work this recently is left alone: its token may not be written yet
SWEEP_EVERY_ENV, SWEEP_GRACE_ENV = "REACTGRAPH_TOKEN_SWEEP_S", "REACTGRAPH_TOKEN_SWEEP_GRACE_S"

# KEYS: with_work. ARGV: thread id, the score it was read with. Drop the thread from the index unless it was given
# work again since it was read (its score then moved on).
_DROP_IF_UNCHANGED = """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) == tonumber(ARGV[2]) then return redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0
"""


def sweep_settings() -> tuple[float, float]:
    """(every, grace) in seconds: $REACTGRAPH_TOKEN_SWEEP_S and $REACTGRAPH_TOKEN_SWEEP_GRACE_S, else the defaults;
    a ValueError with one line naming the variable when one is not a number of seconds from 0 to a day."""
    found = []
    for name, default, low in ((SWEEP_EVERY_ENV, SWEEP_EVERY_S, 0.1), (SWEEP_GRACE_ENV, SWEEP_GRACE_S, 0.0)):
        raw = os.environ.get(name, "").strip()
        try:
            value = float(raw) if raw else default
        except ValueError:
            value = -1.0
        if not low <= value <= 86_400:
            raise ValueError(f"{name}={raw[:40]!r} must be a number of seconds from {low:g} to 86400")
        found.append(value)
    return found[0], found[1]


class WorkQueue:
    def __init__(self, client: redis.asyncio.Redis, keys: ServiceKeys, consumer: str = "api") -> None:
        self.client, self.keys, self.consumer = client, keys, consumer
        self._claim_from = "0-0"  # where the next claim starts: every idle token gets its turn, none starves another
        self._drop = client.register_script(_DROP_IF_UNCHANGED)

    async def ensure_group(self) -> None:
        try:
            await self.client.xgroup_create(self.keys.queue, GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def mark(self, thread_id: str) -> None:
        """Put the thread in the index of threads with work (before its run is stored: see the module docstring)."""
        await self.client.zadd(self.keys.with_work, {thread_id: time.time() * 1000})

    async def notify(self, thread_id: str) -> None:
        """A token for the thread, remembered as its latest (the sweep checks that it still exists)."""
        pipe = self.client.pipeline(transaction=False)
        pipe.zadd(self.keys.with_work, {thread_id: time.time() * 1000})
        pipe.xadd(self.keys.queue, {"t": thread_id})
        _marked, entry = await pipe.execute()
        await self.client.set(self.keys.queued(thread_id), entry)

    async def read(self, count: int, *, block_ms: int) -> list[tuple[str, str]]:
        """New tokens for this consumer: (entry id, thread id)."""
        try:
            answer: Any = await self.client.xreadgroup(GROUP, self.consumer, {self.keys.queue: ">"}, count=count,
                                                  block=block_ms)
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            await self.ensure_group()  # the queue key was deleted (FLUSHDB, retention): make it again
            return []
        return _tokens(answer[0][1] if answer else [])

    async def claim_idle(self, idle_s: float, count: int) -> list[tuple[str, str]]:
        """Tokens left unacknowledged for `idle_s` by any consumer (a holder that died, a busy thread), walking the
        pending entries from where the last claim stopped, so that a set of tokens claimed again and again (a thread
        busy for long) cannot keep the others waiting."""
        try:
            answer: Any = await self.client.xautoclaim(self.keys.queue, GROUP, self.consumer,
                                                  min_idle_time=max(1, int(idle_s * 1000)),
                                                  start_id=self._claim_from, count=count)
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            return []
        cursor = answer[0] if answer else b"0-0"
        self._claim_from = cursor.decode() if isinstance(cursor, bytes) else str(cursor or "0-0")
        return _tokens(answer[1] if len(answer) > 1 else [])

    async def leave(self) -> None:
        """Remove this consumer from the group if it holds no token (a clean exit), so the group's consumer list
        does not grow with every worker ever started; a consumer with tokens stays for others to claim them."""
        summary: Any = await self.client.xpending(self.keys.queue, GROUP)
        consumers = {(c["name"].decode() if isinstance(c["name"], bytes) else c["name"]): int(c["pending"])
                     for c in (summary or {}).get("consumers") or []}
        if consumers.get(self.consumer, 0) == 0:
            await self.client.xgroup_delconsumer(self.keys.queue, GROUP, self.consumer)

    async def ack(self, *entry_ids: str) -> None:
        """Done with these tokens: acknowledged and gone from the stream, in one round trip."""
        if entry_ids:
            pipe = self.client.pipeline(transaction=False)
            pipe.xack(self.keys.queue, GROUP, *entry_ids)
            pipe.xdel(self.keys.queue, *entry_ids)
            await pipe.execute()

    async def restore_lost_tokens(self, *, grace_s: float = SWEEP_GRACE_S) -> dict[str, int]:
        """One pass of the sweep (see the module docstring): {"renotified": n, "dropped": m, "looked_at": k}.
        It pages through the index by score, so what it drops or re-notifies (which moves a thread's score on)
        does not shift the pages."""
        done = {"renotified": 0, "dropped": 0, "looked_at": 0}
        newest, low, seen_at_low = (time.time() - grace_s) * 1000, "-inf", set[str]()
        while True:
            page: Any = await self.client.zrangebyscore(self.keys.with_work, low, newest, start=0,
                                                        num=SWEEP_BATCH + len(seen_at_low), withscores=True)
            batch = [(thread, float(score)) for member, score in page
                     if (thread := redis_text(member)) not in seen_at_low]
            if not batch:
                return done
            await self._sweep_batch(batch, done)
            done["looked_at"] += len(batch)
            last = batch[-1][1]
            seen_at_low = {thread for thread, score in batch if score == last} | (
                seen_at_low if repr(last) == low else set())
            low = repr(last)

    async def _sweep_batch(self, batch: list[tuple[str, float]], done: dict[str, int]) -> None:
        k, pipe = self.keys, self.client.pipeline(transaction=False)
        for thread_id, _score in batch:
            pipe.exists(k.active(thread_id))
            pipe.llen(k.pending(thread_id))
            pipe.get(k.queued(thread_id))
        answers = await pipe.execute()
        waiting = []
        for index, (thread_id, score) in enumerate(batch):
            active, pending, entry = answers[3 * index: 3 * index + 3]
            if active or pending:
                waiting.append((thread_id, redis_text(entry) if entry else "0-0"))
            elif await self._drop(keys=[k.with_work], args=[thread_id, repr(score)]):
                done["dropped"] += 1
        if not waiting:
            return
        check = self.client.pipeline(transaction=False)
        for _thread_id, entry in waiting:
            check.xrange(k.queue, entry, entry, count=1)
        for (thread_id, _entry), found in zip(waiting, await check.execute(), strict=True):
            if not found:  # its runs wait and no token says so: it would never be run
                await self.notify(thread_id)
                done["renotified"] += 1


async def sweep_lost_tokens_forever(queue: WorkQueue, stopping: asyncio.Event, every_s: float = SWEEP_EVERY_S,
                                    grace_s: float = SWEEP_GRACE_S) -> None:
    """Run `restore_lost_tokens` every `every_s` in one worker at a time (a lock that expires with the interval)."""
    lock = f"{queue.keys.prefix}token-sweeper"
    while not stopping.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), timeout=every_s)
        if stopping.is_set():
            return
        try:
            if await queue.client.set(lock, uuid.uuid4().hex, nx=True, px=int(every_s * 1000)):
                done = await queue.restore_lost_tokens(grace_s=grace_s)
                if done["renotified"]:
                    log.warning("work queue: %(renotified)d thread(s) with waiting runs had lost their token and "
                                "were notified again (%(looked_at)d looked at)", done)
        except (redis.RedisError, OSError) as exc:  # retried at the next interval; the worker goes on
            log.warning("work queue sweep failed: %s", str(exc).splitlines()[0][:200] if str(exc) else exc)


def _tokens(entries: list) -> list[tuple[str, str]]:
    found = []
    for raw_id, fields in entries:
        if not fields:  # deleted while pending
            continue
        entry = raw_id.decode() if isinstance(raw_id, bytes) else raw_id
        thread = fields.get(b"t", fields.get("t"))
        thread = thread.decode("utf-8", errors="replace") if isinstance(thread, bytes) else thread
        if isinstance(thread, str) and 0 < len(thread) <= _MAX_THREAD_ID:
            found.append((entry, thread))
    return found


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


async def schedule_run(records: ServiceRecords, record: RunRecord, after_s: float) -> tuple[bool, list[str]]:
    """Store `record` to start `after_s` seconds from now, under its multitask strategy as records.create_run
    does: (created, run ids ahead of it)."""
    thread_id, run_id, keys = record["thread_id"], record["run_id"], records.keys
    due_ms = int((time.time() + after_s) * 1000)
    created, ahead = await records.create_run(record, due_ms=due_ms)
    if not created:
        return False, []
    await records.client.zadd(keys.scheduled, {f"{thread_id} {run_id}": due_ms})
    return True, ahead


async def cancel_scheduled(records: ServiceRecords, run: RunRecord, action: str) -> bool:
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
        current["status"], current["updated_at"] = "interrupted", now_iso()
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
