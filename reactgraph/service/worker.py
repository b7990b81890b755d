"""A worker: it claims threads with work from the queue and runs their runs one at a time under each thread's
session lease, ending every run once, with a cause.

A worker that gets a thread's token takes its lease (the CLI's lease too), bumps its fence, runs its runs in
order until none waits, then releases it and acknowledges the token. The lease, not the stream, decides who
runs, so a run longer than the claim idle time is never run twice: a token claimed again only retries the lease,
and a dead holder's active run is resumed from its last checkpoint once that lease expires (at most MAX_RESUMES
times). Each way a run ends is its own branch: success, cancelled (`interrupt` keeps what it did, `rollback`
deletes it), failed, fenced out, and the worker stopping (SIGTERM: each running run stops at its next step
boundary, LangGraph's `RunControl.request_drain`, with every finished step saved; one still inside a step after
`drain_s` is stopped where it is; either way it is handed back and resumed by the next worker, without running a
finished tool call again).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import redis.asyncio
from langgraph.errors import GraphDrained
from langgraph.runtime import RunControl

from reactgraph.errors import ReactGraphError
from reactgraph.memory.session_lease import SessionBusy, asession_lease, lease_ttl
from reactgraph.service.assistants.catalogue import Assistants
from reactgraph.service.connections import REDIS_DOWN, Outage, service_connections
from reactgraph.service.events import EarlierAttempts, bounded, max_event_bytes, run_events
from reactgraph.service.keys import ServiceKeys
from reactgraph.service.records import RunRecord, ServiceRecords, now_iso
from reactgraph.service.retention import Retention, sweep_forever
from reactgraph.service.run_request import RunPolicy, check_resume, graph_call, graph_options, run_context
from reactgraph.service.threads import FencedOut, ThreadHold, expire_run, forget_temporary_thread, thread_after_run
from reactgraph.service.wire import dumps
from reactgraph.service.work_queue import WorkQueue, promote_forever, sweep_lost_tokens_forever, sweep_settings

log = logging.getLogger("reactgraph.service")
CANCEL_POLL_S = 0.2
MAX_RESUMES = 3  # times a run left unended by its worker is resumed by another before it ends `error`
# the worker stops (a SIGTERM drain at a step boundary too); the run is resumed by the next holder
_NOT_THE_RUNS_OUTCOME = (FencedOut, asyncio.CancelledError, GraphDrained, *REDIS_DOWN)
STOP_WAIT_S = 5.0  # for the stream's tasks to end once the run is over (they do at once unless one is stuck)


class Cancelled(ReactGraphError):
    def __init__(self, action: str) -> None:
        super().__init__(action)
        self.action = action


async def execute_run(hold: ThreadHold, records: ServiceRecords, assistants: Assistants, run_id: str,
                      resumed: bool, attempt: int = 1, max_resumes: int = MAX_RESUMES,
                      control: RunControl | None = None) -> tuple[str, RunRecord | None]:
    """Run `run_id` to its end on the held thread; returns its final status and its record as it was read (a
    rolled-back run's goes from Redis). Whatever fails on the way — the graph, reading the thread after it,
    writing a status — the run ends here, once, with a cause; only the worker's own stopping (a lost fence, Redis
    gone, shutdown) leaves it for the next holder."""
    thread_id = hold.thread_id
    run = await records.get_run(thread_id, run_id)
    if run is None:  # deleted while it waited (or its record is unreadable): nothing to run
        await hold.end_run(run_id, "")
        return "gone", None
    run["status"] = "running"
    # The thread reads busy before the run reads running: a client that saw the run running and then read the thread
    # found it still idle. Neither is written if a cancel came first (the API has then shown the thread as the run
    # leaves it); one that comes between the two finds the thread busy and frees it, as after a start.
    await records.set_thread_status_if(thread_id, run_id, "started", "busy")
    started = await records.start_run(run)  # not if a cancel came first: the run then never reads `running`
    outcome = Outcome(cancel=None if started else await records.cancel_requested(thread_id, run_id) or "interrupt")
    if started:
        if not resumed:
            await records.count("started")
        if attempt > 1 + max_resumes:
            outcome.failed(run_id, "RunAttemptsExhausted",
                           f"run {run_id} was taken by a worker {attempt} times without ending (each holder stopped "
                           f"before it could finish: a crash, a kill, a lost connection); at most {max_resumes} "
                           "resumptions are allowed, so it ends here")
        else:
            await _run_graph(hold, records, assistants, run, attempt if resumed else 0, outcome, control)
        if outcome.error is not None:
            await hold.add_event(run_id, "error", dumps(outcome.error))
    return await _end(hold, records, assistants, run, started, outcome), run


async def end_abandoned_run(hold: ThreadHold, records: ServiceRecords, assistants: Assistants, run: RunRecord,
                            action: str) -> str:
    """End a cancelled run that no worker holds (its worker died and none has taken the thread since) as its
    worker would have: the caller holds the thread's lease and has just taken the thread."""
    return await _end(hold, records, assistants, run, True, Outcome(cancel=action))


