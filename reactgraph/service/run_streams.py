"""Reading a run's events from Redis for a client: as SSE (streams and joins), until the run's end (waits,
joins, `cancel?wait=true`), and the result a wait answers with.

A run has ended for its readers when its worker closed its event stream (`__end__`). A reader that waits with
nothing new also asks whether the run is still going — its worker still holds it, or its record has yet to
reach a final status — so a run whose events expired, or that vanished, ends its readers too.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.responses import Response

from reactgraph.service.api_common import Service
from reactgraph.service.api_threads import current_state, graph_of
from reactgraph.service.events import read_events
from reactgraph.service.records import FINAL_RUN_STATUSES
from reactgraph.service.run_cancel import cancel_now
from reactgraph.service.wire import plain
from reactgraph.service.work_queue import cancel_scheduled

JOIN_POLL_MS = 1000
DISCONNECT_POLL_S = 0.5  # how often a wait that cancels on disconnect looks whether its client is there
INTERRUPT = "__interrupt__"


async def is_active(svc: Service, thread_id: str, run_id: str) -> bool:
    """Whether a worker holds the run (running it, or stopping it after a cancel)."""
    active = await svc.client.get(svc.records.keys.active(thread_id))
    return (active.decode() if isinstance(active, bytes) else active) == run_id


def still_going(svc: Service, thread_id: str, run_id: str) -> Callable[[], Awaitable[bool]]:
    """For a reader whose wait passed with no new event: whether the run has yet to end (else stop reading).
    A cancelled run reads `interrupted` at once, but goes on until its worker has stopped it."""
    async def going() -> bool:
        if await is_active(svc, thread_id, run_id):
            return True
        current = await svc.records.get_run(thread_id, run_id)
        return current is not None and current["status"] not in FINAL_RUN_STATUSES
    return going


def locations(run: dict[str, Any], stateless: bool = False) -> dict[str, str]:
    """Where the run and its stream are (`on_run_created` in langgraph-sdk reads Content-Location)."""
    base = f"/runs/{run['run_id']}" if stateless else f"/threads/{run['thread_id']}/runs/{run['run_id']}"
    return {"Location": f"{base}/stream", "Content-Location": base}


class HeldStream(EventSourceResponse):
    """An event stream that gives its reader's slot back however it ends (even if it never started)."""

    def __init__(self, slots: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.slots = slots

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.slots.give_back()


def event_stream(svc: Service, run: dict[str, Any], after: str, cancel_on_disconnect: bool,
                 headers: dict[str, str] | None = None, keep: Callable[[str], bool] | None = None) -> Response:
    """The run's events (those `keep` takes, when given) as SSE, for a reader that holds one of `svc.streams`'
    slots (given back at the end)."""
    thread_id, run_id = run["thread_id"], run["run_id"]

    async def events() -> AsyncIterator[ServerSentEvent]:
        ended = False
        try:
            async for event_id, event, data in _events(svc, run, after):
                if keep is None or keep(event):
                    yield ServerSentEvent(data=data, event=event, id=event_id)
            ended = True
        finally:
            if cancel_on_disconnect and not ended:
                await asyncio.shield(svc.records.request_cancel(thread_id, run_id, "interrupt"))

    return HeldStream(svc.streams, events(), headers=headers or locations(run), ping=15)


def _events(svc: Service, run: dict[str, Any], after: str = "0") -> AsyncIterator[tuple[str, str, str]]:
    thread_id, run_id = run["thread_id"], run["run_id"]
    return read_events(svc.streams.client, svc.records.keys, thread_id, run_id, after, block_ms=JOIN_POLL_MS,
                       still_going=still_going(svc, thread_id, run_id))


async def wait_for_end(svc: Service, run: dict[str, Any], cancel_if_gone: Any = None) -> None:
    """Until the run has ended; for a caller that holds one of `svc.streams`' slots. `cancel_if_gone`: the request
    of a wait that said `on_disconnect="cancel"` — when its client leaves first, the run is cancelled."""
    waiting = asyncio.ensure_future(_drained(_events(svc, run)))
    try:
        while not waiting.done():
            await asyncio.wait({waiting}, timeout=DISCONNECT_POLL_S)
            if cancel_if_gone is not None and not waiting.done() and await cancel_if_gone.is_disconnected():
                await asyncio.shield(_cancel(svc, run))
                return
        waiting.result()
    finally:
        waiting.cancel()


async def _drained(events: AsyncIterator[Any]) -> None:
    async for _ in events:
        pass


async def _cancel(svc: Service, run: dict[str, Any]) -> None:
    if await cancel_now(svc.records, svc.assistants, run, "interrupt") == "done":
        await cancel_scheduled(svc.records, run, "interrupt")


async def streamed_result(svc: Service, run: dict[str, Any]) -> Any:
    """Until the run has ended, then what a wait on it answers, from its events alone (its thread may be gone,
    as a stateless run's is): the last values, or its interrupts under `__interrupt__` when it paused, or
    `{"__error__": …}` when it failed — as langgraph-api makes it. For a caller that holds a stream slot."""
    latest: Any = None
    interrupts: list[Any] = []
    error: Any = None
    async for _id, event, data in _events(svc, run):
        if event not in ("values", "updates", "error"):  # a subgraph's (`values|ns`) is not the run's
            continue
        try:
            chunk = json.loads(data)
        except ValueError:  # Redis content: an event that is not JSON is not an answer
            continue
        if event == "error":
            error = {"__error__": chunk}
        if isinstance(chunk, dict) and isinstance(chunk.get(INTERRUPT), list) and chunk[INTERRUPT]:
            interrupts.append(chunk)
            latest = chunk
        elif event == "values":
            latest = chunk
    if error is not None:
        return error
    if len(interrupts) > 1:
        return {INTERRUPT: [i for chunk in interrupts for i in chunk[INTERRUPT]]}
    return interrupts[0] if interrupts else latest if latest is not None else {}


async def final_values(svc: Service, thread: dict[str, Any], run: dict[str, Any]) -> Any:
    """What `runs.wait` and `runs.join` on a thread answer: the thread's values after the run (with
    `__interrupt__` when it paused), or `{"__error__": …}` when it failed — as the Agent Server does."""
    ended = await svc.records.get_run(run["thread_id"], run["run_id"])
    if ended is not None and ended["status"] == "error":
        return {"__error__": ended.get("error") or {"error": "Error", "message": "the run failed"}}
    snapshot, values = await current_state(graph_of(svc, thread), run["thread_id"])
    values = values or {}
    if snapshot.interrupts:
        values[INTERRUPT] = plain(list(snapshot.interrupts))
    return values
