"""A thread beyond its API handlers: its checkpointed state in the Agent Server's shapes, the thread options a
request may carry, its search, the end of a stateless run's thread, and a worker's fenced hold on it.

`supersteps`, `extract` and `values` are honoured as langgraph-api does them; `ttl` is refused (expiry is the
operator's `--retention`). A search goes through the thread index and, without an auth filter, first gives a
record to the CLI sessions the service has not seen. A stateless run's thread goes when its run ends; the run's
record and events stay as long as their readers may read them. A worker holding a thread's lease writes only
through scripts that check its fence number, so a holder that lost its lease without noticing is refused
instead of interleaving its writes with the new holder's.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

import redis.asyncio
from langgraph.types import Command, Send, StateSnapshot, StateUpdate

from reactgraph.errors import ReactGraphError
from reactgraph.graph.sessions import adrop_session_items
from reactgraph.service.assistants.catalogue import Assistants
from reactgraph.service.auth import matches
from reactgraph.service.connections import REDIS_DOWN
from reactgraph.service.events import EVENTS_KEPT_S, MAX_EVENT_BYTES, MAX_EVENTS_PER_RUN, bounded
from reactgraph.service.index import LEGACY_OWNER, Query, Source, filter_terms, term_of
from reactgraph.service.keys import ServiceKeys
from reactgraph.service.records import ServiceRecords, ThreadRecord, decode_thread, thread_entry, thread_terms
from reactgraph.service.wire import BadRequest, field, plain

MAX_ROLLED_BACK_STEPS = 500  # checkpoints of one run looked past to find the state before it


def checkpoint_of(config: Any) -> dict[str, Any] | None:
    if not config:
        return None
    configurable = config.get("configurable", {})
    return {"thread_id": configurable.get("thread_id"), "checkpoint_ns": configurable.get("checkpoint_ns", ""),
            "checkpoint_id": configurable.get("checkpoint_id"), "checkpoint_map": configurable.get("checkpoint_map")}


def interrupts_of(interrupts: Any) -> list[dict[str, Any]]:
    """Interrupts as a thread's state and record show them: `{"id", "value"}`, and `response_schema` (the answer
    it waits for) when the graph gave one — as langgraph-api does (its streams carry `response_schema: null`)."""
    return [{"id": i.id, "value": plain(i.value),
             **({"response_schema": plain(i.response_schema)} if getattr(i, "response_schema", None) else {})}
            for i in interrupts]


def thread_state(snapshot: StateSnapshot) -> dict[str, Any]:
    """What `GET /threads/{id}/state` answers (langgraph-sdk's `ThreadState`)."""
    tasks = [{"id": t.id, "name": t.name, "path": plain(list(t.path)), "error": str(t.error) if t.error else None,
              "interrupts": interrupts_of(t.interrupts), "checkpoint": None, "state": None,
              "result": plain(t.result) if getattr(t, "result", None) is not None else None}
             for t in snapshot.tasks]
    checkpoint, parent = checkpoint_of(snapshot.config), checkpoint_of(snapshot.parent_config)
    return {"values": plain(snapshot.values), "next": list(snapshot.next), "tasks": tasks,
            "checkpoint": checkpoint, "metadata": plain(snapshot.metadata or {}),
            "created_at": snapshot.created_at, "parent_checkpoint": parent,
            "interrupts": interrupts_of(snapshot.interrupts),
            # the Agent Server's older flat fields, still read by some clients
            "checkpoint_id": (checkpoint or {}).get("checkpoint_id"),
            "parent_checkpoint_id": (parent or {}).get("checkpoint_id")}


def thread_status_after(snapshot: StateSnapshot, run_status: str) -> str:
    """idle, interrupted (waiting on an interrupt or before a node) or error, once a run has ended."""
    if run_status == "error":
        return "error"
    return "interrupted" if snapshot.next or snapshot.interrupts else "idle"


def interrupts_by_task(snapshot: StateSnapshot) -> dict[str, Any]:
    """The thread record's `interrupts`: each waiting task's, by task id (as langgraph-api keeps them)."""
    return {task.id: interrupts_of(task.interrupts) for task in snapshot.tasks if task.interrupts}


async def thread_after_run(graph: Any, thread_id: str, run_status: str, *, rolled_back: str | None = None
                           ) -> tuple[str, dict[str, Any]]:
    """(the thread's status, its `interrupts`) once a run has ended with `run_status`, from its checkpoints.
    `rolled_back`: as they will be once that run's checkpoints are deleted — its own are passed over."""
    config = {"configurable": {"thread_id": thread_id}}
    snapshot = await graph.aget_state(config)
    if rolled_back is not None and (snapshot.metadata or {}).get("run_id") == rolled_back:
        earlier = None
        async for older in graph.aget_state_history(config, limit=MAX_ROLLED_BACK_STEPS):
            if (older.metadata or {}).get("run_id") != rolled_back:
                earlier = older
                break
        if earlier is None:  # the run made all of them (or more than are looked at): nothing is left
            return ("error" if run_status == "error" else "idle"), {}
        snapshot = earlier
    return thread_status_after(snapshot, run_status), interrupts_by_task(snapshot)


# The fields of a thread a search may `select` (the Agent Server's ThreadSelectField); the whole record by default.
THREAD_FIELDS = ("thread_id", "created_at", "updated_at", "state_updated_at", "metadata", "config", "context",
                 "status", "values", "interrupts")


def selected_fields(body: dict[str, Any], fields: tuple[str, ...] = THREAD_FIELDS,
                    kind: str = "thread") -> tuple[str, ...] | None:
    """The body's `select`, in its order, when every name is one of `fields` (a 422 naming the others if not)."""
    select = body.get("select")
    if select is None:
        return None
    if not isinstance(select, list) or not all(isinstance(name, str) for name in select):
        raise BadRequest(422, f"'select' must be a list of {kind} field names")
    if unknown := sorted(set(select) - set(fields)):
        raise BadRequest(422, f"'select' cannot name {', '.join(map(repr, unknown))}; the fields are "
                              f"{', '.join(fields)}")
    return tuple(select)


MAX_SUPERSTEPS = 100
MAX_UPDATES = 100  # per superstep
MAX_EXTRACT_PATHS = 10  # as langgraph-api
EXTRACTABLE = ("values", "metadata", "config", "interrupts")
_ALIAS = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]{0,63}")
_STEP = re.compile(r"\.|\[")
# A thread's own fields: an extract alias may not shadow one (langgraph-api refuses them too).
RECORD_FIELDS = frozenset({"thread_id", "created_at", "updated_at", "state_updated_at", "metadata", "config",
                           "status", "values", "interrupts", "error", "extracted", "ttl"})