class Outcome:
    """How a run ended: its status, the cause when it failed, the cancel action when somebody stopped it."""

    def __init__(self, cancel: str | None = None) -> None:
        self.status, self.cancel = "success", cancel
        self.error: dict[str, str] | None = None

    def failed(self, run_id: str, kind: str, message: str) -> None:
        if self.error is None:  # the first cause is the run's; later ones are in the log
            self.status, self.error = "error", {"error": kind, "message": message[:2000]}
        log.warning("run %s failed: %s: %s", run_id, kind, message.splitlines()[0][:300] if message else "")


async def _run_graph(hold: ThreadHold, records: ServiceRecords, assistants: Assistants, run: RunRecord,
                     resumed_at: int, outcome: Outcome, control: RunControl | None = None) -> None:
    """Stream the run's graph (`resumed_at`: the attempt that resumes it from its last checkpoint, 0 when new)."""
    try:
        await _stream(hold, records, assistants.for_run(run).graph, assistants, run, resumed_at, control)
    except Cancelled as stop:
        outcome.cancel = stop.action
    except _NOT_THE_RUNS_OUTCOME:
        raise
    except Exception as exc:  # the run failed: the error is the run's outcome, the worker goes on
        log.debug("run %s failed", run["run_id"], exc_info=True)
        outcome.failed(run["run_id"], type(exc).__name__, str(exc) or type(exc).__name__)


async def _end(hold: ThreadHold, records: ServiceRecords, assistants: Assistants, run: RunRecord,
               started: bool, outcome: Outcome) -> str:
    """The run's end: its checkpoints rolled back if asked, the thread's status, its record, its stream closed."""
    thread_id, run_id, cancel = hold.thread_id, run["run_id"], outcome.cancel
    if cancel == "rollback":  # what the run wrote goes: its checkpoints carry its run id
        await assistants.checkpointer.adelete_for_runs([run_id])
    # The thread's status first: a client that sees the run end (the stream's end) must see the thread after it.
    forgotten = await _settle_thread(hold, records, assistants, run, outcome)
    status = "interrupted" if cancel is not None else outcome.status
    run["status"], run["updated_at"] = status, now_iso()  # when it ended (the record written at its start: the start)
    if outcome.error is not None:
        run["error"] = outcome.error
    await hold.end_run(run_id, "" if cancel == "rollback" else _record_json(run))
    if cancel == "rollback":
        await records.delete_run(thread_id, run_id)
    if started:
        await records.count_finished(status, _seconds_since(run["created_at"]))
    else:
        await records.count("cancelled_before_start")
    if forgotten:
        await expire_run(records, thread_id, run_id)
    return status


