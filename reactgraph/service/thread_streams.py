"""A thread's stream: the events of all its runs, in order, as they come — what `threads.join_stream` and the
thread-centric (v3) stream read.

Each run keeps its events in its own Redis stream (events.py); a thread's stream reads them all at once
(one blocking XREAD over the runs not yet ended), picks up runs created meanwhile, and marks each run's end.
Entry ids are the events' ids: runs on a thread follow one another, so ids rise from one run's events to the
next's, and a reader that reconnects after an id gets every later event of every run. (Two streams may hold
the same id when one run ends and the next starts in the same millisecond: the run whose stream holds the id
is read after it, the others from it, so neither side of that boundary is lost.)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Collection
from typing import Any

import redis.asyncio

from reactgraph.service.events import END, READ_OUTAGE_S
from reactgraph.service.keys import ServiceKeys
from reactgraph.service.wire import BadRequest

MAX_RUNS_READ = 1000  # a thread's newest runs a stream follows (older ones have long ended)
BLOCK_MS = 500  # how long a read waits for events before it looks for new runs
_MAX_SEQ = 2**64 - 1


def _text(value: Any) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else "" if value is None else str(value)


def _before(entry: str) -> str:
    """The greatest entry id below `entry`: reading after it includes `entry`."""
    ms, _, seq = entry.partition("-")
    if seq and int(seq) > 0:
        return f"{ms}-{int(seq) - 1}"
    return f"{int(ms) - 1}-{_MAX_SEQ}" if int(ms) > 0 else "0"


class ThreadReader:
    """Where a thread's stream has got to in each of its runs."""

    def __init__(self, client: redis.asyncio.Redis, keys: ServiceKeys, thread_id: str) -> None:
        self.client, self.keys, self.thread_id = client, keys, thread_id
        self.positions: dict[str, str] = {}  # run id → the last entry id read (events after it are next)
        self.ended: set[str] = set()

    async def run_ids(self) -> list[str]:
        """The thread's runs, oldest first (the newest MAX_RUNS_READ)."""
        ids: Any = await self.client.zrange(self.keys.runs(self.thread_id), -MAX_RUNS_READ, -1)
        return [_text(i) for i in ids]

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
                if last and _text(last[0][1].get(b"e", last[0][1].get("e"))) == END:
                    self.ended.add(run_id)  # over before the reader came: nothing of it is live
                self.positions[run_id] = _text(last[0][0]) if last else "0"

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
            run_id = _text(raw_key)[len(prefix):]
            for raw_id, fields in entries:
                found.append((_text(raw_id), _text(fields.get(b"e", fields.get("e"))),
                              _text(fields.get(b"d", fields.get("d"))), run_id))
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
