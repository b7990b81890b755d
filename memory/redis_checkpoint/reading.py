"""A LOAD reply into CheckpointTuples, each part checked: what cannot be read says which key and why.

Everything read from Redis is untrusted: a record, its channel list (v:), a channel blob or a pending write
may be garbled, missing, or crafted to name a callable. A checkpoint is returned whole or not at all (a
missing blob would otherwise silently drop a channel from the state); the one that cannot be read becomes
an `UnreadableCheckpoint` that names the checkpoint, the Redis key and field, and the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, DeltaChannelHistory, PendingWrite, writes_sort_key
from langgraph.checkpoint.serde.base import SerializerProtocol

from reactgraph.errors import ReactGraphError
from reactgraph.memory.redis_checkpoint import layout
from reactgraph.memory.redis_checkpoint.serde import RefusedPayload

log = logging.getLogger("reactgraph.memory.redis_checkpoint")
_RECORD_KEYS = ("v", "id", "ts", "channel_versions", "versions_seen")


class UnreadableCheckpoint(ReactGraphError, ValueError):
    """A stored checkpoint that cannot be read back; `checkpoint_id`, `key`, `field` and `reason` say which and why.

    `kind` is the part at fault (layout.KINDS): "cp:" record, "v:" channel list, "b:" blob, "w:" pending write, or
    "c:" for an id in the index that has no record at all (so nothing of the session's is lost by skipping it).
    """

    def __init__(self, thread_id: str, checkpoint_id: str, reason: str, key: str, field: str | None = None,
                 kind: str = "") -> None:
        self.thread_id, self.checkpoint_id, self.reason, self.key, self.field, self.kind = (
            thread_id, checkpoint_id, reason, key, field, kind)
        where = f"Redis key {key!r}" + (f", field {field!r}" if field is not None else "")
        super().__init__(f"checkpoint {checkpoint_id} of thread {thread_id!r} is unreadable: {reason} ({where})")


class _Fault(ReactGraphError):
    def __init__(self, kind: str, field: str | None, reason: str) -> None:
        super().__init__(reason)
        self.kind, self.field, self.reason = kind, field, reason


@contextmanager
def _at(kind: str, field: str | bytes | None) -> Iterator[None]:
    """Whatever goes wrong in the block is a fault of this key kind and field, in one line."""
    try:
        yield
    except _Fault:
        raise
    except RefusedPayload as exc:
        raise _Fault(kind, _text(field), str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - garbled bytes fail in many ways (ValueError, KeyError, Unicode...)
        detail = (str(exc).splitlines() or [""])[0][:120]
        raise _Fault(kind, _text(field), f"it cannot be decoded ({type(exc).__name__}: {detail})") from None


def _text(field: str | bytes | None) -> str | None:
    return field.decode(errors="replace") if isinstance(field, bytes) else field


@dataclass(frozen=True)
class Source:
    """One namespace of one thread: where the checkpoints of a LOAD reply live."""

    base: str
    thread_id: str
    ns: str

    def key(self, kind: str) -> str:
        return f"{self.base}{kind}{self.ns}"

    def config(self, checkpoint_id: str) -> RunnableConfig:
        return {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": self.ns,
                                 "checkpoint_id": checkpoint_id}}

    def unreadable(self, checkpoint_id: str, kind: str, reason: str, field: str | None = None) -> UnreadableCheckpoint:
        return UnreadableCheckpoint(self.thread_id, checkpoint_id, reason, self.key(kind), field, kind)


@dataclass(frozen=True)
class Reply:
    """A parsed LOAD reply: the checkpoints (or why each cannot be read) and the index's ids without a record."""

    found: list[CheckpointTuple | UnreadableCheckpoint]
    orphans: list[UnreadableCheckpoint]
    capped: bool  # the range stopped at scripts.ORPHAN_CAP ids without a record


def read_reply(serde: SerializerProtocol, source: Source, reply: list[Any]) -> Reply:
    status, entries = reply[0], reply[1:]
    orphans = [source.unreadable(o.decode(errors="replace"), "c:", "the index lists it but it has no record", None)
               for o in status[1:]]
    found = [read_checkpoint(serde, source, entries[i:i + 6]) for i in range(0, len(entries), 6)]
    return Reply(found, orphans, status[0] == b"capped")


def read_checkpoint(serde: SerializerProtocol, source: Source,
                    entry: list[Any]) -> CheckpointTuple | UnreadableCheckpoint:
    """One checkpoint of a LOAD reply (id, record, links, blobs, write fields, write values)."""
    checkpoint_id = entry[0].decode(errors="replace")
    try:
        return _decode(serde, source, checkpoint_id, *entry[1:])
    except _Fault as fault:
        return source.unreadable(checkpoint_id, fault.kind, fault.reason, fault.field)


def _decode(serde: SerializerProtocol, source: Source, checkpoint_id: str, record: bytes, links: bytes | None,
            blobs: list[bytes | None], wfields: list[bytes], wvalues: list[bytes | None]) -> CheckpointTuple:
    loads = serde.loads_typed
    with _at("cp:", checkpoint_id):
        checkpoint, metadata = loads(layout.unpack_typed(record))
        if not (isinstance(checkpoint, dict) and isinstance(metadata, dict)
                and all(k in checkpoint for k in _RECORD_KEYS) and isinstance(checkpoint["channel_versions"], dict)):
            raise ValueError("not a checkpoint record")
        if checkpoint["id"] != checkpoint_id:
            raise _Fault("cp:", checkpoint_id, f"its record is that of checkpoint {str(checkpoint['id'])[:40]!r}")
    with _at("v:", checkpoint_id):
        if links is None:
            raise _Fault("v:", checkpoint_id, "its channel list is missing")
        parent, pairs = layout.parse_links(links)
        if dict(pairs) != {c: str(v) for c, v in checkpoint["channel_versions"].items()} or len(blobs) != len(pairs):
            raise _Fault("v:", checkpoint_id, "its channel list does not match its record's channel versions")
    values = {}
    for (channel, version), blob in zip(pairs, blobs, strict=True):
        field = layout.blob_field(channel, version)
        with _at("b:", field):
            if blob is None:
                raise _Fault("b:", field, f"the value of channel {channel!r} is missing")
            if not blob.startswith(layout.EMPTY):
                values[channel] = loads(layout.unpack_typed(blob))
    checkpoint["channel_values"] = values
    writes = []
    for wfield, wvalue in zip(wfields, wvalues, strict=True):
        if wvalue is None:  # an index entry without its write: nothing to restore, but say so
            log.warning("%s: pending write %r listed without a value; ignored", source.key("wi:"), _text(wfield))
            continue
        with _at("w:", wfield):
            path, task_id, idx, channel, typed = layout.parse_write(wfield, wvalue)
            writes.append((writes_sort_key(path, task_id, idx), task_id, channel, loads(typed)))
    writes.sort(key=lambda w: w[0])
    return CheckpointTuple(
        config=source.config(checkpoint_id), checkpoint=checkpoint, metadata=metadata,  # type: ignore[arg-type]
        parent_config=source.config(parent) if parent else None,
        pending_writes=[(task_id, channel, value) for _, task_id, channel, value in writes],
    )


def delta_target(reply: list[Any]) -> str:
    """The checkpoint a DELTA_HISTORY reply walked from ('' when the thread has none)."""
    status = reply[0]
    return status[1].decode(errors="replace") if len(status) > 1 and status[1] else ""


def read_delta_history(serde: SerializerProtocol, source: Source, target: str, channels: Sequence[str],
                       reply: list[Any]) -> dict[str, DeltaChannelHistory]:
    """A DELTA_HISTORY reply as LangGraph's `get_delta_channel_history` returns it: per channel, the writes since its
    nearest stored value (oldest first, each checkpoint's in `writes_sort_key` order) and that value as `seed`.
    A walk that could not finish (a loop or a gap in the parent chain, or one longer than the script allows) is
    an `UnreadableCheckpoint` naming the target: a state rebuilt from part of its history would be wrong."""
    status, entries = reply[0], reply[1:]
    if status[0] != b"ok":
        why = {b"capped": "its history is longer than a rebuild may walk",
               b"cycle": "its chain of parent checkpoints loops"}.get(status[0])
        if why is None:
            missing = status[2].decode(errors="replace") if len(status) > 2 else "?"
            why = f"its ancestor {missing} has no channel list"
        raise source.unreadable(target, "v:", f"a delta channel cannot be rebuilt: {why}", target)
    writes: dict[str, list[PendingWrite]] = {c: [] for c in channels}
    seeds: dict[str, Any] = {}
    for checkpoint_id, fields, values, seed_pairs in reversed(entries):  # oldest first
        cid = checkpoint_id.decode(errors="replace")
        try:
            decoded = []
            for field, value in zip(fields, values, strict=True):
                with _at("w:", field):
                    path, task_id, idx, channel, typed = layout.parse_write(field, value)
                    decoded.append((writes_sort_key(path, task_id, idx), (task_id, channel, serde.loads_typed(typed))))
            for channel_bytes, blob in zip(seed_pairs[::2], seed_pairs[1::2], strict=True):
                channel = channel_bytes.decode()
                with _at("b:", channel):
                    seeds[channel] = serde.loads_typed(layout.unpack_typed(blob))
        except _Fault as fault:
            raise source.unreadable(cid, fault.kind, fault.reason, fault.field) from None
        for _, write in sorted(decoded, key=lambda w: w[0]):
            writes[write[1]].append(write)
    result: dict[str, DeltaChannelHistory] = {}
    for channel in channels:  # one the target stores a value of comes back empty: LangGraph asks for no such one
        entry = DeltaChannelHistory(writes=writes[channel])
        if channel in seeds:
            entry["seed"] = seeds[channel]
        result[channel] = entry
    return result


def delta_value(spec: Any, history: DeltaChannelHistory) -> Any:
    """A DeltaChannel's value rebuilt from its history (its stored value, then the writes since), by the channel's
    own reducer: `spec` is the graph's channel (`graph.channels[name]`)."""
    channel = spec.from_checkpoint(history.get("seed"))
    channel.replay_writes(history["writes"])
    return channel.get()