async def _settle_thread(hold: ThreadHold, records: ServiceRecords, assistants: Assistants, run: RunRecord,
                         outcome: Outcome) -> bool:
    """The thread's status after the run (`error` when its state cannot be read back, which fails the run too);
    a stateless run's thread goes with it (its record and events stay a while, for its readers). Whether it went."""
    thread_id, run_id = hold.thread_id, run["run_id"]
    status = "interrupted" if outcome.cancel is not None else outcome.status
    try:
        thread_status, interrupts = await thread_after_run(assistants.for_run(run).graph, thread_id, status)
    except _NOT_THE_RUNS_OUTCOME:
        raise
    except Exception as exc:  # noqa: BLE001 - a state no read can decode: the thread is in error, the run too
        first = outcome.error is None
        outcome.failed(run_id, type(exc).__name__, f"the thread's state could not be read after the run: {exc}")
        thread_status, interrupts = "error", {}
        if first and outcome.cancel is None:
            await hold.add_event(run_id, "error", dumps(outcome.error))
    try:
        if outcome.cancel is None:
            if await records.client.llen(records.keys.pending(thread_id)):
                thread_status = "busy"  # a run waits: it is the thread's work now (as the Agent Server shows it)
            await records.set_thread_status(thread_id, thread_status, interrupts=interrupts)
        else:  # unless the API showed the thread's status when it cancelled the run: it keeps that (no flip)
            await records.set_thread_status_if(thread_id, run_id, "stopped", thread_status, interrupts=interrupts)
        return bool(run["kwargs"].get("temporary")) and await forget_temporary_thread(records, assistants, thread_id)
    except _NOT_THE_RUNS_OUTCOME:
        raise
    except Exception as exc:  # noqa: BLE001 - the run still ends; what could not be written is in the log
        outcome.failed(run_id, type(exc).__name__, f"the thread's status could not be written: {exc}")
        return False


