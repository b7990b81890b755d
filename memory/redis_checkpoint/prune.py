"""`prune(strategy="keep_latest")`: what stays of each namespace, and the script calls that drop the rest."""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from reactgraph.memory.redis_checkpoint import layout, scripts

log = logging.getLogger("reactgraph.memory.redis_checkpoint")


def keep_latest_plan(serde: SerializerProtocol, bases: list[str], keep: int) -> Generator[Any, Any, None]:
    """The newest `keep` checkpoints of each namespace of these threads (by key base) stay, with what they need."""
    ns_sets = yield [("SMEMBERS", base + "ns") for base in bases]
    targets = [(base, ns.decode()) for base, nss in zip(bases, ns_sets, strict=True) for ns in nss]
    if not targets:
        return
    newest = yield [("ZREVRANGEBYLEX", base + "c:" + ns, "+", "-", "LIMIT", 0, keep) for base, ns in targets]
    kept = [(base, ns, [i.decode() for i in ids]) for (base, ns), ids in zip(targets, newest, strict=True) if ids]
    if not kept:
        return
    records = yield [("HMGET", base + "cp:" + ns, *ids) for base, ns, ids in kept]
    commands = []
    for (base, ns, ids), recs in zip(kept, records, strict=True):
        args: list[Any] = []
        for cid, record in zip(ids, recs, strict=True):
            if record is None:
                continue
            metadata = _prunable_metadata(serde, base, ns, cid, record)
            if metadata is None:  # a kept checkpoint we cannot read: leave the namespace as it is
                args = []
                break
            # DeltaChannels not snapshotted at a kept checkpoint are rebuilt from ancestors' writes;
            # the script keeps those ancestors (see BaseCheckpointSaver.prune).
            delta = sorted((metadata.get("counters_since_delta_snapshot") or {}).keys())
            args += [cid, len(delta), *delta]
        if args:
            commands.append((scripts.PRUNE, 1, base + "ns", base, ns, args[0], *args))
    if commands:
        yield commands


def _prunable_metadata(serde: SerializerProtocol, base: str, ns: str, cid: str,
                       record: bytes | None) -> dict[str, Any] | None:
    if record is None:
        return None
    try:
        metadata = serde.loads_typed(layout.unpack_typed(record))[1]
    except Exception as exc:  # noqa: BLE001 - untrusted bytes fail in many ways; the namespace is left as is
        metadata = exc
    if isinstance(metadata, dict):
        return metadata
    log.warning("not pruning %scp:%s: its kept checkpoint %s is unreadable (%s)", base, ns, cid, metadata)
    return None
