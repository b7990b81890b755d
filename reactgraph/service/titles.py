"""A session's title — its first question — for the sessions list and the server-side text search.

`POST /threads/search` takes two things of ours beside the Agent Server's fields: `text`, a case-insensitive
substring a thread's id, graph, status or title must hold, and `title` among the fields a search may `select`. The
first question of a long session is no longer in its current state once its early turns are summarized, so it
is read from the thread's earliest checkpoints the first time it is needed and kept beside the thread's record
(a key in the thread's hash tag, deleted with it): the first question never changes. A thread with no question
yet gets no title, and is read again next time (it has next to nothing to read).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from reactgraph.service.connections import REDIS_DOWN
from reactgraph.service.records import ThreadRecord
from reactgraph.service.wire import BadRequest

log = logging.getLogger("reactgraph.service")
MAX_TEXT_CHARS = 200  # a `text` longer than this is refused
MAX_TITLE_CHARS = 300  # what is kept of a first question
EARLIEST = 4  # checkpoints read from a thread's start: its input, then the one its question is written in
READ_AT_ONCE = 16  # threads whose first checkpoints are read at the same time (a share of the saver's pool)

GraphOf = Callable[[ThreadRecord], Any]  # the graph whose state a thread's checkpoints hold


def text_of(body: dict[str, Any]) -> str | None:
    """The body's `text` (stripped; None when absent or empty), or a 422 naming what is wrong with it."""
    text = body.get("text")
    if text is None:
        return None
    if not isinstance(text, str):
        raise BadRequest(422, f"'text' must be a string, not {type(text).__name__}")
    if len(text) > MAX_TEXT_CHARS:
        raise BadRequest(422, f"'text' may hold at most {MAX_TEXT_CHARS} characters, got {len(text)}")
    return text.strip() or None


class Titles:
    """The titles of one service's threads: `keys.title(thread_id)`, filled from checkpoints when absent."""

    def __init__(self, client: Any, keys: Any, saver: Any, graph_of: GraphOf) -> None:
        self.client, self.keys, self.saver, self.graph_of = client, keys, saver, graph_of
        self.read: dict[str, str] = {}  # thread id → title, as read for this request

    async def of(self, records: list[ThreadRecord]) -> list[str]:
        """Each thread's title ('' when it has no question yet, or its first checkpoints cannot be read): those
        kept in one round trip, the others read from their checkpoints and kept."""
        if wanted := [r for r in records if r["thread_id"] not in self.read]:
            kept = await self._kept(wanted)
            found = await self._first_questions([r for r, title in zip(wanted, kept, strict=True) if title is None])
            for record, title in zip(wanted, kept, strict=True):
                self.read[record["thread_id"]] = title if title is not None else found[record["thread_id"]]
        return [self.read[r["thread_id"]] for r in records]

    async def _kept(self, records: list[ThreadRecord]) -> list[str | None]:
        pipe = self.client.pipeline(transaction=False)
        for record in records:
            pipe.get(self.keys.title(record["thread_id"]))
        return [raw.decode(errors="replace") if isinstance(raw, bytes) else raw for raw in await pipe.execute()]

    async def _first_questions(self, records: list[ThreadRecord]) -> dict[str, str]:
        """Thread id → its first question, read from the checkpoints of several threads at once (their round trips
        overlap), and kept."""
        at_once = asyncio.Semaphore(READ_AT_ONCE)

        async def first_question(record: ThreadRecord) -> str:
            async with at_once:
                return await self._first_question(record)

        found = dict(zip((r["thread_id"] for r in records),
                         await asyncio.gather(*(first_question(r) for r in records)), strict=True))
        if titled := {self.keys.title(i): title for i, title in found.items() if title}:
            pipe = self.client.pipeline(transaction=False)
            for key, title in titled.items():
                pipe.set(key, title, nx=True)
            await pipe.execute()
        return found

    async def prepare(self, records: list[ThreadRecord]) -> None:
        """Read a batch's titles at once, before `matcher`'s check asks for each (index.Query.prepare)."""
        await self.of(records)

    async def _first_question(self, record: ThreadRecord) -> str:
        thread_id = record["thread_id"]
        config: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        try:
            ids = await self.saver.acheckpoint_ids(config, EARLIEST, oldest_first=True)
            graph = self.graph_of(record)
            # the earliest checkpoints, then the current state: a session pruned to its latest checkpoints
            for checkpoint_id in [*ids, None]:
                wanted = {"configurable": {**config["configurable"], "checkpoint_id": checkpoint_id}}
                snapshot = await graph.aget_state(wanted if checkpoint_id else config)
                if question := _question_in(snapshot.values):
                    return question[:MAX_TITLE_CHARS]
        except REDIS_DOWN:
            raise
        except Exception as exc:  # noqa: BLE001 - Redis content is input: a damaged thread has no title
            log.warning("thread %r has no title: its checkpoints cannot be read (%s)", thread_id,
                        (str(exc).splitlines() or [type(exc).__name__])[0][:200])
        return ""

    def matcher(self, text: str) -> Callable[[ThreadRecord], Awaitable[bool]]:
        """Whether a thread's id, graph, status or title holds `text` (case-insensitive)."""
        needle = text.casefold()

        async def holds(record: ThreadRecord) -> bool:
            metadata = record.get("metadata") or {}
            fields = (record["thread_id"], metadata.get("graph_id"), record.get("status"))
            if any(needle in str(value).casefold() for value in fields if value is not None):
                return True
            return needle in (await self.of([record]))[0].casefold()

        return holds


def _question_in(values: Any) -> str | None:
    """The first person's message in a state's `messages`, as text (None when there is none)."""
    messages = values.get("messages") if isinstance(values, dict) else None
    for message in messages if isinstance(messages, list) else []:
        if getattr(message, "type", None) == "human":
            return " ".join(str(message.text).split()) or None
    return None