def _record_json(run: RunRecord) -> str:
    """The run's final record as stored: as written, unless it holds text Redis cannot take as UTF-8 (a lone
    surrogate from a client's JSON escape), which is then stored escaped, as JSON allows."""
    text = json.dumps(run, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(run)
    return text


async def _stream(hold: ThreadHold, records: ServiceRecords, graph: Any, assistants: Assistants,
                  run: RunRecord, resumed_at: int, control: RunControl | None = None) -> None:
    gateway, policy = assistants.gateway, assistants.run_policy
    kwargs, thread_id, run_id = run["kwargs"], hold.thread_id, run["run_id"]
    graph_input, config = graph_call(kwargs, thread_id, run_id, resumed=resumed_at > 0)
    await hold.add_event(run_id, "metadata", dumps({"run_id": run_id, "attempt": max(1, resumed_at)}))
    # the policy again: the stored record is untrusted too (a refusal fails the run before anything starts)
    context = run_context(kwargs.get("context") or {}, policy, gateway)
    if kwargs.get("strict_resume") and graph_input is not None and not resumed_at:
        await check_resume(graph, config, kwargs.get("command"))
    stream = run_events(graph, graph_input, config, run_id, kwargs["stream_mode"],
                        kwargs.get("stream_subgraphs", False), context=context, **graph_options(kwargs),
                        interrupt_before=kwargs.get("interrupt_before"), interrupt_after=kwargs.get("interrupt_after"),
                        **({"control": control} if control is not None else {}))
    over = asyncio.Event()
    watcher = asyncio.create_task(watch_cancel(records, thread_id, run_id, over))
    earlier = await EarlierAttempts.read(hold.client, hold.keys, thread_id, run_id) if resumed_at else None
    producer = asyncio.create_task(_forward(hold, run_id, stream, earlier))
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


async def _forward(hold: ThreadHold, run_id: str, stream: Any, earlier: EarlierAttempts | None) -> None:
    async for name, data in stream:
        text = dumps(data)
        if earlier is not None and earlier.streamed_before(name, data, bounded(name, text, hold.max_event_bytes)):
            continue
        await hold.add_event(run_id, name, text)


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


HEARTBEAT_S = 2.0
CLAIM_BATCH = 100  # idle tokens claimed at a time


class Worker:
    """Runs the service's runs; any number of them, on any machines, may share one Redis."""

    def __init__(self, client: redis.asyncio.Redis, assistants: Assistants, *, keys: ServiceKeys | None = None,
                 concurrency: int = 4, drain_s: float = 30.0, claim_idle_s: float | None = None,
                 name: str | None = None, retention: Retention | None = None, max_resumes: int = MAX_RESUMES
                 ) -> None:
        self.client, self.assistants = client, assistants
        self.keys = keys or ServiceKeys()
        self.records = ServiceRecords(client, self.keys)
        self.name = name or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.queue = WorkQueue(client, self.keys, self.name)
        self.concurrency, self.drain_s = concurrency, drain_s
        self.lease_ttl_s = lease_ttl()
        self.max_event_bytes = max_event_bytes()  # a bad $REACTGRAPH_MAX_EVENT_BYTES stops the worker at its start
        self.token_sweep = sweep_settings()  # likewise a bad $REACTGRAPH_TOKEN_SWEEP_S
        self.claim_idle_s = claim_idle_s if claim_idle_s is not None else self.lease_ttl_s
        self.saver = assistants.checkpointer
        self._stopping = asyncio.Event()
        # Asked to drain when the worker stops: each run ends at its next step boundary, saved, for the next worker.
        self.control = RunControl()
        self._tasks: set[asyncio.Task] = set()
        self._holding: set[str] = set()  # threads this worker holds now: their spare tokens are acknowledged at once
        self.runs_done = 0
        self.retention = retention
        self.max_resumes = max_resumes

    def stop(self) -> None:
        """Ask the loop to drain and end (what SIGTERM does): running runs stop at their next step boundary."""
        self._stopping.set()
        self.control.request_drain("worker shutdown")

    async def run(self, *, install_signals: bool = True) -> None:
        await self.queue.ensure_group()
        if install_signals:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(sig, self.stop)
        beat = asyncio.create_task(self._heartbeat())
        tokens_sweeper = asyncio.create_task(sweep_lost_tokens_forever(self.queue, self._stopping, *self.token_sweep))
        # runs created with after_seconds join their threads' queues when due
        promoter = asyncio.create_task(promote_forever(self.client, self.keys, self.queue, self._stopping))
        sweeper: asyncio.Task | None = None
        if self.retention is not None:
            sweeper = asyncio.create_task(sweep_forever(self.records, self.saver, self.retention, self._stopping,
                                                         self.assistants.store))
        last_claim, outage = 0.0, Outage(f"worker {self.name}", log)
        try:
            while not self._stopping.is_set():
                free = self.concurrency - len(self._tasks)
                if free <= 0:
                    await asyncio.wait(self._tasks, timeout=1.0, return_when=asyncio.FIRST_COMPLETED)
                    continue
                try:
                    tokens = await self.queue.read(free, block_ms=500)
                    if time.monotonic() - last_claim >= min(self.claim_idle_s, 5.0) / 2:
                        last_claim = time.monotonic()
                        # more than the free slots: the spare ones among them are acknowledged at once
                        tokens += await self.queue.claim_idle(self.claim_idle_s, CLAIM_BATCH)
                    await self._dispatch(tokens, free)
                except REDIS_DOWN as exc:  # the worker waits for Redis; its threads' runs resume when it is back
                    await outage.wait(exc)  # (tokens read and not yet acknowledged are claimed again once idle)
                    continue
                outage.ok()
        finally:
            await self._drain()
            for background in (beat, tokens_sweeper, sweeper, promoter):
                if background is not None:
                    background.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await background
            with contextlib.suppress(*REDIS_DOWN, redis.ResponseError):
                await self.client.zrem(self.keys.workers, self.name)
                await self.queue.leave()

    async def _dispatch(self, tokens: list[tuple[str, str]], slots: int) -> None:
        """A task for each token of a thread with work, up to `slots` (the others stay unacknowledged, claimed again
        once idle); spare tokens — of a thread with nothing left to do, or one this worker holds now (its holder
        looks for new runs before it lets go: see _serve_thread) — are acknowledged at once, all in a few round
        trips (a backlog of spare tokens drains fast)."""
        spare = []
        for (entry_id, thread_id), has_work in zip(tokens, await self.records.busy_many([t for _, t in tokens]),
                                                   strict=True):
            if thread_id in self._holding or not has_work:
                spare.append(entry_id)
                continue
            if slots <= 0:
                continue
            slots -= 1
            self._holding.add(thread_id)
            task = asyncio.create_task(self._serve_thread(entry_id, thread_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        await self.queue.ack(*spare)

    async def _drain(self) -> None:
        if self._tasks:
            log.info("worker %s: draining %d thread(s) for up to %g s", self.name, len(self._tasks), self.drain_s)
            _done, pending = await asyncio.wait(self._tasks, timeout=self.drain_s)
            for task in pending:  # stopped where they are: their runs stay active and are resumed elsewhere
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)

    async def _heartbeat(self) -> None:
        while True:
            with contextlib.suppress(*REDIS_DOWN):  # missed beats are what /metrics should show
                await self.client.zadd(self.keys.workers, {self.name: time.time() * 1000})
            await asyncio.sleep(HEARTBEAT_S)

    async def _serve_thread(self, entry_id: str, thread_id: str) -> None:
        handed_back = False
        try:
            async with asession_lease(self.saver, thread_id, ttl_s=self.lease_ttl_s, wait_s=0):
                hold = await ThreadHold.take(self.client, self.keys, thread_id, self.max_event_bytes)
                try:
                    await self._drain_thread(hold)
                except (asyncio.CancelledError, GraphDrained) as stop:
                    # shutting down (stopped at a step boundary, or cut where it was after --drain): the next worker
                    # resumes the active run, not counted as a crash (see ThreadHold.hand_back)
                    handed_back = True
                    with contextlib.suppress(*REDIS_DOWN, FencedOut):
                        await asyncio.shield(hold.hand_back())
                    if isinstance(stop, asyncio.CancelledError):
                        raise
                    return
        except SessionBusy:
            return  # left unacknowledged: retried once idle (see the module docstring)
        except REDIS_DOWN as exc:  # the run stays active; the token, unacknowledged, is retried once idle
            log.warning("worker %s: thread %s stopped, Redis unreachable (%s); it resumes when Redis is back",
                        self.name, thread_id, str(exc).splitlines()[0][:200])
            return
        except FencedOut as exc:
            log.warning("worker %s: %s; leaving the thread to it", self.name, exc)
        except Exception:  # a broken thread must not take the worker down; its token is retried when idle, and
            # its run, taken again, counts one more attempt (execute_run ends it once they are used up)
            log.exception("worker %s: thread %s failed", self.name, thread_id)
            return
        finally:
            # before the check below: a token acknowledged as spare while the thread was held came from a run that
            # the check then sees
            self._holding.discard(thread_id)
            if handed_back:
                await asyncio.shield(self._hand_back(entry_id, thread_id))
        await self.queue.ack(entry_id)
        if await self.records.busy(thread_id):  # a run arrived while we released: make sure somebody runs it
            await self.queue.notify(thread_id)

    async def _hand_back(self, entry_id: str, thread_id: str) -> None:
        with contextlib.suppress(*REDIS_DOWN):  # then the token stays unacknowledged and is claimed once idle
            await self.queue.notify(thread_id)
            await self.queue.ack(entry_id)

    async def _drain_thread(self, hold: ThreadHold) -> None:
        last: tuple[RunRecord, str] | None = None  # the last run this hold ran, and how it ended
        while not self._stopping.is_set():
            taken = await hold.next_run()
            if taken is None:
                if last is not None:
                    await _settle_left_busy(hold, self.records, self.assistants, *last)
                return
            run_id, resumed, attempt = taken
            if resumed:
                log.info("worker %s: resuming run %s on thread %s from its last checkpoint (attempt %d)", self.name,
                         run_id, hold.thread_id, attempt)
            status, run = await execute_run(hold, self.records, self.assistants, run_id, resumed, attempt,
                                            self.max_resumes, self.control)
            last = (run, status) if run is not None else None
            self.runs_done += 1


async def _settle_left_busy(hold: ThreadHold, records: ServiceRecords, assistants: Assistants, run: RunRecord,
                            status: str) -> None:
    """A run's end leaves its thread busy while another run waits (`_settle_thread`); if that one was cancelled
    before it started, after the check, no run follows: the thread gets its status after the last run now."""
    thread = await records.get_thread(hold.thread_id)
    if thread is None or thread["status"] != "busy" or status == "gone":
        return
    thread_status, interrupts = await thread_after_run(assistants.for_run(run).graph, hold.thread_id, status)
    await records.set_thread_status_if(hold.thread_id, run["run_id"], "stopped", thread_status, interrupts=interrupts)


async def serve_worker(redis_url: str, gateway: Any, run_policy: RunPolicy | None = None, **options: Any) -> None:
    """Open the saver, store and graphs on `redis_url` and run a worker until SIGTERM, under the operator's
    run policy (reactgraph/service/run_request.py; None: its defaults)."""
    async with service_connections(redis_url, gateway, run_policy=run_policy) as (client, assistants):
        await Worker(client, assistants, **options).run()
