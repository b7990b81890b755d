"""A run after it is queued, seen from the API: cancelled, read as SSE until its end, and the result a wait
answers with.

A cancel shows its outcome at once — the run `interrupted` (gone, for `rollback`) and the thread its status
after the run rather than `busy` — while the run's worker stops it within a moment. That write of the thread is
one script that checks the cancelled run is still the one its worker holds and that nothing waits after it
(records.set_thread_status_if), so it never overwrites what the worker wrote, and the worker keeps it. A run has
ended for its readers when its worker closed its event stream; a reader that waits with nothing new also asks
whether the run is still going, so a run whose events expired, or that vanished, ends its readers too.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.responses import Response

from reactgraph.memory.session_lease import SessionBusy, asession_lease
from reactgraph.service.api_common import Service
from reactgraph.service.api_threads import current_state, graph_of
from reactgraph.service.assistants.catalogue import Assistant, Assistants
from reactgraph.service.connections import REDIS_DOWN
from reactgraph.service.events import read_events
from reactgraph.service.quotas import StreamSlots
from reactgraph.service.records import FINAL_RUN_STATUSES, RunRecord, ServiceRecords, ThreadRecord
from reactgraph.service.threads import ThreadHold, expire_run, forget_temporary_thread, thread_after_run
from reactgraph.service.wire import BadRequest, plain, redis_text
from reactgraph.service.work_queue import cancel_scheduled
from reactgraph.service.worker import end_abandoned_run

log = logging.getLogger("reactgraph.service")


async def cancel_now(records: ServiceRecords, assistants: Assistants, run: RunRecord, action: str) -> str:
    """Cancel `run` (see the module docstring): "pending" (it never starts), "active" (its worker stops it) or
    "done" (it had ended: nothing changed)."""
    thread_id, run_id = run["thread_id"], run["run_id"]
    where = await records.cancel(thread_id, run_id, action)
    temporary = where == "pending" and run["kwargs"].get("temporary")  # no worker will take it: its thread goes
    if temporary and await forget_temporary_thread(records, assistants, thread_id):
        await expire_run(records, thread_id, run_id)
    elif where != "done":  # the run stopping may be this one, or one cancelled earlier that this one waited behind
        await _show_thread_freed(records, assistants, thread_id, run if where == "active" else None)
        if where == "pending":
            await show_thread_dequeued(records, assistants, run)
    return where


async def show_thread_dequeued(records: ServiceRecords, assistants: Assistants, run: RunRecord) -> None:
    """A run taken off its thread's queue before it started (cancelled, deleted): if no other run waits or runs,
    the thread shows its status from its checkpoints again, as after a cancel (it read busy from the run's
    creation)."""
    thread_id = run["thread_id"]
    thread = await records.get_thread(thread_id)
    if thread is None or thread["status"] != "busy" or await records.busy(thread_id):
        return
    try:
        status, interrupts = await thread_after_run(assistants.for_run(run).graph, thread_id, "interrupted")
    except REDIS_DOWN:
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged checkpoint: the thread is in error, as a worker would say
        log.warning("thread %s: its state could not be read after run %s left its queue: %s", thread_id,
                    run["run_id"], (str(exc).splitlines() or [type(exc).__name__])[0][:200])
        status, interrupts = "error", {}
    await records.set_thread_status_if(thread_id, run["run_id"], "dequeued", status, interrupts=interrupts)


async def end_if_abandoned(records: ServiceRecords, assistants: Assistants, run: RunRecord) -> bool:
    """A cancelled run still marked active, whose thread no worker holds (its worker died, none runs now), is ended
    here as its worker would have ended it, so that cancel-then-delete never waits on a worker that is not coming.
    Whether it is no longer active (False: a worker holds the thread, and stops the run itself)."""
    thread_id, run_id = run["thread_id"], run["run_id"]
    action = await records.cancel_requested(thread_id, run_id)
    if action is None:
        return False
    try:
        async with asession_lease(assistants.checkpointer, thread_id, wait_s=0):
            hold = await ThreadHold.take(records.client, records.keys, thread_id)
            held = await records.client.get(records.keys.active(thread_id))
            if (held.decode() if isinstance(held, bytes) else held) == run_id:
                await end_abandoned_run(hold, records, assistants, run, action)
    except SessionBusy:
        return False
    return True


async def _show_thread_freed(records: ServiceRecords, assistants: Assistants, thread_id: str,
                             run: RunRecord | None) -> None:
    """If the run the thread's worker holds has been cancelled and no run waits: the thread's status as the worker
    will leave it, now (`run`: that run's record, when the caller has it)."""
    held = await records.client.get(records.keys.active(thread_id))
    run_id = held.decode() if isinstance(held, bytes) else held
    action = await records.cancel_requested(thread_id, run_id) if run_id else None
    if not run_id or action is None:
        return
    run = run if run is not None and run["run_id"] == run_id else await records.get_run(thread_id, run_id)
    graph = (assistants.for_run(run) if run is not None else await _thread_graph(records, assistants, thread_id)).graph
    try:
        status, interrupts = await thread_after_run(graph, thread_id, "interrupted",
                                                    rolled_back=run_id if action == "rollback" else None)
    except REDIS_DOWN:
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged checkpoint: the worker's own write will tell
        log.warning("thread %s: its status after cancelling run %s is left to the worker: %s", thread_id, run_id,
                    (str(exc).splitlines() or [type(exc).__name__])[0][:200])
        return
    await records.set_thread_status_if(thread_id, run_id, "freed", status, interrupts=interrupts)


async def _thread_graph(records: ServiceRecords, assistants: Assistants, thread_id: str) -> Assistant:
    """The assistant of the thread's graph (its record names it), for a run whose own record is gone (rolled back)."""
    thread = await records.get_thread(thread_id)
    graph_id = ((thread.get("metadata") if thread is not None else None) or {}).get("graph_id")
    return (assistants.find(graph_id) if isinstance(graph_id, str) else None) or assistants.default()


async def cancel_runs_of_assistant(records: ServiceRecords, assistants: Assistants, assistant_id: str,
                                   may_cancel: Callable[[str], Awaitable[bool]]) -> int:
    """Cancel (`interrupt`) every pending or running run of the assistant, on the threads `may_cancel(thread_id)`
    allows — what langgraph-api does when an assistant is deleted. How many were cancelled."""
    cancelled, start = 0, 0
    while page := await records.client.zrange(records.keys.with_work, start, start + 999):  # every thread given
        start += len(page)  # work (the sweep drops those with nothing left: none of them has a run to cancel)
        for thread_id, going in await _going_runs(records, [redis_text(t) for t in page]):
            runs = [run for run in [await records.get_run(thread_id, run_id) for run_id in going]
                    if run is not None and run.get("assistant_id") == assistant_id]
            if runs and await may_cancel(thread_id):
                for run in runs:
                    cancelled += await cancel_now(records, assistants, run, "interrupt") != "done"
    for member in await records.client.zrange(records.keys.scheduled, 0, -1):  # runs waiting for their time
        thread_id, _, run_id = redis_text(member).partition(" ")
        waiting = await records.get_run(thread_id, run_id)
        if waiting is not None and waiting.get("assistant_id") == assistant_id and await may_cancel(thread_id):
            cancelled += await cancel_scheduled(records, waiting, "interrupt")
    return cancelled


async def _going_runs(records: ServiceRecords, thread_ids: list[str]) -> list[tuple[str, list[str]]]:
    """(thread id, the ids of its running and waiting runs) for the threads that have any, read in batches."""
    found: list[tuple[str, list[str]]] = []
    for start in range(0, len(thread_ids), 500):
        batch = thread_ids[start:start + 500]
        pipe = records.client.pipeline(transaction=False)
        for thread_id in batch:
            pipe.get(records.keys.active(thread_id))
            pipe.lrange(records.keys.pending(thread_id), 0, -1)
        answers = await pipe.execute()
        for index, thread_id in enumerate(batch):
            active, waiting = answers[2 * index], answers[2 * index + 1]
            # the waiting ones first: once none waits, cancelling the running one shows the thread freed at once
            ids = [i.decode() if isinstance(i, bytes) else str(i) for i in [*waiting, *([active] if active else [])]]
            if ids:
                found.append((thread_id, ids))
    return found


def nothing_to_cancel(run: RunRecord) -> BadRequest:
    return BadRequest(404, f"run {run['run_id']!r} on thread {run['thread_id']!r} is neither pending nor running "
                           "(it has ended, or was cancelled already): there is nothing to cancel")


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


def locations(run: RunRecord, stateless: bool = False) -> dict[str, str]:
    """Where the run and its stream are (`on_run_created` in langgraph-sdk reads Content-Location)."""
    base = f"/runs/{run['run_id']}" if stateless else f"/threads/{run['thread_id']}/runs/{run['run_id']}"
    return {"Location": f"{base}/stream", "Content-Location": base}


class HeldStream(EventSourceResponse):
    """An event stream that gives its reader's slot back however it ends (even if it never started)."""

    def __init__(self, slots: StreamSlots, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.slots = slots

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.slots.give_back()


def event_stream(svc: Service, run: RunRecord, after: str, cancel_on_disconnect: bool,
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


def _events(svc: Service, run: RunRecord, after: str = "0") -> AsyncIterator[tuple[str, str, str]]:
    thread_id, run_id = run["thread_id"], run["run_id"]
    return read_events(svc.streams.client, svc.records.keys, thread_id, run_id, after, block_ms=JOIN_POLL_MS,
                       still_going=still_going(svc, thread_id, run_id))


async def wait_for_end(svc: Service, run: RunRecord, cancel_if_gone: Any = None) -> None:
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


async def _cancel(svc: Service, run: RunRecord) -> None:
    if await cancel_now(svc.records, svc.assistants, run, "interrupt") == "done":
        await cancel_scheduled(svc.records, run, "interrupt")


async def streamed_result(svc: Service, run: RunRecord) -> Any:
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


async def final_values(svc: Service, thread: ThreadRecord | None, run: RunRecord) -> Any:
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
