"""The service's thread and run records in Redis, and the counts of what each owner holds.

A record is a JSON object with the Agent Server's fields (ThreadRecord, RunRecord) that the API answers from and
the workers update. Redis content is untrusted input, so a record read back is checked (`decode_thread`,
`decode_run`) and one that is not ours is treated as absent, and logged. Each change that could race is one Lua
script on keys that share the thread's hash tag — a run created under its multitask strategy, started unless a
cancel came first, a thread's status replaced only if it is still the record read — and a thread record is
written with its index entries (reactgraph/service/index.py): in the same script on one Redis, right after it on
a Cluster (before it, for a create under a quota). The owner counts behind the `runs_in_flight` and
`store_items` quotas live here too: one script checks and adds, and what ended elsewhere (a run its worker
ended, an item that expired) is let go only once an owner's set is full.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, NotRequired, TypedDict, cast

import redis.asyncio

from reactgraph.service.index import INDEX_LUA, RecordIndex, check_fields, entry, index_tag, metadata_terms, term_of
from reactgraph.service.keys import ServiceKeys
from reactgraph.service.quotas import QuotaReached
from reactgraph.service.wire import decode_record, encoded

THREAD_STATUSES = ("idle", "busy", "interrupted", "error")
RUN_STATUSES = ("pending", "running", "error", "success", "timeout", "interrupted")
FINAL_RUN_STATUSES = ("error", "success", "timeout", "interrupted")
LATENCY_BUCKETS_S = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
STRATEGIES = ("reject", "enqueue", "interrupt", "rollback")

# Enqueue a run unless `reject` finds the thread busy (a run active, waiting, or waiting for its time): one atomic
# step, so two creates on an idle thread cannot both pass a `reject` check. Returns {created, ids ahead of it}.
# ARGV[5]: when the run is due (ms) for a run that waits for its time in `scheduled` (KEYS[5]), not in `pending`.
_CREATE_RUN = """
local busy = redis.call('EXISTS', KEYS[4]) == 1 or redis.call('LLEN', KEYS[3]) > 0 or redis.call('ZCARD', KEYS[5]) > 0
if busy and ARGV[4] == 'reject' then return {0} end
local ahead = redis.call('LRANGE', KEYS[3], 0, -1)
local active = redis.call('GET', KEYS[4])
if active then table.insert(ahead, 1, active) end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
if ARGV[5] == '' then redis.call('RPUSH', KEYS[3], ARGV[2]) else redis.call('ZADD', KEYS[5], ARGV[5], ARGV[2]) end
local result = {1}
for _, id in ipairs(ahead) do table.insert(result, id) end
return result
"""

# KEYS: cancel mark, run. Store the run's `running` record unless a cancel was asked for.
_START_RUN = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[2], ARGV[1])
return 1
"""

# KEYS: pending, cancel mark, active. ARGV: run id, action. Mark the run cancelled if it waits (taken off the
# queue: "pending") or is being run ("active"); a run that has ended is left as it is ("done").
_REQUEST_CANCEL = """
if redis.call('LREM', KEYS[1], 0, ARGV[1]) > 0 then
  redis.call('SET', KEYS[2], ARGV[2], 'EX', 86400)
  return 'pending'
end
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return 'done' end
redis.call('SET', KEYS[2], ARGV[2], 'EX', 86400)
return 'active'
"""

# KEYS: thread, cancel mark of run ARGV[3], pending, active. Replace the thread record ARGV[1] by ARGV[2] (0: it
# changed meanwhile, read it again) if ARGV[4] holds (else -1): `queued` — the run, just created, still waits or
# runs; `started` — the run was not cancelled first; `freed` — the run, cancelled, is still the one its worker holds
# and no run waits after it; `stopped` — no run waits after it (the next one is the thread's work: it stays busy);
# `dequeued` — no run waits or runs (the cancelled one never started), and the record is the one read (and,
# checked by the caller, reads `busy`). ARGV[5..]: its index entry.
_SET_THREAD_IF = INDEX_LUA + """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local cancelled = redis.call('EXISTS', KEYS[2]) == 1
if ARGV[4] == 'queued' and not (redis.call('LPOS', KEYS[3], ARGV[3]) or redis.call('GET', KEYS[4]) == ARGV[3])
  then return -1 end
if ARGV[4] == 'dequeued' and (redis.call('LLEN', KEYS[3]) > 0 or redis.call('EXISTS', KEYS[4]) == 1) then return -1 end
if ARGV[4] == 'started' and cancelled then return -1 end
if ARGV[4] == 'freed' and (not cancelled or redis.call('LLEN', KEYS[3]) > 0
                           or redis.call('GET', KEYS[4]) ~= ARGV[3]) then return -1 end
if ARGV[4] == 'stopped' and redis.call('LLEN', KEYS[3]) > 0 then return -1 end
redis.call('SET', KEYS[1], ARGV[2])
if ARGV[5] then index_apply(ARGV[5], ARGV[6], ARGV[7], '') end
return 1
"""