def refuse_ttl(body: Mapping[str, Any]) -> None:
    if body.get("ttl") is not None:
        raise BadRequest(422, "'ttl' is refused: threads expire by the operator's retention setting "
                              "(reactgraph serve --retention), not per thread")


def supersteps(body: Mapping[str, Any]) -> list[list[StateUpdate]] | None:
    """`supersteps` as LangGraph's bulk update takes them (None: none given), or a 422 naming what is wrong."""
    steps = field(body, "supersteps", list)
    if not steps:
        return None
    if len(steps) > MAX_SUPERSTEPS:
        raise BadRequest(422, f"'supersteps' may hold at most {MAX_SUPERSTEPS} supersteps, got {len(steps)}")
    found = []
    for n, step in enumerate(steps):
        updates = field(step, "updates", list) if isinstance(step, dict) else None
        if not updates or len(updates) > MAX_UPDATES:
            raise BadRequest(422, f"'supersteps[{n}]' must be {{\"updates\": [...]}} with 1 to {MAX_UPDATES} "
                                  "updates")
        found.append([_update(update, f"supersteps[{n}].updates[{i}]") for i, update in enumerate(updates)])
    return found


def _update(update: Any, where: str) -> StateUpdate:
    if not isinstance(update, dict):
        raise BadRequest(422, f"'{where}' must be an object with values (or command) and as_node")
    as_node = field(update, "as_node", str)
    command = field(update, "command", dict)
    if command is not None:
        if not set(command) <= {"update", "resume", "goto"}:
            raise BadRequest(422, f"'{where}.command' takes update, resume, goto")
        goto = command.get("goto")
        goto = [goto] if goto is not None and not isinstance(goto, list) else goto
        return StateUpdate(Command(update=command.get("update"), resume=command.get("resume"),  # type: ignore[arg-type]
                                   goto=[g if isinstance(g, str) else Send(g["node"], g.get("input")) for g in goto]
                                   if goto else ()), as_node)
    values = update.get("values")
    if values is not None and not isinstance(values, dict | list):
        raise BadRequest(422, f"'{where}.values' must be an object (or a list of them), not {type(values).__name__}")
    return StateUpdate(cast(Any, values), as_node)  # a list of updates too, as LangGraph's update_state takes


