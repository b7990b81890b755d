"""Execute one run on the thread a worker holds: stream the graph, write each event, end with a status.

Every way a run ends is its own branch: success (the thread may still wait on an interrupt), cancelled
(`interrupt` keeps what it did, `rollback` deletes its checkpoints and the run), failed (an `error` event
and status `error`), fenced out (another worker took the thread: stop writing, leave the run to it), and
the worker shutting down (the run stays active and is resumed from its checkpoint by the next holder).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from datetime import UTC, datetime
from typing import Any

from reactgraph.errors import ReactGraphError
from reactgraph.service.assistants import Assistants
from reactgraph.service.connections import REDIS_DOWN
from reactgraph.service.records import ServiceRecords, now_iso
from reactgraph.service.run_input import graph_call, run_context
from reactgraph.service.run_options import check_resume, graph_options
from reactgraph.service.stream_events import run_events
from reactgraph.service.temporary_threads import expire_run, forget_temporary_thread
from reactgraph.service.thread_hold import FencedOut, ThreadHold
from reactgraph.service.thread_state import thread_after_run
from reactgraph.service.wire import dumps

log = logging.getLogger("reactgraph.service")
CANCEL_POLL_S = 0.2
STOP_WAIT_S = 5.0  # for the stream's tasks to end once the run is over (they do at once unless one is stuck)


class Cancelled(ReactGraphError):
    def __init__(self, action: str) -> None:
        super().__init__(action)
        self.action = action


async def execute_run(hold: ThreadHold, records: ServiceRecords, assistants: Assistants, run_id: str,
                      resumed: bool) -> str:
    """Run `run_id` to its end on the held thread; returns its final status."""
    thread_id = hold.thread_id
    run = await records.get_run(thread_id, run_id)
    if run is None:  # deleted while it waited: nothing to run
        await hold.end_run(run_id, "")
        return "gone"
    entry = assistants.for_run(run)
    run["status"] = "running"
    started = await records.start_run(run)  # not if a cancel came first: the run then never reads `running`
    cancel = None if started else await records.cancel_requested(thread_id, run_id) or "interrupt"
    status, error = "success", None
    if started:
        if not resumed:
            await records.count("started")
        # unless it was cancelled meanwhile: the API has then shown the thread as the run will leave it
        await records.set_thread_status_if(thread_id, run_id, "started", "busy")
        try:
            await _stream(hold, records, entry.graph, assistants, run, resumed)
        except Cancelled as stop:
            cancel = stop.action
        except (FencedOut, asyncio.CancelledError, *REDIS_DOWN):  # not the run's outcome: it is resumed later
            raise
        except Exception as exc:  # the run failed: the error is the run's outcome, the worker goes on
            log.warning("run %s on thread %s failed: %s", run_id, thread_id, exc, exc_info=True)
            status, error = "error", {"error": type(exc).__name__, "message": str(exc)[:2000]}
            await hold.add_event(run_id, "error", dumps(error))
    if cancel is not None:
        status = "interrupted"
        if cancel == "rollback":  # what the run wrote goes: its checkpoints carry its run id
            await assistants.checkpointer.adelete_for_runs([run_id])
    run["status"] = status
    if error:
        run["error"] = error
    # The thread's status first: a client that sees the run end (the stream's end) must see the thread after it.
    thread_status, interrupts = await thread_after_run(entry.graph, thread_id, status)
    if cancel is None:
        await records.set_thread_status(thread_id, thread_status, interrupts=interrupts)
    else:  # unless the API has shown the thread's status when it cancelled the run: it keeps that one (no flip)
        await records.set_thread_status_if(thread_id, run_id, "stopped", thread_status, interrupts=interrupts)
    # a stateless run's thread goes with it (its record and events stay a while, for its readers)
    forgotten = bool(run["kwargs"].get("temporary")) and await forget_temporary_thread(records, assistants, thread_id)
    run["updated_at"] = now_iso()  # when it ended (the record written at its start carries the start)
    await hold.end_run(run_id, "" if cancel == "rollback" else json.dumps(run, ensure_ascii=False))
    if cancel == "rollback":
        await records.delete_run(thread_id, run_id)
    if started:
        await records.count_finished(status, _seconds_since(run["created_at"]))
    else:
        await records.count("cancelled_before_start")
    if forgotten:
        await expire_run(records, thread_id, run_id)
    return status


async def _stream(hold: ThreadHold, records: ServiceRecords, graph: Any, assistants: Assistants,
                  run: dict[str, Any], resumed: bool) -> None:
    gateway, policy = assistants.gateway, assistants.run_policy
    kwargs, thread_id, run_id = run["kwargs"], hold.thread_id, run["run_id"]
    graph_input, config = graph_call(kwargs, thread_id, run_id, resumed=resumed)
    await hold.add_event(run_id, "metadata", dumps({"run_id": run_id, "attempt": 1 + int(resumed)}))
    # the policy again: the stored record is untrusted too (a refusal fails the run before anything starts)
    context = run_context(kwargs.get("context") or {}, policy, gateway)
    if kwargs.get("strict_resume") and graph_input is not None and not resumed:
        await check_resume(graph, config, kwargs.get("command"))
    stream = run_events(graph, graph_input, config, run_id, kwargs["stream_mode"],
                        kwargs.get("stream_subgraphs", False), context=context, **graph_options(kwargs),
                        interrupt_before=kwargs.get("interrupt_before"), interrupt_after=kwargs.get("interrupt_after"))
    over = asyncio.Event()
    watcher = asyncio.create_task(watch_cancel(records, thread_id, run_id, over))
    producer = asyncio.create_task(_forward(hold, run_id, stream))
    try:
        done, _ = await asyncio.wait({watcher, producer}, return_when=asyncio.FIRST_COMPLETED)
        if watcher in done:
            await stop_task(producer)
            raise Cancelled(watcher.result() or "interrupt")
        producer.result()  # re-raises the run's error
    finally:
        over.set()  # the watcher ends by itself too: a cancellation can be lost inside redis-py's asyncio client
        for task in (watcher, producer):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.gather(watcher, producer, return_exceptions=True), STOP_WAIT_S)


async def _forward(hold: ThreadHold, run_id: str, stream: Any) -> None:
    async for name, data in stream:
        await hold.add_event(run_id, name, dumps(data))


async def stop_task(task: asyncio.Task) -> None:
    """Cancel `task` until it has ended. Once is not always enough: a cancellation that lands inside a redis-py
    asyncio command (an event written, a checkpoint saved) can be swallowed there (redis/redis-py#2028), and the run
    would go on — into a tool that may take minutes — so it is asked again until the task stops."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=CANCEL_POLL_S)
    with contextlib.suppress(asyncio.CancelledError, Exception):  # how it ended is not the run's outcome: cancelled
        task.result()


async def watch_cancel(records: ServiceRecords, thread_id: str, run_id: str, over: asyncio.Event) -> str | None:
    """The cancel action once somebody asks for one, or None once `over` is set (the run ended first).

    `over`, not only `Task.cancel()`, ends the loop: a cancellation that lands in a redis-py asyncio command can be
    swallowed there (redis/redis-py#2028), and the run's end would then wait on this loop for ever."""
    while not over.is_set():
        action = await records.cancel_requested(thread_id, run_id)
        if action is not None:
            return action
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(over.wait(), CANCEL_POLL_S)
    return None


def _seconds_since(stamp: str) -> float:
    try:
        return (datetime.now(UTC) - datetime.fromisoformat(stamp)).total_seconds()
    except (TypeError, ValueError):
        return 0.0

