"""A run's events in a Redis stream: written by the worker that runs it, read by any API process.

Entry ids are the SSE event ids, so a client that reconnects with `Last-Event-ID` gets exactly the events
after it, from whichever API process it reaches. An `__end__` entry closes the stream for readers.

An event is bounded (MAX_EVENT_BYTES, or $REACTGRAPH_MAX_EVENT_BYTES): a larger one — a `values` event of a
state holding a huge tool result, an `events` event carrying whole states — is replaced by a small event of the
same name that says so in one line; the stream and the run go on, and the state keeps what it holds.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import redis.asyncio

from reactgraph.service.keys import ServiceKeys
from reactgraph.service.wire import dumps

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
    if not raw.isdigit() or not low <= int(raw) <= high:
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
            event = _text(fields.get(b"e", fields.get("e")))
            if event == END:
                return
            yield after, event, _text(fields.get(b"d", fields.get("d")))


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
        return cls([(_text(fields.get(b"e", fields.get("e"))), _text(fields.get(b"d", fields.get("d"))))
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


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return "" if value is None else str(value)
