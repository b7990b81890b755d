"""What each thread holds in Redis: checkpoints, bytes (MEMORY USAGE) and when its last checkpoint was written.

Read with plain commands, never the LOAD script, so looking at a thread does not restart its TTL.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from reactgraph.memory.redis_checkpoint import layout

if TYPE_CHECKING:
    from reactgraph.memory.redis_checkpoint.core import RedisSaverCore

_CHUNK = 100  # threads per round trip


@dataclass(frozen=True)
class ThreadUsage:
    """One thread's footprint: its checkpoints (per namespace), bytes of its keys, its newest checkpoint's time."""

    thread_id: str
    per_namespace: dict[str, int]
    bytes: int
    last_checkpoint_at: datetime | None

    @property
    def checkpoints(self) -> int:
        return sum(self.per_namespace.values())


def usage_plan(saver: RedisSaverCore, thread_ids: Sequence[str] | None) -> Generator[Any, Any, None]:
    """Yields command lists (and gets their replies), then a `ThreadUsage` per thread that has keys."""
    threads = list(thread_ids) if thread_ids is not None else (yield from saver._threads_plan())
    for start in range(0, len(threads), _CHUNK):
        chunk = threads[start:start + _CHUNK]
        bases = [saver._base(t) for t in chunk]
        ns_sets = yield [("SMEMBERS", base + "ns") for base in bases]
        namespaces = [sorted(ns.decode() for ns in nss) for nss in ns_sets]
        commands: list[Any] = []
        for base, nss in zip(bases, namespaces, strict=True):
            keys = [base + "ns", base + "runs", *(base + kind + ns for ns in nss for kind in layout.KINDS)]
            # SAMPLES 0: every element is counted; the default samples five and guesses the rest
            commands += [("MEMORY", "USAGE", key, "SAMPLES", 0) for key in keys]
            commands += [("ZCARD", base + "c:" + ns) for ns in nss]
            commands += [("ZREVRANGEBYLEX", base + "c:" + ns, "+", "-", "LIMIT", 0, 1) for ns in nss]
        replies = iter((yield commands))
        newest: list[list[tuple[str, str]]] = []
        totals = []
        for nss in namespaces:
            size = sum(next(replies) or 0 for _ in range(2 + len(layout.KINDS) * len(nss)))
            counts = {ns: next(replies) for ns in nss}
            tops = [(ns, ids[0].decode()) for ns in nss if (ids := next(replies))]
            totals.append((size, counts))
            newest.append(tops)
        records = yield [("HGET", base + "cp:" + ns, cid) for base, tops in zip(bases, newest, strict=True)
                         for ns, cid in tops]
        records = iter(records)
        for thread, (size, counts), tops in zip(chunk, totals, newest, strict=True):
            stamps = [_written_at(saver, record) for record in (next(records) for _ in tops)]
            if size:
                yield ThreadUsage(thread, counts, size, max((s for s in stamps if s), default=None))


def _written_at(saver: RedisSaverCore, record: bytes | None) -> datetime | None:
    if record is None:
        return None
    try:  # Redis content: a damaged checkpoint has no known time (the session is not taken for idle by it)
        checkpoint, _ = saver.serde.loads_typed(layout.unpack_typed(record))
        return datetime.fromisoformat(checkpoint["ts"])
    except Exception:  # noqa: BLE001 - whatever a damaged record raises in the serializer, the time is unknown
        return None
