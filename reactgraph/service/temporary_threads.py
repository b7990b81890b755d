"""A stateless run's thread (`POST /runs…` with `on_completion: delete`, the default) goes once the run has
ended, as on langgraph-api: its checkpoints, its session's long-term items and its records. The run's own
record and cancel mark stay as long as its events do (EVENTS_KEPT_S), for the readers still reading them — the
stream or wait that started the run answers from its events, not from the thread."""

from __future__ import annotations

from typing import Any

from reactgraph.graph.sessions import adrop_session_items
from reactgraph.service.events import EVENTS_KEPT_S
from reactgraph.service.records import ServiceRecords


async def forget_temporary_thread(records: ServiceRecords, assistants: Any, thread_id: str) -> bool:
    """Delete the thread of its ended temporary run before the run's end is told (who sees the end sees it gone);
    False (kept) when another run waits on it."""
    keys, client = records.keys, records.client
    if await client.llen(keys.pending(thread_id)):
        return False  # somebody queued a run on it by its id: that run's thread is no longer temporary
    await assistants.checkpointer.adelete_thread(thread_id)
    await adrop_session_items(assistants.store, thread_id)
    await records.indexed.drop(thread_id)  # its record and index entries, together
    await client.delete(keys.runs(thread_id))
    await client.zrem(keys.threads, thread_id)
    await client.zrem(keys.unswept, thread_id)
    return True


async def expire_run(records: ServiceRecords, thread_id: str, run_id: str) -> None:
    """Once the run's end is told: its record and cancel mark go when its events do, and the thread's fence."""
    keys = records.keys
    for key in (keys.run(thread_id, run_id), keys.cancel(thread_id, run_id), keys.fence(thread_id)):
        await records.client.expire(key, EVENTS_KEPT_S)
