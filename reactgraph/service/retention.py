"""Thread retention for the service: threads idle longer than a TTL are deleted, or pruned to their latest
checkpoint (`keep_latest`), by a sweeper that runs in the workers — one at a time across all of them.

The settings have the shape of LangGraph's `checkpointer.ttl` in langgraph.json (`strategy`, `default_ttl` in
minutes, `sweep_interval_minutes`, `sweep_limit`), read from there or given as `reactgraph serve|worker`
options. Only threads the service knows are swept (`reactgraph prune` keeps the CLI's sessions).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from reactgraph.errors import ReactGraphError
from reactgraph.graph.sessions import adrop_session_items
from reactgraph.memory.redis_checkpoint import AsyncRedisSaver
from reactgraph.service.records import ServiceRecords
from reactgraph.service.server_config import BadServerConfig, LanggraphConfig

log = logging.getLogger("reactgraph.service")
STRATEGIES = ("delete", "keep_latest")


class BadRetention(ReactGraphError, ValueError):
    """Retention settings that cannot be used; the message names the setting and what is accepted."""


@dataclass(frozen=True)
class Retention:
    ttl_s: float
    strategy: str = "delete"
    sweep_every_s: float = 300.0
    sweep_limit: int = 10_000

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise BadRetention(f"retention strategy must be delete or keep_latest, not {self.strategy!r}")
        if not (self.ttl_s > 0 and self.sweep_every_s > 0 and 1 <= self.sweep_limit <= 1_000_000):
            raise BadRetention("retention needs a TTL and a sweep interval above 0 and a sweep limit from 1 to 1000000")

    @classmethod
    def from_langgraph_ttl(cls, ttl: Any) -> Retention:
        """From langgraph.json's `checkpointer.ttl` object (minutes, as LangGraph counts them)."""
        if not isinstance(ttl, dict) or not isinstance(ttl.get("default_ttl"), int | float):
            raise BadRetention('checkpointer.ttl must be an object with a number "default_ttl" (minutes)')
        every = ttl.get("sweep_interval_minutes") or 5
        return cls(ttl_s=float(ttl["default_ttl"]) * 60, strategy=str(ttl.get("strategy") or "delete"),
                   sweep_every_s=float(every) * 60, sweep_limit=int(ttl.get("sweep_limit") or 10_000))


def retention_in(config: LanggraphConfig) -> Retention | None:
    """The `checkpointer.ttl` of a langgraph.json, or None if it sets none."""
    try:
        ttl = config.section("checkpointer").get("ttl")
    except BadServerConfig as exc:
        raise BadRetention(str(exc)) from None
    return None if ttl is None else Retention.from_langgraph_ttl(ttl)


async def sweep(records: ServiceRecords, saver: AsyncRedisSaver, retention: Retention, store: Any = None
                ) -> dict[str, int]:
    """One pass: threads idle past the TTL (and not busy) deleted or pruned; {"deleted": n, "pruned": m}.
    A deleted thread's session items in `store` (its Q&A log, its lessons) are deleted too."""
    cutoff_ms = (time.time() - retention.ttl_s) * 1000
    idle: Any = await records.client.zrangebyscore(records.keys.unswept, "-inf", cutoff_ms, start=0,
                                                   num=retention.sweep_limit)
    done = {"deleted": 0, "pruned": 0}
    for raw in idle:
        thread_id = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        if await records.busy(thread_id):
            continue
        if retention.strategy == "delete":
            await saver.adelete_thread(thread_id)
            await adrop_session_items(store, thread_id)
            await records.delete_thread(thread_id)
            done["deleted"] += 1
            continue
        await saver.aprune([thread_id], strategy="keep_latest")
        for run_id in await records.run_ids(thread_id, limit=10_000):
            await records.delete_run(thread_id, run_id)  # finished long ago: their records and events go too
        # not swept again until it is used again (put_thread puts it back, with the time of that use)
        await records.client.zrem(records.keys.unswept, thread_id)
        done["pruned"] += 1
    return done


async def sweep_forever(records: ServiceRecords, saver: AsyncRedisSaver, retention: Retention,
                        stopping: asyncio.Event, store: Any = None) -> None:
    """Sweep every `sweep_every_s`: the first worker to take the interval's lock sweeps, the others skip it (the
    lock expires with the interval, so however many workers run, the service sweeps once per interval)."""
    lock = f"{records.keys.prefix}sweeper"
    while not stopping.is_set():
        if await records.client.set(lock, uuid.uuid4().hex, nx=True, px=int(retention.sweep_every_s * 1000)):
            try:
                done = await sweep(records, saver, retention, store)
                if any(done.values()):
                    log.info("retention: %(deleted)d thread(s) deleted, %(pruned)d pruned", done)
            except Exception:  # a failed sweep is retried at the next interval; the worker goes on
                log.exception("retention sweep failed")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), timeout=retention.sweep_every_s)