async def apply_supersteps(graph: Any, thread_id: str, steps: list[list[StateUpdate]]) -> None:
    """Write `steps` to the thread's checkpoints; what LangGraph refuses is a 422 naming it."""
    try:
        await graph.abulk_update_state({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}, steps)
    except REDIS_DOWN:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever LangGraph refuses in the updates (InvalidUpdateError, …)
        reason = (str(exc).splitlines() or [type(exc).__name__])[0][:300]
        raise BadRequest(422, f"'supersteps' could not be applied: {reason}") from None


def extract_paths(body: Mapping[str, Any]) -> dict[str, str] | None:
    """`extract` ({alias: path}) checked as langgraph-api checks it, or None when not given."""
    extract = field(body, "extract", dict)
    if not extract:
        return None
    if len(extract) > MAX_EXTRACT_PATHS:
        raise BadRequest(422, f"'extract' takes at most {MAX_EXTRACT_PATHS} paths, got {len(extract)}")
    for alias, path in extract.items():
        if not _ALIAS.fullmatch(alias) or alias in RECORD_FIELDS:
            raise BadRequest(422, f"'extract' key {alias[:80]!r} must be an identifier that is no thread field")
        if not isinstance(path, str) or _STEP.split(path)[0] not in EXTRACTABLE:
            raise BadRequest(422, f"'extract' path for {alias!r} must start with one of {', '.join(EXTRACTABLE)}")
    return extract


def extracted(record: Mapping[str, Any], paths: Mapping[str, str]) -> dict[str, Any]:
    """Each alias's value at its path in the thread (`values.messages[-1].content`), None where it leads nowhere."""
    return {alias: _at(record, path) for alias, path in paths.items()}


def _at(record: Mapping[str, Any], path: str) -> Any:
    parts = _STEP.split(path)
    current: Any = record.get(parts[0])
    for part in parts[1:]:
        if current is None:
            return None
        if part.endswith("]"):
            try:
                current = current[int(part[:-1])] if isinstance(current, list) else None
            except (ValueError, IndexError):
                return None
        elif part:
            current = current.get(part) if isinstance(current, dict) else None
    return current


def values_match(values: Any, wanted: Mapping[str, Any]) -> bool:
    """Whether a thread's values hold each key of `wanted` with that value (search and count's `values`)."""
    return not wanted or (isinstance(values, dict) and all(values.get(k) == v for k, v in wanted.items()))


def refuse_include(include: str | None) -> None:
    """`threads.get(include=…)`: langgraph-api's only one is `ttl`, which threads here do not have."""
    if include:
        raise BadRequest(422, f"'include' cannot be {include[:80]!r}: threads here have no ttl (they expire by the "
                              "operator's retention setting)")


DECODE_ON_LOOP = 16  # more records than this are decoded on a worker thread


def thread_query(allowed: dict[str, Any] | None, metadata: dict[str, Any], status: str | None,
                 ids: list[str] | None, sort: str, newest_first: bool,
                 check_async: Callable[[ThreadRecord], Awaitable[bool]] | None = None,
                 prepare: Callable[[list[ThreadRecord]], Awaitable[None]] | None = None) -> Query[ThreadRecord]:
    terms, exact = filter_terms(allowed)
    for name, value in metadata.items():
        term = term_of(name, value)
        exact = exact and term is not None
        terms += [term] if term else []
    if status:
        terms.append(f"st={status}")

    def check(record: ThreadRecord) -> bool:
        held: Any = record.get("metadata")
        held = held if isinstance(held, dict) else {}
        return ((not status or record.get("status") == status)
                and all(held.get(k) == v for k, v in metadata.items()) and matches(held, allowed))

    return Query(sorted(set(terms)) or ["all"], check, exact and check_async is None, thread_terms, sort, newest_first,
                 ids, check_async, prepare)


def thread_source(records: ServiceRecords) -> Source[ThreadRecord]:
    read: dict[str, Any] = {}  # each id's record as last read, for a repair to check it is still the same

    async def load(ids: list[str]) -> list[ThreadRecord | None]:
        pipe = records.client.pipeline(transaction=False)
        for thread_id in ids:
            pipe.get(records.keys.thread(thread_id))
        raws = await pipe.execute()
        read.update(zip(ids, raws, strict=True))

        def decoded() -> list[ThreadRecord | None]:
            # as a GET reads it: a damaged one (metadata no object, say) is passed over with a log line
            found = [decode_thread(raw, records.keys.thread(i)) for i, raw in zip(ids, raws, strict=True)]
            return [r if r is not None and r["thread_id"] == i else None for i, r in zip(ids, found, strict=True)]

        return await asyncio.to_thread(decoded) if len(ids) > DECODE_ON_LOOP else decoded()

    async def repair(thread_id: str, record: ThreadRecord | None) -> None:
        await records.indexed.repair(thread_id, read.get(thread_id), record)

    return Source(records.indexed.index, load, repair)


