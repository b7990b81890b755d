"""LangGraph's dev server on react-graph's Redis: the `checkpointer` and `store` that langgraph.json names.

Both open the store the CLI opens (`open_checkpointer`: $REDIS_URL, else the embedded Redis) with the CLI's key
prefixes and $REACTGRAPH_TTL, so `reactgraph ask --session S` and Studio read and write the same sessions.

The dev server keeps its thread list in its own memory (saved to .langgraph_api/ in its working directory), not
in the checkpointer, and its API takes only UUIDs as thread ids. So while the checkpointer is open it registers
in that list every session of the store whose id is a UUID and that the list lacks: at start, then every
`REGISTER_EVERY_S`. A session named otherwise (`--session alice`) stays in Redis, out of the server's reach.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

from reactgraph.memory.checkpointer import (
    REDIS_SCHEMES,
    CheckpointerConfigError,
    OpenedCheckpointer,
    open_checkpointer,
    resolve_url,
)
from reactgraph.memory.redis_checkpoint import RedisSaver
from reactgraph.memory.redis_checkpoint.settings import redact
from reactgraph.memory.redis_store import RedisStore
from reactgraph.memory.retention import parse_duration, store_ttl

log = logging.getLogger("reactgraph.studio")

STUDIO_GRAPHS = ("react", "plan_solve", "reflexion")  # the graphs langgraph.json exports (graph/studio.py)
CLI_GRAPH = "react"  # the graph `reactgraph ask` runs: a session without a graph_id of its own is one of its
REGISTER_EVERY_S = 5.0
MAX_REGISTERED_PER_PASS = 200  # a store of many sessions is listed over several passes, never in one burst

Register = Callable[[str, str], Awaitable[None]]  # (thread id, graph id) → the server's thread list has it


def open_studio_store(url: str | None = None) -> OpenedCheckpointer:
    """The CLI's store (`url`, else $REDIS_URL, else the embedded Redis) and TTL for the server; one line if it is
    not Redis, the one store that a server and CLI processes can share."""
    ttl_text = os.environ.get("REACTGRAPH_TTL", "").strip()
    try:
        ttl = parse_duration(ttl_text) if ttl_text else None
    except ValueError as exc:
        raise CheckpointerConfigError(f"$REACTGRAPH_TTL: {exc}") from exc
    chosen = resolve_url(url)
    if chosen != "embedded" and not chosen.startswith(REDIS_SCHEMES):  # refused before a file or server is made
        # memory and sqlite URLs hold no password; anything else might, and redact hides it
        shown = chosen if chosen == "memory" or chosen.startswith("sqlite:") else redact(chosen)
        raise CheckpointerConfigError(f"Studio keeps its threads where the CLI keeps sessions, and a server can share "
                                      f"only Redis, not {shown!r}: use redis://…, rediss://…, unix://… or "
                                      "the embedded Redis (no $REDIS_URL)")
    return open_checkpointer(chosen, ttl=ttl)


@asynccontextmanager
async def checkpointer() -> AsyncIterator[RedisSaver]:
    """The CLI's Redis saver for the server's lifetime, registering the CLI's sessions in its thread list."""
    opened = await asyncio.to_thread(open_studio_store)  # may start the embedded Redis: not on the event loop
    saver = opened.saver
    assert isinstance(saver, RedisSaver)  # open_studio_store refuses the rest
    log.info("Studio threads are kept in %s", opened.description)
    registering = asyncio.create_task(keep_sessions_registered(saver, register_in_dev_server))
    try:
        yield saver
    finally:
        registering.cancel()
        with suppress(asyncio.CancelledError):
            await registering
        await asyncio.to_thread(saver.close)


@asynccontextmanager
async def store() -> AsyncIterator[RedisStore]:
    """The CLI's long-term store (Q&A logs, lessons): the same Redis, prefix and TTL as `reactgraph ask`."""
    opened = await asyncio.to_thread(open_studio_store)
    saver = opened.saver
    assert isinstance(saver, RedisSaver)  # open_studio_store refuses the rest
    found = RedisStore.from_url(opened.redis_url or "", ttl=store_ttl(opened.ttl))  # shares the saver's pool
    try:
        yield found
    finally:
        await asyncio.to_thread(found.close)
        await asyncio.to_thread(saver.close)


async def keep_sessions_registered(saver: RedisSaver, register: Register, every_s: float = REGISTER_EVERY_S) -> None:
    """`register_sessions` now and every `every_s` seconds until cancelled; a failed pass is logged and retried."""
    known: set[str] = set()
    listed: set[str] = set()
    while True:
        try:
            await register_sessions(saver, register, known, listed)
        except Exception as exc:  # noqa: BLE001 - Redis gone a while, a thread list that refuses: the next pass retries
            log.warning("could not list the store's sessions for Studio: %s: %s", type(exc).__name__, exc)
        await asyncio.sleep(every_s)


async def register_sessions(saver: RedisSaver, register: Register, known: set[str],
                            listed: set[str] | None = None) -> int:
    """Register each session of the store not in `known` whose id is a canonical UUID (up to
    MAX_REGISTERED_PER_PASS of them), under the graph its newest checkpoint names, else the CLI's graph; returns
    how many were registered. `known` gains them.

    Sessions that were not in the previous pass's listing (`listed`, which gains this listing) go first: one just
    asked from the CLI shows up in Studio within a pass even while a store of thousands is still being worked
    through, 200 a pass."""
    added = 0
    found = await saver.athread_ids()
    seen_before = set(listed or ())
    if listed is not None:
        listed.update(found)
    for thread_id in sorted(found, key=lambda t: t in seen_before):  # new ones first; stable otherwise
        if thread_id in known or not is_server_thread_id(thread_id):
            continue
        if added >= MAX_REGISTERED_PER_PASS:
            break
        newest = await saver.aget_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
        if newest is None:  # subgraph checkpoints only, or deleted since the listing
            continue
        await register(thread_id, graph_of(newest.metadata))
        known.add(thread_id)
        added += 1
    return added


def is_server_thread_id(thread_id: str) -> bool:
    """The server's API names threads by UUID and passes them on as `str(UUID)`: only that spelling matches."""
    try:
        return str(uuid.UUID(thread_id)) == thread_id
    except ValueError:
        return False


def graph_of(metadata: Any) -> str:
    """The graph a checkpoint's metadata names (the server writes `graph_id`), if it is one of ours."""
    named = metadata.get("graph_id") if isinstance(metadata, dict) else None
    return named if named in STUDIO_GRAPHS else CLI_GRAPH


async def register_in_dev_server(thread_id: str, graph_id: str) -> None:
    """Add the thread to the dev server's thread list, as `POST /threads` with if_exists=do_nothing would."""
    from langgraph_api.graph import NAMESPACE_GRAPH  # the dev server's modules: present only inside it
    from langgraph_runtime.database import connect
    from langgraph_runtime.ops import Threads

    # the metadata a run of the graph's default assistant gives its thread, which Studio filters threads by
    metadata = {"graph_id": graph_id, "assistant_id": str(uuid.uuid5(NAMESPACE_GRAPH, graph_id)),
                "source": "reactgraph"}
    async with connect() as conn:
        created = await Threads.put(conn, uuid.UUID(thread_id), if_exists="do_nothing", metadata=metadata)
        async for _ in created:  # the put is done when its result is read
            pass
