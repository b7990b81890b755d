"""`reactgraph worker`: claim threads that have work from the Redis stream, run their runs one at a time.

The queue (a Redis Streams consumer group) carries "thread T has work" tokens, not runs: a worker that gets a
token takes T's session lease — the same lease the CLI takes — bumps T's fence, then runs T's runs in order
until none waits, releases the lease and acks the token. The lease, not the stream, decides who runs:

- a token for a thread whose lease is held is left unacknowledged; the holder looks for new runs after it
  releases, and if it died, the token is claimed again (XAUTOCLAIM) once idle and retried until the dead
  holder's lease has expired; the run left active is then resumed from its last checkpoint;
- so a run that takes longer than the claim idle time is never run twice: a claimer finds the lease held.
  (This is the trap of brokers that re-deliver a task idle too long: redelivery here only ever retries the lease.)

SIGTERM/SIGINT: stop taking tokens, let running runs finish for up to `drain_s`, then stop them where they
are: they stay active, their threads are handed back to the queue, and the next worker resumes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import time
import uuid
from typing import Any

import redis.asyncio

from reactgraph.memory.session_lease import SessionBusy, lease_ttl
from reactgraph.memory.session_lease_aio import asession_lease
from reactgraph.service.assistants import Assistants
from reactgraph.service.connections import REDIS_DOWN, Outage, service_connections
from reactgraph.service.events import max_event_bytes
from reactgraph.service.execute import MAX_RESUMES, execute_run
from reactgraph.service.keys import ServiceKeys
from reactgraph.service.records import ServiceRecords
from reactgraph.service.retention import Retention, sweep_forever
from reactgraph.service.threads import FencedOut, ThreadHold
from reactgraph.service.work_queue import WorkQueue, promote_forever, sweep_lost_tokens_forever, sweep_settings

log = logging.getLogger("reactgraph.service")
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
        self._tasks: set[asyncio.Task] = set()
        self._holding: set[str] = set()  # threads this worker holds now: their spare tokens are acknowledged at once
        self.runs_done = 0
        self.retention = retention
        self.max_resumes = max_resumes

    def stop(self) -> None:
        """Ask the loop to drain and end (what SIGTERM does)."""
        self._stopping.set()

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
                except asyncio.CancelledError:
                    handed_back = True  # shutting down: the next worker resumes the active run, not counted
                    with contextlib.suppress(*REDIS_DOWN, FencedOut):  # as a crash (see ThreadHold.hand_back)
                        await asyncio.shield(hold.hand_back())
                    raise
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
        while not self._stopping.is_set():
            taken = await hold.next_run()
            if taken is None:
                return
            run_id, resumed, attempt = taken
            if resumed:
                log.info("worker %s: resuming run %s on thread %s from its last checkpoint (attempt %d)", self.name,
                         run_id, hold.thread_id, attempt)
            await execute_run(hold, self.records, self.assistants, run_id, resumed, attempt, self.max_resumes)
            self.runs_done += 1


async def serve_worker(redis_url: str, gateway: Any, run_policy: Any = None, **options: Any) -> None:
    """Open the saver, store and graphs on `redis_url` and run a worker until SIGTERM, under the operator's
    run policy (reactgraph/service/run_request.py; None: its defaults)."""
    async with service_connections(redis_url, gateway) as (client, assistants):
        assistants.run_policy = run_policy
        await Worker(client, assistants, **options).run()