ADOPTION_BUDGET_S = 2.0  # what one search spends giving records to the CLI's sessions; the rest wait for the next
ORDERED_AT_ONCE = 200  # sessions whose newest checkpoint is asked for concurrently


async def cli_sessions(records: ServiceRecords, saver: Any, record_of: Any) -> None:
    """Give a record (`record_of(thread_id)`) to the sessions that have checkpoints and none yet, the most recently
    written first, for up to ADOPTION_BUDGET_S: a session just asked from the CLI is on the search's first page even
    when a database holds thousands of sessions this service never saw (those are taken in over later searches)."""
    ids = list(await saver.athread_ids())
    index = records.indexed.index
    missing: list[str] = []
    for start in range(0, len(ids), 1000):
        batch = ids[start:start + 1000]
        known = await records.client.zmscore(f"{index.base}u:all", batch)
        missing += [i for i, score in zip(batch, known, strict=True) if score is None]
    deadline = asyncio.get_running_loop().time() + ADOPTION_BUDGET_S
    for thread_id in await _newest_first(saver, missing):
        await record_of(thread_id)
        if asyncio.get_running_loop().time() > deadline:
            break


async def _newest_first(saver: Any, thread_ids: list[str]) -> list[str]:
    """The threads by their newest checkpoint, newest first (checkpoint ids are time-ordered UUIDs)."""
    if len(thread_ids) < 2:
        return thread_ids
    newest: list[str] = []
    for start in range(0, len(thread_ids), ORDERED_AT_ONCE):
        chunk = thread_ids[start:start + ORDERED_AT_ONCE]
        found = await asyncio.gather(*(saver.acheckpoint_ids({"configurable": {"thread_id": t, "checkpoint_ns": ""}},
                                                              limit=1) for t in chunk))
        newest += [ids[0] if ids else "" for ids in found]
    order = sorted(range(len(thread_ids)), key=lambda k: newest[k], reverse=True)
    return [thread_ids[k] for k in order]


async def backfill(records: ServiceRecords) -> int:
    """Index the threads written before the index (once per service: a marker says it is done), 500 at a time,
    each unless it has an entry already (a newer write's). How many were read."""
    index = records.indexed.index
    marker = f"{index.base}backfilled"
    if await records.client.exists(marker):
        return 0
    done, source = 0, thread_source(records)
    while raw := await records.client.zrange(records.keys.threads, done, done + 499):
        batch = [i.decode() if isinstance(i, bytes) else str(i) for i in raw]
        pipe = records.client.pipeline(transaction=False)
        for thread_id, record in zip(batch, await source.load(batch), strict=True):
            if record is not None:
                await index.backfill_in(pipe, thread_id, thread_entry(record, LEGACY_OWNER))
        await pipe.execute()
        done += len(batch)
    await records.client.set(marker, "1")
    return done


async def forget_temporary_thread(records: ServiceRecords, assistants: Assistants, thread_id: str) -> bool:
    """Delete the thread of its ended temporary run before the run's end is told (who sees the end sees it gone);
    False (kept) when another run waits on it."""
    keys, client = records.keys, records.client
    if await client.llen(keys.pending(thread_id)):
        return False  # somebody queued a run on it by its id: that run's thread is no longer temporary
    await assistants.checkpointer.adelete_thread(thread_id)
    await adrop_session_items(assistants.store, thread_id)
    await records.indexed.drop(thread_id)  # its record and index entries, together
    await client.delete(keys.runs(thread_id), keys.title(thread_id))
    await client.zrem(keys.threads, thread_id)
    await client.zrem(keys.unswept, thread_id)
    return True


async def expire_run(records: ServiceRecords, thread_id: str, run_id: str) -> None:
    """Once the run's end is told: its record and cancel mark go when its events do, and the thread's fence."""
    keys = records.keys
    for key in (keys.run(thread_id, run_id), keys.cancel(thread_id, run_id), keys.fence(thread_id)):
        await records.client.expire(key, EVENTS_KEPT_S)