# KEYS: a record. Replace it with ARGV[2] if it still is ARGV[1] (what the writer read).
_REPLACE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1
"""


class ThreadRecord(TypedDict):
    """A thread as it is stored and answered: langgraph_sdk.schema.Thread's fields (dates as ISO text).

    Required: what `decode_thread` checks on a record read back. Every other field is written with each record
    (`create_thread`) but taken as found when read (a record written before a field existed lacks it)."""

    thread_id: str
    created_at: str
    status: str  # one of THREAD_STATUSES
    updated_at: NotRequired[str]
    state_updated_at: NotRequired[str]
    metadata: NotRequired[dict[str, Any]]  # an object when present (checked)
    config: NotRequired[dict[str, Any]]
    interrupts: NotRequired[dict[str, Any]]  # task id → its interrupts
    error: NotRequired[Any]
    values: NotRequired[Any]  # in answers only: the thread's current values, read from its checkpoint
    extracted: NotRequired[dict[str, Any]]  # in a search's answer only: its `extract` paths
    title: NotRequired[str]  # in a search's answer only, when `select` names it: the first question (titles.py)


class RunKwargs(TypedDict, total=False):
    """What a run's graph is called with, stored with the run as plain JSON: written whole by
    run_request.run_kwargs from the request (checked there), read back from Redis as found — so no key is
    required, and the worker applies the run policy to `context` again."""

    input: Any
    command: dict[str, Any] | None  # resume, update, goto
    stream_mode: list[str]
    context: dict[str, Any]
    config: dict[str, Any]  # configurable (with the caller's and the graph's ids), recursion_limit, tags, …
    checkpoint_id: str | None
    stream_subgraphs: bool
    interrupt_before: list[str] | str | None  # node names, or "*"
    interrupt_after: list[str] | str | None
    subgraphs: bool  # the Agent Server records these with a run; kept as given
    resumable: bool
    webhook: None
    feedback_keys: None
    temporary: bool  # a stateless run whose thread goes with it
    durability: str  # run_request.RunOptions
    checkpoint_during: bool
    after_seconds: float
    strict_resume: bool


class RunRecord(TypedDict):
    """A run as it is stored, queued, executed and answered: langgraph_sdk.schema.Run's fields (dates as ISO text),
    with `kwargs`, what the graph is called with (reactgraph/service/run_request.py).

    Required: what `decode_run` checks on a record read back; the rest is written with every run (api_runs) but
    taken as found when read (the worker applies the run policy to its context again)."""

    run_id: str
    thread_id: str
    status: str  # one of RUN_STATUSES
    assistant_id: NotRequired[str]
    created_at: NotRequired[str]
    updated_at: NotRequired[str]
    metadata: NotRequired[dict[str, Any]]
    kwargs: NotRequired[RunKwargs]
    multitask_strategy: NotRequired[str]  # one of STRATEGIES
    langsmith_session_name: NotRequired[None]
    error: NotRequired[dict[str, str]]  # a failed run's cause: {"error", "message"}


def decode_thread(raw: str | bytes | None, key: str, strict: bool = False) -> ThreadRecord | None:
    """A thread record as its readers take it (wire.decode_record): its ids, dates and status strings, and its
    metadata an object, which filters and searches read into (a list there would fail every search)."""
    return cast("ThreadRecord | None",
                decode_record(raw, key, ("thread_id", "created_at", "status"), strict, objects=("metadata",)))


def decode_run(raw: str | bytes | None, key: str) -> RunRecord | None:
    """A run record as its readers take it (wire.decode_record): its ids and status strings."""
    return cast("RunRecord | None", decode_record(raw, key, ("run_id", "thread_id", "status")))


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def new_id() -> str:
    return str(uuid.uuid4())


class ServiceRecords:
    """Threads and runs of the service, under one key prefix of one Redis."""

    def __init__(self, client: redis.asyncio.Redis, keys: ServiceKeys | None = None) -> None:
        self.client = client
        self.keys = keys or ServiceKeys()
        self._create_run = client.register_script(_CREATE_RUN)
        self._start_run = client.register_script(_START_RUN)
        self._replace = client.register_script(_REPLACE)
        self._request_cancel = client.register_script(_REQUEST_CANCEL)
        self._set_thread_if = client.register_script(_SET_THREAD_IF)
        self.indexed = ThreadIndex(client, self.keys)  # the record's index entries are written with it

    # -- threads --------------------------------------------------------------------------------------------
    async def get_thread(self, thread_id: str, *, strict: bool = False) -> ThreadRecord | None:
        """The thread's record, None when there is none; `strict`: an UnreadableRecord when it is damaged."""
        key = self.keys.thread(thread_id)
        return decode_thread(await self.client.get(key), key, strict)

    async def put_thread(self, record: ThreadRecord, owner: str | None = None, limit: int | None = None,
                         *, updated_at: str | None = None) -> None:
        record["updated_at"] = updated_at or now_iso()
        await self.indexed.put(record, encoded(record, "thread record"), owner, limit)
        await self._touched(record["thread_id"])

    async def _touched(self, thread_id: str) -> None:
        """The thread's place in the indexes, by when it last changed."""
        stamp = {thread_id: time.time() * 1000}
        await self.client.zadd(self.keys.threads, stamp)
        await self.client.zadd(self.keys.unswept, stamp)

    async def create_thread(self, thread_id: str, metadata: dict[str, Any], owner: str | None = None,
                            limit: int | None = None, *, written: tuple[str, str] | None = None) -> ThreadRecord:
        """`written`: (created, last updated) of a thread that existed before its record (a CLI session's
        checkpoints), instead of now."""
        stamp = now_iso()
        created, updated = written or (stamp, stamp)
        record: ThreadRecord = {
            "thread_id": thread_id, "created_at": created, "updated_at": updated, "state_updated_at": updated,
            "metadata": metadata, "status": "idle", "config": {"configurable": {"thread_id": thread_id}},
            "interrupts": {}, "error": None}
        await self.put_thread(record, owner, limit, updated_at=updated)
        return record

    async def set_thread_status(self, thread_id: str, status: str, interrupts: dict[str, Any] | None = None
                                ) -> ThreadRecord | None:
        record = await self.get_thread(thread_id)
        if record is None:
            return None
        _set_status(record, status, interrupts)
        await self.put_thread(record)
        return record

    async def set_thread_status_if(self, thread_id: str, run_id: str, condition: str, status: str,
                                   interrupts: dict[str, Any] | None = None) -> bool:
        """`set_thread_status` in one step with a check of the run (see _SET_THREAD_IF): `queued` (the API,
        having created it, marks the thread busy while it still waits or runs), `started` (a worker that started
        it marks the thread busy unless it was cancelled first), `freed` (the API, cancelling it, shows the
        thread's status after it, unless another run waits or it has ended meanwhile), `stopped` (its worker,
        having stopped it, writes that status unless the API has already or another run waits) or `dequeued` (the
        API, having cancelled or deleted it before it started, shows the thread's status again unless another run
        waits or runs). All but `queued` and `started` change only a thread that reads `busy`. Whether it wrote."""
        key, k = self.keys.thread(thread_id), self.keys
        for _attempt in range(10):  # another write in between: read the record again
            raw = await self.client.get(key)
            record = decode_thread(raw, key)
            marks = condition in ("queued", "started")
            if raw is None or record is None or (not marks and record["status"] != "busy"):
                return False
            if condition == "queued" and record["status"] == "busy":
                return True  # already shown busy (a run ahead of it): nothing to write
            _set_status(record, status, interrupts)
            record["updated_at"] = now_iso()
            done = await self._set_thread_if(
                keys=[key, k.cancel(thread_id, run_id), k.pending(thread_id), k.active(thread_id)],
                args=[raw, encoded(record, "thread record"), run_id, condition, *self.indexed.status_args(record)])
            if done == 1:
                await self.indexed.after_replace(record)
                await self._touched(thread_id)
            if done != 0:
                return done == 1
        return False

    async def thread_ids(self, *, newest_first: bool = True, limit: int = 1000) -> list[str]:
        ids: Any = await self.client.zrange(self.keys.threads, 0, limit - 1, desc=newest_first)
        return [i.decode() if isinstance(i, bytes) else i for i in ids]

    async def delete_thread(self, thread_id: str) -> None:
        run_ids = await self.run_ids(thread_id, limit=10_000)
        await self.indexed.drop(thread_id)  # the record and its index entries, together
        keys = [key(thread_id) for key in (self.keys.runs, self.keys.pending, self.keys.active, self.keys.fence,
                                           self.keys.attempts, self.keys.queued, self.keys.scheduled_runs,
                                           self.keys.title)]
        for run_id in run_ids:
            keys += [self.keys.run(thread_id, run_id), self.keys.events(thread_id, run_id),
                     self.keys.cancel(thread_id, run_id)]
        for start in range(0, len(keys), 500):
            await self.client.delete(*keys[start:start + 500])
        await self.client.zrem(self.keys.threads, thread_id)
        await self.client.zrem(self.keys.unswept, thread_id)

    # -- runs -----------------------------------------------------------------------------------------------
    async def create_run(self, record: RunRecord, due_ms: int | None = None) -> tuple[bool, list[str]]:
        """Store and enqueue `record` on its thread under its multitask strategy — or, `due_ms` given, keep it in
        the thread's `scheduled` set until then (reactgraph/service/scheduled_runs.py): (created, run ids ahead)."""
        thread_id, run_id = record["thread_id"], record["run_id"]
        result = await self._create_run(
            keys=[self.keys.run(thread_id, run_id), self.keys.runs(thread_id), self.keys.pending(thread_id),
                  self.keys.active(thread_id), self.keys.scheduled_runs(thread_id)],
            args=[encoded(record, "run record"), run_id, int(time.time() * 1000),
                  record["multitask_strategy"], "" if due_ms is None else due_ms])
        ahead = [i.decode() if isinstance(i, bytes) else str(i) for i in result[1:]]
        return bool(result[0]), ahead

    async def get_run(self, thread_id: str, run_id: str) -> RunRecord | None:
        key = self.keys.run(thread_id, run_id)
        run = decode_run(await self.client.get(key), key)
        return run if run is None or (run["run_id"], run["thread_id"]) == (run_id, thread_id) else None

    async def put_run(self, record: RunRecord) -> None:
        record["updated_at"] = now_iso()
        await self.client.set(self.keys.run(record["thread_id"], record["run_id"]), encoded(record, "run record"))

    async def run_ids(self, thread_id: str, *, limit: int = 10, offset: int = 0) -> list[str]:
        ids: Any = await self.client.zrange(self.keys.runs(thread_id), offset, offset + limit - 1, desc=True)
        return [i.decode() if isinstance(i, bytes) else i for i in ids]

    async def list_runs(self, thread_id: str, *, limit: int = 10, offset: int = 0,
                        status: str | None = None) -> list[RunRecord]:
        runs = [await self.get_run(thread_id, run_id)
                for run_id in await self.run_ids(thread_id, limit=limit if status is None else 10_000,
                                                 offset=offset if status is None else 0)]
        found = [r for r in runs if r is not None and (status is None or r["status"] == status)]
        return found if status is None else found[offset:offset + limit]

    async def delete_run(self, thread_id: str, run_id: str) -> None:
        await self.client.lrem(self.keys.pending(thread_id), 0, run_id)
        await self.client.zrem(self.keys.runs(thread_id), run_id)
        await self.client.hdel(self.keys.attempts(thread_id), run_id)
        await self.client.delete(self.keys.run(thread_id, run_id), self.keys.events(thread_id, run_id),
                                 self.keys.cancel(thread_id, run_id))

    async def busy(self, thread_id: str) -> bool:
        return (await self.busy_many([thread_id]))[0]

    async def busy_many(self, thread_ids: list[str]) -> list[bool]:
        """Whether a run is being executed on each thread or waits for its turn there, in one round trip."""
        pipe = self.client.pipeline(transaction=False)
        for thread_id in thread_ids:
            pipe.exists(self.keys.active(thread_id))
            pipe.llen(self.keys.pending(thread_id))
        answers = await pipe.execute() if thread_ids else []
        return [bool(answers[2 * i] or answers[2 * i + 1]) for i in range(len(thread_ids))]

    # -- cancellation ---------------------------------------------------------------------------------------
    async def request_cancel(self, thread_id: str, run_id: str, action: str) -> str:
        """Ask for a run to stop: "active" (its worker will stop it), "pending" (taken off the queue here), or
        "done" (it had already ended)."""
        k = self.keys
        where = await self._request_cancel(keys=[k.pending(thread_id), k.cancel(thread_id, run_id),
                                                 k.active(thread_id)], args=[run_id, action])
        return where.decode() if isinstance(where, bytes) else str(where)

    async def cancel(self, thread_id: str, run_id: str, action: str) -> str:
        """`request_cancel`, and what the caller sees at once: the run `interrupted`, or gone for `rollback` (a
        running run's worker still stops it, then ends its record and event stream the same way)."""
        where = await self.request_cancel(thread_id, run_id, action)
        if where == "pending":
            await self.count("cancelled_before_start")
        if where == "done":
            return where
        if action == "rollback" and where == "pending":
            await self.delete_run(thread_id, run_id)
        elif action == "rollback":  # its events and cancel mark stay until its worker has stopped it
            await self.client.zrem(self.keys.runs(thread_id), run_id)
            await self.client.delete(self.keys.run(thread_id, run_id))
        else:
            await self._mark_interrupted(thread_id, run_id)
        return where

    async def _mark_interrupted(self, thread_id: str, run_id: str) -> None:
        """The run's record `interrupted` unless it has ended meanwhile (its worker's final record wins)."""
        key = self.keys.run(thread_id, run_id)
        for _attempt in range(10):  # a write of the worker in between: read it again
            raw = await self.client.get(key)
            run = decode_run(raw, key)
            if raw is None or run is None or run["status"] in FINAL_RUN_STATUSES:
                return
            run["status"], run["updated_at"] = "interrupted", now_iso()
            if await self._replace(keys=[key], args=[raw, encoded(run, "run record")]):
                return

    async def start_run(self, record: RunRecord) -> bool:
        """Store the run as `running` unless a cancel was asked for first (then False, and nothing written): a
        cancelled run never reads `running` again."""
        record["updated_at"] = now_iso()
        keys = [self.keys.cancel(record["thread_id"], record["run_id"]),
                self.keys.run(record["thread_id"], record["run_id"])]
        return bool(await self._start_run(keys=keys, args=[encoded(record, "run record")]))

    async def cancel_requested(self, thread_id: str, run_id: str) -> str | None:
        action = await self.client.get(self.keys.cancel(thread_id, run_id))
        action = action.decode() if isinstance(action, bytes) else action
        return action if action in ("interrupt", "rollback") else None

    # -- counters for /metrics (global keys: plain increments, one per event) --------------------------------
    async def count(self, name: str) -> None:
        await self.client.hincrby(self.keys.counters, name, 1)

    async def count_finished(self, status: str, latency_s: float) -> None:
        """A started run ended: its status, and its latency (created → ended) in the histogram's bucket."""
        bucket = next((f"{b:g}" for b in LATENCY_BUCKETS_S if latency_s <= b), "+Inf")
        pipe = self.client.pipeline(transaction=False)
        pipe.hincrby(self.keys.counters, f"finished_{status}", 1)
        pipe.hincrby(self.keys.counters, f"latency_le_{bucket}", 1)
        pipe.hincrbyfloat(self.keys.counters, "latency_sum", max(0.0, latency_s))
        await pipe.execute()


