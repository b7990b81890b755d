"""Cancelling runs from the API: what the caller sees at once, while a running run's worker stops it within a
moment (it polls the run's cancel mark).

At once: the run reads `interrupted` (or is gone, for `rollback`); a stateless run that had not started takes
its thread with it; and when no other run is going or waiting on the thread, the thread reads its status after
the run — from its latest checkpoint: `interrupted` when the run stopped before a node, else `idle`; rolled back,
from the checkpoint before the run — rather than `busy` until the worker has noticed. The worker then keeps that
status (records.set_thread_status_if `stopped`): what the caller saw does not flip. The write is one step in
Redis with a check that the cancelled run is still the one its worker holds and nothing waits after it
(records.set_thread_status_if `freed`), so it never overwrites what the worker wrote once it had stopped the run,
or its `busy` for the next run; the keys it checks share the thread's hash tag, so it holds on a Redis Cluster."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from reactgraph.memory.session_lease import SessionBusy
from reactgraph.memory.session_lease_aio import asession_lease
from reactgraph.service.connections import REDIS_DOWN
from reactgraph.service.records import ServiceRecords
from reactgraph.service.threads import ThreadHold, expire_run, forget_temporary_thread, thread_after_run
from reactgraph.service.wire import BadRequest
from reactgraph.service.work_queue import cancel_scheduled
from reactgraph.service.worker import end_abandoned_run

log = logging.getLogger("reactgraph.service")


async def cancel_now(records: ServiceRecords, assistants: Any, run: dict[str, Any], action: str) -> str:
    """Cancel `run` (see the module docstring): "pending" (it never starts), "active" (its worker stops it) or
    "done" (it had ended: nothing changed)."""
    thread_id, run_id = run["thread_id"], run["run_id"]
    where = await records.cancel(thread_id, run_id, action)
    temporary = where == "pending" and run["kwargs"].get("temporary")  # no worker will take it: its thread goes
    if temporary and await forget_temporary_thread(records, assistants, thread_id):
        await expire_run(records, thread_id, run_id)
    elif where != "done":  # the run stopping may be this one, or one cancelled earlier that this one waited behind
        await _show_thread_freed(records, assistants, thread_id, run if where == "active" else None)
    return where


async def end_if_abandoned(records: ServiceRecords, assistants: Any, run: dict[str, Any]) -> bool:
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


async def _show_thread_freed(records: ServiceRecords, assistants: Any, thread_id: str,
                             run: dict[str, Any] | None) -> None:
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


async def _thread_graph(records: ServiceRecords, assistants: Any, thread_id: str) -> Any:
    """The assistant of the thread's graph (its record names it), for a run whose own record is gone (rolled back)."""
    thread = await records.get_thread(thread_id) or {}
    graph_id = (thread.get("metadata") or {}).get("graph_id")
    return (assistants.find(graph_id) if isinstance(graph_id, str) else None) or assistants.default()


async def cancel_runs_of_assistant(records: ServiceRecords, assistants: Any, assistant_id: str,
                                   may_cancel: Callable[[str], Awaitable[bool]]) -> int:
    """Cancel (`interrupt`) every pending or running run of the assistant, on the threads `may_cancel(thread_id)`
    allows — what langgraph-api does when an assistant is deleted. How many were cancelled."""
    cancelled, start = 0, 0
    while page := await records.client.zrange(records.keys.with_work, start, start + 999):  # every thread given
        start += len(page)  # work (the sweep drops those with nothing left: none of them has a run to cancel)
        for thread_id, going in await _going_runs(records, [_text(t) for t in page]):
            runs = [run for run in [await records.get_run(thread_id, run_id) for run_id in going]
                    if run is not None and run.get("assistant_id") == assistant_id]
            if runs and await may_cancel(thread_id):
                for run in runs:
                    cancelled += await cancel_now(records, assistants, run, "interrupt") != "done"
    for member in await records.client.zrange(records.keys.scheduled, 0, -1):  # runs waiting for their time
        thread_id, _, run_id = _text(member).partition(" ")
        waiting = await records.get_run(thread_id, run_id)
        if waiting is not None and waiting.get("assistant_id") == assistant_id and await may_cancel(thread_id):
            cancelled += await cancel_scheduled(records, waiting, "interrupt")
    return cancelled


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


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


def nothing_to_cancel(run: dict[str, Any]) -> BadRequest:
    return BadRequest(404, f"run {run['run_id']!r} on thread {run['thread_id']!r} is neither pending nor running "
                           "(it has ended, or was cancelled already): there is nothing to cancel")