# KEYS: fence, active, pending, attempts. Returns {run id, resumed 0|1, attempt} or {} (nothing to do), or -1
# (fenced out). The attempt is counted here, in the step that hands the run out, so a worker that dies at any
# point after it has still used one.
_NEXT_RUN = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local active = redis.call('GET', KEYS[2])
if active then return {active, 1, redis.call('HINCRBY', KEYS[4], active, 1)} end
local id = redis.call('LPOP', KEYS[3])
if not id then return {} end
redis.call('SET', KEYS[2], id)
redis.call('HSET', KEYS[4], id, 1)
return {id, 0, 1}
"""
# KEYS: fence, active, attempts. ARGV: fence. A run handed back by a worker shutting down has not crashed it: the
# attempt it was given is not counted against it.
_HAND_BACK = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local active = redis.call('GET', KEYS[2])
if active and tonumber(redis.call('HGET', KEYS[3], active) or '0') > 1 then
  redis.call('HINCRBY', KEYS[3], active, -1)
end
return 1
"""
# KEYS: fence, events. ARGV: fence, event, data, max length.
_ADD_EVENT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
return redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*', 'e', ARGV[2], 'd', ARGV[3])
"""
# KEYS: fence, active, run, events, attempts. ARGV: fence, run id, run json, seconds to keep the events, max length.
_END_RUN = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
if redis.call('GET', KEYS[2]) == ARGV[2] then redis.call('DEL', KEYS[2]) end
redis.call('HDEL', KEYS[5], ARGV[2])
if ARGV[3] ~= '' then redis.call('SET', KEYS[3], ARGV[3]) end
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[5], '*', 'e', '__end__', 'd', '')
redis.call('EXPIRE', KEYS[4], ARGV[4])
return 1
"""


class FencedOut(ReactGraphError, RuntimeError):
    """Another worker took the thread over: this one must stop writing to it."""


class ThreadHold:
    """One worker's hold on one thread (under its session lease), with the fence number it was given."""

    def __init__(self, client: redis.asyncio.Redis, keys: ServiceKeys, thread_id: str, fence: str,
                 max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self.client, self.keys, self.thread_id, self.fence = client, keys, thread_id, fence
        self.max_event_bytes = max_event_bytes
        self._next = client.register_script(_NEXT_RUN)
        self._add = client.register_script(_ADD_EVENT)
        self._end = client.register_script(_END_RUN)
        self._hand_back = client.register_script(_HAND_BACK)

    @classmethod
    async def take(cls, client: redis.asyncio.Redis, keys: ServiceKeys, thread_id: str,
                   max_event_bytes: int = MAX_EVENT_BYTES) -> ThreadHold:
        """Called with the thread's lease held: a new fence number, so earlier holders are refused from now."""
        fence = await client.incr(keys.fence(thread_id))
        return cls(client, keys, thread_id, str(fence), max_event_bytes)

    async def next_run(self) -> tuple[str, bool, int] | None:
        """The run to execute now: (run id, resumed, attempt) — the active run left by a holder that died is
        resumed first, its attempt counting how many holders have taken it — or None when nothing waits."""
        k = self.keys
        answer = await self._next(keys=[k.fence(self.thread_id), k.active(self.thread_id), k.pending(self.thread_id),
                                        k.attempts(self.thread_id)], args=[self.fence])
        if answer == -1:
            raise FencedOut(f"thread {self.thread_id}: another worker holds it now")
        if not answer:
            return None
        run_id = answer[0].decode() if isinstance(answer[0], bytes) else str(answer[0])
        return run_id, bool(int(answer[1])), int(answer[2])

    async def hand_back(self) -> None:
        """The worker is shutting down with the active run unfinished: its attempt does not count (it did not
        crash); the next holder resumes it."""
        k = self.keys
        await self._hand_back(keys=[k.fence(self.thread_id), k.active(self.thread_id), k.attempts(self.thread_id)],
                              args=[self.fence])

    async def add_event(self, run_id: str, event: str, data: str) -> str:
        """Append an event (its data bounded: see events.bounded) to the run's stream; its entry id."""
        answer = await self._add(keys=[self.keys.fence(self.thread_id), self.keys.events(self.thread_id, run_id)],
                                 args=[self.fence, event, bounded(event, data, self.max_event_bytes),
                                       MAX_EVENTS_PER_RUN])
        if answer == -1:
            raise FencedOut(f"thread {self.thread_id}: another worker holds it now")
        return answer.decode() if isinstance(answer, bytes) else str(answer)

    async def end_run(self, run_id: str, run_json: str) -> None:
        """Store the run's final record, close its event stream and free the thread for its next run."""
        k = self.keys
        answer = await self._end(keys=[k.fence(self.thread_id), k.active(self.thread_id), k.run(self.thread_id, run_id),
                                       k.events(self.thread_id, run_id), k.attempts(self.thread_id)],
                                 args=[self.fence, run_id, run_json, EVENTS_KEPT_S, MAX_EVENTS_PER_RUN])
        if answer == -1:
            raise FencedOut(f"thread {self.thread_id}: another worker holds it now")