def _set_status(record: ThreadRecord, status: str, interrupts: dict[str, Any] | None) -> None:
    """The thread's status after a run, and its interrupts when given."""
    record["status"] = status
    if interrupts is not None:
        record["interrupts"] = interrupts


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


def thread_terms(record: ThreadRecord) -> list[str]:
    return [f"st={record.get('status')}", *metadata_terms(record.get("metadata"))]


def thread_entry(record: ThreadRecord, owner: str | None = None) -> str:
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

    async def put(self, record: ThreadRecord, text: str, owner: str | None = None, limit: int | None = None
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

    def status_args(self, record: ThreadRecord) -> list[str]:
        """What a script that replaces the record in place (records._SET_THREAD_IF) needs to index it too (one
        Redis); on a Cluster, nothing (`after_replace` indexes it)."""
        return [] if self.index.on_cluster else [self.index.base, record["thread_id"], thread_entry(record)]

    async def after_replace(self, record: ThreadRecord) -> None:
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

    async def repair(self, thread_id: str, raw: Any, record: ThreadRecord | None) -> None:
        """Set the entry of a thread a search read as `raw` (decoded: `record`, None if absent or unreadable)
        right, unless the record has changed since (on a Cluster, without that check)."""
        found = "" if record is None else thread_entry(record)
        if self.index.on_cluster:
            await self.index.apply(thread_id, found)
        else:
            await self._repair(keys=[self.keys.thread(thread_id), self.index.entries],
                               args=[self.index.base, thread_id, found, raw or ""])


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


async def create_counted(records: ServiceRecords, owner: str, limit: int | None, run: RunRecord,
                         store: Callable[[RunRecord], Awaitable[tuple[bool, list[str]]]] | None = None
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
