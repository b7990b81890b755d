"""A run's events: LangGraph's chunks as the Agent Server's events, written by the worker to the run's own Redis
stream, and read back by any API process — per run, per thread, and as the thread-centric (v3) protocol.

Events are named and shaped as langgraph-api sends them, so langgraph-sdk, `RemoteGraph` and Studio read them
unchanged. Entry ids are the SSE event ids: a client that reconnects with `Last-Event-ID` gets exactly the later
events from whichever process it reaches, and an `__end__` entry closes the run for its readers. An event over
MAX_EVENT_BYTES is replaced by a small one of the same name that says so; the run goes on. A thread's stream
reads all its runs in one blocking XREAD: runs follow one another, so ids rise from run to run. The v3
protocol maps lifecycle, values, updates (their interrupts as `input.requested`), custom, tasks and
checkpoints; its `messages` and `tools` channels get no events.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from typing import Any

import redis.asyncio
from langchain_core.messages import BaseMessage, BaseMessageChunk, message_chunk_to_message

from reactgraph.service.keys import ServiceKeys
from reactgraph.service.wire import BadRequest, dumps, redis_text

END = "__end__"
MAX_EVENTS_PER_RUN = 20_000  # approximate trim: a run streaming more keeps its newest events
EVENTS_KEPT_S = 3600  # a finished run's events can still be joined for this long
MAX_EVENT_BYTES = 2 * 1024 * 1024  # the default bound of one event's data (see the module docstring)
MAX_EVENT_BYTES_ENV = "REACTGRAPH_MAX_EVENT_BYTES"
EVENT_BYTES_RANGE = (1024, 64 * 1024 * 1024)  # what an operator may set it to
READ_OUTAGE_S = 10.0  # a reader waits this long for Redis to come back before it gives up
_ENTRY_ID = re.compile(r"([0-9]{1,20})(?:-([0-9]{1,20}))?")


def max_event_bytes() -> int:
    """The bound of one event's data: $REACTGRAPH_MAX_EVENT_BYTES, else MAX_EVENT_BYTES; a ValueError with one
    line when the variable is not a whole number of bytes in EVENT_BYTES_RANGE."""
    raw = os.environ.get(MAX_EVENT_BYTES_ENV, "").strip()
    if not raw:
        return MAX_EVENT_BYTES
    low, high = EVENT_BYTES_RANGE
    if not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= high:
        raise ValueError(f"{MAX_EVENT_BYTES_ENV}={raw[:40]!r} must be a whole number of bytes from {low} to {high}")
    return int(raw)


def bounded(event: str, data: str, limit: int) -> str:
    """`data`, or when it is over `limit` bytes, the data of an event that says so instead (in the shape of an
    `error` event's, which clients already read): the event keeps its name, the stream goes on."""
    size = len(data.encode("utf-8", errors="replace"))
    if size <= limit:
        return data
    return json.dumps({"error": "EventTooLarge",
                       "message": f"this {event[:100]!r} event was {size} bytes, over the limit of {limit} bytes for "
                                  "one event, and was left out of the stream (the run goes on; its state holds "
                                  "everything)"}, ensure_ascii=False)


def entry_id(text: str | None) -> str:
    """A `Last-Event-ID` as a stream position: none (or "-", as langgraph-api reads it) is the start ("0"); a
    Redis entry id (`ms-seq` or `ms`) is the position after it; anything else is a ValueError with one line
    (Redis would refuse it in the middle of the stream)."""
    text = (text or "").strip()
    if not text or text == "-":
        return "0"
    match = _ENTRY_ID.fullmatch(text)
    if match is None or any(int(part) >= 2**64 for part in match.groups() if part is not None):
        raise ValueError(f"Last-Event-ID {text[:60]!r} is not an event id of this stream (an id like "
                         "'1724342400000-0')")
    return text


async def read_events(client: redis.asyncio.Redis, keys: ServiceKeys, thread_id: str, run_id: str,
                      after: str = "0", *, block_ms: int = 1000, still_going: Any = None
                      ) -> AsyncIterator[tuple[str, str, str]]:
    """(entry id, event name, JSON data) after `after`, waiting for more until the `__end__` entry.

    `still_going()` is asked whenever a wait passes with nothing new: False ends the stream (a run that
    ended without its `__end__`, e.g. whose events expired)."""
    key = keys.events(thread_id, run_id)
    outage_since: float | None = None
    while True:
        try:
            answer: Any = await client.xread({key: after}, count=200, block=block_ms)
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            # a blip (a restart, a connection the server closed while it sat in the readers' pool) is ridden
            # out for a while, so a stream or join goes on; a longer outage is the caller's 503
            outage_since = outage_since or time.monotonic()
            if time.monotonic() - outage_since > READ_OUTAGE_S:
                raise
            await asyncio.sleep(0.2)
            continue
        outage_since = None
        entries = answer[0][1] if answer else []
        if not entries:
            if still_going is not None and not await still_going():
                return
            continue
        for raw_id, fields in entries:
            after = raw_id.decode() if isinstance(raw_id, bytes) else raw_id
            event = redis_text(fields.get(b"e", fields.get("e")))
            if event == END:
                return
            yield after, event, redis_text(fields.get(b"d", fields.get("d")))


class EarlierAttempts:
    """What a run's earlier attempts already streamed, so that its resumed attempt sends each event once.

    LangGraph, resuming a run from its checkpoint, streams again what that checkpoint already holds: its values
    (the first `values` event) and the updates of the tasks whose writes it kept (`updates` marked
    `__metadata__: {"cached": true}`). Such an event is passed over when an earlier attempt streamed the same one;
    one the earlier attempt never got to stream (it died between saving and streaming) is sent."""

    def __init__(self, streamed: list[tuple[str, str]]) -> None:
        self._updates = Counter(data for event, data in streamed if event.split("|")[0] == "updates")
        values = [data for event, data in streamed if event == "values"]
        self._last_values: str | None = values[-1] if values else None

    @classmethod
    async def read(cls, client: redis.asyncio.Redis, keys: ServiceKeys, thread_id: str, run_id: str
                   ) -> EarlierAttempts:
        entries: Any = await client.xrange(keys.events(thread_id, run_id), count=MAX_EVENTS_PER_RUN)
        return cls([(redis_text(fields.get(b"e", fields.get("e"))),
                     redis_text(fields.get(b"d", fields.get("d"))))
                    for _entry, fields in entries])

    def streamed_before(self, event: str, data: Any, text: str) -> bool:
        """Whether this event of the resumed attempt (`text`: its data as stored) is one streamed already."""
        if event == "values" and self._last_values is not None:
            last, self._last_values = self._last_values, None  # only the attempt's first values are a replay
            return text == last
        if event.split("|")[0] == "updates" and isinstance(data, dict) and \
                isinstance(data.get("__metadata__"), dict) and data["__metadata__"].get("cached"):
            original = dumps({key: value for key, value in data.items() if key != "__metadata__"})
            if self._updates[original] > 0:
                self._updates[original] -= 1
                return True
        return False


HIDDEN_TAG = "langsmith:hidden"  # callback events LangChain marks as not for clients (langgraph-api drops them too)


class EventNames:
    """Turns one run's (namespace, mode, chunk) into its events, keeping what `messages` mode accumulates."""

    def __init__(self, requested: set[str], subgraphs: bool) -> None:
        self.requested, self.subgraphs = requested, subgraphs
        self._messages: dict[str, BaseMessage] = {}

    def events(self, namespace: tuple[str, ...], mode: str, chunk: Any) -> list[tuple[str, Any]]:
        if namespace and not self.subgraphs:
            return []
        if mode == "messages":
            if "messages-tuple" in self.requested:  # what langgraph-api prefers when both are asked for
                return [(_named("messages", namespace), list(chunk))]
            return self._whole_messages(chunk) if "messages" in self.requested else []
        return [(_named(mode, namespace), chunk)] if mode in self.requested else []

    def _whole_messages(self, chunk: Any) -> list[tuple[str, Any]]:
        message, metadata = chunk
        if not isinstance(message, BaseMessage) or not message.id:
            return []
        found: list[tuple[str, Any]] = []
        earlier = self._messages.get(message.id)
        if earlier is None:
            self._messages[message.id] = message
            found.append(("messages/metadata", {message.id: {"metadata": metadata}}))
        elif isinstance(earlier, BaseMessageChunk) and isinstance(message, BaseMessageChunk):
            self._messages[message.id] = earlier + message
        else:  # a whole message after its chunks (a node's output): it is the message now
            self._messages[message.id] = message
        kind = "messages/partial" if isinstance(message, BaseMessageChunk) else "messages/complete"
        found.append((kind, [message_chunk_to_message(self._messages[message.id])]))
        return found


def _named(mode: str, namespace: tuple[str, ...]) -> str:
    return f"{mode}|{'|'.join(namespace)}" if namespace else mode


def graph_modes(requested: list[str]) -> list[str]:
    """LangGraph's stream modes for the requested ones: both message modes are LangGraph's `messages`;
    `events` is no LangGraph mode (it is how the graph is run)."""
    modes = {"messages" if m in ("messages", "messages-tuple") else m for m in requested} - {"events"}
    return sorted(modes or {"values"})  # a run that asked only for `events` still runs its graph to the end


async def run_events(graph: Any, graph_input: Any, config: Mapping[str, Any], run_id: str, requested: list[str],
                     subgraphs: bool, **options: Any) -> AsyncIterator[tuple[str, Any]]:
    """(event name, data) for each event of the run `run_id`, in order."""
    names = EventNames(set(requested), subgraphs)
    modes = graph_modes(requested)
    if "events" not in requested:
        async for part in graph.astream(graph_input, dict(config), stream_mode=modes, subgraphs=subgraphs, **options):
            for event in names.events(*_split(part, subgraphs)):
                yield event
        return
    root = _uuid(run_id)  # the root graph's callback run id is the run's, as langgraph-api has it
    async for raw in graph.astream_events(graph_input, {**config, "run_id": root}, version="v2", stream_mode=modes,
                                          subgraphs=subgraphs, **options):
        if HIDDEN_TAG in (raw.get("tags") or []):
            continue
        if raw["event"] == "on_chain_stream" and str(raw.get("run_id")) == str(root):
            for event in names.events(*_split(raw["data"]["chunk"], subgraphs)):
                yield event
        else:
            yield "events", raw


def _split(part: Any, subgraphs: bool) -> tuple[tuple[str, ...], str, Any]:
    """LangGraph's stream part as (namespace, mode, chunk), with or without subgraphs."""
    if subgraphs:
        namespace, mode, chunk = part
        return tuple(namespace), mode, chunk
    mode, chunk = part
    return (), mode, chunk


def _uuid(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:  # a run id from Redis is input like any other: a run without one still streams
        return uuid.uuid4()


CHANNELS = ("values", "updates", "checkpoints", "messages", "tools", "custom", "lifecycle", "input", "tasks")
_DIRECT = ("values", "updates", "custom", "tasks", "checkpoints")
INTERRUPT = "__interrupt__"


def seq_of(entry_id: str) -> int:
    """The protocol's integer `seq` of an event id (`ms-n`): rising with the ids, within JavaScript's safe range."""
    ms, _, n = entry_id.partition("-")
    return int(ms) * 1000 + min(int(n or 0), 999)


class StreamFilter:
    """A stream request's subscription: which channels, which namespaces (and how deep), after which `seq`."""

    def __init__(self, body: Mapping[str, Any]) -> None:
        channels = body.get("channels")
        if not isinstance(channels, list) or not channels:
            raise BadRequest(422, "'channels' must be a non-empty list of channel names")
        bad = [c for c in channels if not isinstance(c, str) or (c not in CHANNELS and not c.startswith("custom:"))]
        if bad:
            raise BadRequest(422, f"'channels' holds unsupported entries: {', '.join(map(repr, bad[:5]))}; "
                                  f"allowed: {', '.join(CHANNELS)}, or custom:<name>")
        self.channels = set(channels)
        namespaces = body.get("namespaces")
        self.namespaces = [ns for ns in namespaces if isinstance(ns, list) and all(isinstance(s, str) for s in ns)
                           ] if isinstance(namespaces, list) else None
        depth, since = body.get("depth"), body.get("since")
        self.depth = depth if isinstance(depth, int) and not isinstance(depth, bool) and depth >= 0 else None
        self.since = since if isinstance(since, int) and not isinstance(since, bool) and since >= 0 else None

    def wants(self, event: Mapping[str, Any]) -> bool:
        if self.since is not None and event["seq"] <= self.since:
            return False
        method, params = event["method"], event["params"]
        channel = "input" if method == "input.requested" else method
        named = channel == "custom" and f"custom:{(params['data'] or {}).get('name')}" in self.channels
        if channel not in self.channels and not named:
            return False
        return self._namespace_ok(params["namespace"])

    def _namespace_ok(self, namespace: list[str]) -> bool:
        if not self.namespaces:
            return self.depth is None or len(namespace) <= self.depth
        return any(namespace[:len(prefix)] == prefix and (self.depth is None or len(namespace) - len(prefix)
                                                          <= self.depth) for prefix in self.namespaces)


class ProtocolEvents:
    """Turns one thread's run events (thread_streams.ThreadReader) into protocol events, run by run."""

    def __init__(self, graph_names: Mapping[str, str]) -> None:
        self.graph_names = graph_names  # run id → its graph's name, for `lifecycle`
        self._asked: dict[str, set[str]] = {}  # run id → interrupt ids already sent as `input.requested`
        self._failed: set[str] = set()

    def events(self, entry_id: str, event: str, data: str, run_id: str, status: str | None = None
               ) -> list[dict[str, Any]]:
        """The protocol events of one run event; `status`, for the run's end, is its record's final status."""
        name, _, rest = event.partition("|")
        namespace = [part for part in rest.split("|") if part] if rest else []
        try:
            value = json.loads(data) if data else None
        except ValueError:  # Redis content: an event that is not JSON carries nothing here
            value = None
        made: list[tuple[str, Any]] = []
        if name == "metadata" and not namespace:
            made.append(("lifecycle", {"event": "running", "graph_name": self.graph_names.get(run_id, "")}))
        elif name == "error":
            self._failed.add(run_id)
            message = value.get("message") if isinstance(value, dict) else None
            made.append(("lifecycle", {"event": "failed", "error": message or "the run failed"}))
        elif name == END:
            made += self._end(run_id, status)
        elif name in _DIRECT:
            made += self._with_interrupts(run_id, name, value)
        return [self._event(entry_id, run_id, n, method, namespace, data) for n, (method, data) in enumerate(made)]

    def _end(self, run_id: str, status: str | None) -> list[tuple[str, Any]]:
        if run_id in self._failed:
            return []
        if status == "success":
            phase = "interrupted" if self._asked.get(run_id) else "completed"
            return [("lifecycle", {"event": phase, "graph_name": self.graph_names.get(run_id, "")})]
        reason = "the run was cancelled" if status == "interrupted" else f"the run ended {status or 'unknown'}"
        return [("lifecycle", {"event": "failed", "error": reason})]

    def _with_interrupts(self, run_id: str, name: str, value: Any) -> list[tuple[str, Any]]:
        made: list[tuple[str, Any]] = []
        if isinstance(value, dict) and isinstance(value.get(INTERRUPT), list) and name in ("values", "updates"):
            asked = self._asked.setdefault(run_id, set())
            for interrupt in value[INTERRUPT]:
                if isinstance(interrupt, dict) and isinstance(interrupt.get("id"), str) \
                        and interrupt["id"] not in asked:
                    asked.add(interrupt["id"])
                    made.append(("input.requested", {"interrupt_id": interrupt["id"], "value": interrupt.get("value"),
                                                     "payload": interrupt.get("value")}))
            value = {k: v for k, v in value.items() if k != INTERRUPT}
            if name == "updates" and not value:
                return made
        return [(name, value), *made]

    @staticmethod
    def _event(entry_id: str, run_id: str, n: int, method: str, namespace: list[str], data: Any) -> dict[str, Any]:
        return {"type": "event", "event_id": f"{run_id}:{entry_id}:{n}", "seq": seq_of(entry_id), "method": method,
                "params": {"namespace": namespace, "timestamp": int(entry_id.partition("-")[0]), "data": data}}


MAX_RUNS_READ = 1000  # a thread's newest runs a stream follows (older ones have long ended)
BLOCK_MS = 500  # how long a read waits for events before it looks for new runs
_MAX_SEQ = 2**64 - 1


def _before(entry: str) -> str:
    """The greatest entry id below `entry`: reading after it includes `entry`."""
    ms, _, seq = entry.partition("-")
    if seq and int(seq) > 0:
        return f"{ms}-{int(seq) - 1}"
    return f"{int(ms) - 1}-{_MAX_SEQ}" if int(ms) > 0 else "0"


class ThreadReader:
    """Where a thread's stream has got to in each of its runs.

    Entry ids are the events' ids: a reader that reconnects after an id gets every later event of every run. Two
    runs' streams may hold the same id when one ends and the next starts in the same millisecond: the run whose
    stream holds the id is read after it, the others from it, so neither side of that boundary is lost."""

    def __init__(self, client: redis.asyncio.Redis, keys: ServiceKeys, thread_id: str) -> None:
        self.client, self.keys, self.thread_id = client, keys, thread_id
        self.positions: dict[str, str] = {}  # run id → the last entry id read (events after it are next)
        self.ended: set[str] = set()

    async def run_ids(self) -> list[str]:
        """The thread's runs, oldest first (the newest MAX_RUNS_READ)."""
        ids: Any = await self.client.zrange(self.keys.runs(self.thread_id), -MAX_RUNS_READ, -1)
        return [redis_text(i) for i in ids]

    async def start(self, after: str | None, replay: Collection[str] = ()) -> None:
        """From `after` (an event id) in every run; else from now, but from the start in the runs `replay` names."""
        for run_id in await self.run_ids():
            key = self.keys.events(self.thread_id, run_id)
            if after is not None:
                held: Any = await self.client.xrange(key, after, after, count=1)
                self.positions[run_id] = after if held else _before(after)
            elif run_id in replay:
                self.positions[run_id] = "0"
            else:
                last: Any = await self.client.xrevrange(key, count=1)
                if last and redis_text(last[0][1].get(b"e", last[0][1].get("e"))) == END:
                    self.ended.add(run_id)  # over before the reader came: nothing of it is live
                self.positions[run_id] = redis_text(last[0][0]) if last else "0"

    async def _follow_new_runs(self) -> None:
        known = await self.run_ids()
        for run_id in known:
            self.positions.setdefault(run_id, "0")  # created after the reader started: all of it
        for gone in set(self.positions) - set(known):  # deleted (rolled back, or the thread's history pruned)
            self.positions.pop(gone, None)

    async def events(self, block_ms: int = BLOCK_MS) -> AsyncIterator[tuple[str, str, str, str]]:
        """(entry id, event name, data, run id) for ever, oldest first; a run's end is an `__end__` event."""
        outage_since: float | None = None
        while True:
            await self._follow_new_runs()
            reading: dict[Any, Any] = {self.keys.events(self.thread_id, r): p for r, p in self.positions.items()
                                       if r not in self.ended}
            if not reading:
                await asyncio.sleep(block_ms / 1000)
                continue
            try:
                answer: Any = await self.client.xread(reading, count=200, block=block_ms)
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                outage_since = outage_since or time.monotonic()  # a blip is ridden out, as a run's stream does
                if time.monotonic() - outage_since > READ_OUTAGE_S:
                    raise
                await asyncio.sleep(0.2)
                continue
            outage_since = None
            for found in self._entries(answer or []):
                entry, event, _data, run_id = found
                self.positions[run_id] = entry
                if event == END:
                    self.ended.add(run_id)
                yield found

    def _entries(self, answer: list) -> list[tuple[str, str, str, str]]:
        prefix = self.keys.events(self.thread_id, "")
        found = []
        for raw_key, entries in answer:
            run_id = redis_text(raw_key)[len(prefix):]
            for raw_id, fields in entries:
                found.append((redis_text(raw_id), redis_text(fields.get(b"e", fields.get("e"))),
                              redis_text(fields.get(b"d", fields.get("d"))), run_id))
        # ids compare as (ms, seq), not as text
        found.sort(key=lambda item: tuple(int(part) for part in item[0].split("-")))
        return found


def run_mode_filter(asked: list[str], run_modes: list[str]) -> Callable[[str], bool] | None:
    """For a join that names stream modes (langgraph-sdk's `stream_mode=`, a subset of its run's; unset, it sends
    one empty value): whether an event is one of them, or None when it names none. The run's own events
    (`metadata`, `error`, `end`) always are; `messages/…` are the `messages` mode's."""
    modes = [mode for mode in asked if mode]
    if unknown := [mode for mode in modes if mode not in run_modes]:
        raise BadRequest(422, f"'stream_mode' {', '.join(map(repr, unknown[:5]))} is not one of this run's modes: "
                              f"{', '.join(run_modes)}")
    if not modes:
        return None
    wanted = set(modes) | ({"messages"} if "messages-tuple" in modes else set())

    def keep(event: str) -> bool:
        mode = event.split("|")[0].split("/")[0]
        return mode in ("metadata", "error", "end") or mode in wanted
    return keep
