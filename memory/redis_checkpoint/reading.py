"""Script replies into CheckpointTuples, each part checked: what cannot be read says which key and why.

Everything read from Redis is untrusted: a record, its channel list (v:), a channel blob, a pending write or a
sealed page may be garbled, missing, or crafted to name a callable. A checkpoint is returned whole or not at
all (a missing blob would otherwise silently drop a channel from the state); the one that cannot be read
becomes an `UnreadableCheckpoint` that names the checkpoint, the Redis key and field, and the reason. A page
that cannot be read at all spoils the checkpoints in it, and is named by the newest of them (`kind` "p:").
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, DeltaChannelHistory, PendingWrite, writes_sort_key
from langgraph.checkpoint.serde.base import SerializerProtocol

from reactgraph.errors import ReactGraphError
from reactgraph.memory.redis_checkpoint import layout, pages
from reactgraph.memory.redis_checkpoint.serde import RefusedPayload

log = logging.getLogger("reactgraph.memory.redis_checkpoint")
_RECORD_KEYS = ("v", "id", "ts", "channel_versions", "versions_seen")
Write = tuple[str, str, int, str, tuple[str, bytes]]  # task path, task id, idx, channel, typed value


class UnreadableCheckpoint(ReactGraphError, ValueError):
    """A stored checkpoint that cannot be read back; `checkpoint_id`, `key`, `field` and `reason` say which and why.

    `kind` is the part at fault (layout.KINDS): "cp:" record, "v:" channel list, "b:" blob, "w:" pending write,
    "p:" a sealed page (or a part of one), or "c:" for an id in the index that has no record at all (so nothing of
    the session's is lost by skipping it).
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
    """One namespace of one thread: where the checkpoints of a reply live."""

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


class PageCache:
    """Pages decoded lately, by the digest of their bytes: a page is read whole, and history reads it again and
    again. Keyed by content, so a page rewritten in Redis is never served stale."""

    def __init__(self, size: int = 16) -> None:
        self._pages: OrderedDict[bytes, pages.Page | pages.PageFault] = OrderedDict()
        self._size, self._lock = size, threading.Lock()

    def decode(self, data: bytes) -> pages.Page:
        key = hashlib.blake2b(data, digest_size=16).digest()
        with self._lock:
            found = self._pages.get(key)
            if found is not None:
                self._pages.move_to_end(key)
        if found is None:
            try:
                found = pages.decode(data)
            except pages.PageFault as fault:
                found = fault
            with self._lock:
                self._pages[key] = found
                while len(self._pages) > self._size:
                    self._pages.popitem(last=False)
        if isinstance(found, pages.PageFault):
            raise found
        return found


@dataclass
class PageView:
    """A page of a reply: its index entry, its bytes, and the page or why it cannot be read."""

    ref: layout.PageRef
    data: bytes | None
    page: pages.Page | None
    fault: str | None = None

    def sha1(self) -> str:
        """What REWRITE_PAGES compares to see that the page is still as read."""
        return hashlib.sha1(self.data or b"").hexdigest()  # a change check, as Lua's redis.sha1hex

    def holds(self, checkpoint_id: str) -> int | None:
        return self.page.position(checkpoint_id) if self.page is not None else None


@dataclass
class Loaded:
    """A LOAD (or DELTA_HISTORY) reply's parts: checkpoints on their own, pages, and writes kept apart from a page."""

    source: Source
    own: dict[str, list[Any]] = field(default_factory=dict)  # id -> [record, links, blobs, wfields, wvalues]
    paged: list[PageView] = field(default_factory=list)
    late: dict[str, list[tuple[bytes, bytes | None]]] = field(default_factory=dict)
    orphans: list[str] = field(default_factory=list)
    capped: bool = False

    def add(self, entry: list[Any], cache: PageCache) -> bool:
        """Take one tagged entry ('c', 'p' or 'w'); False for any other."""
        tag = entry[0]
        if tag == b"c":
            self.own[entry[1].decode(errors="replace")] = entry[2:7]
        elif tag == b"p":
            self.paged.append(_view(entry[1], entry[2], cache))
        elif tag == b"w":
            for wfield, value in zip(entry[1], entry[2], strict=True):
                cid = wfield.split(b"\0", 1)[0].decode(errors="replace")
                self.late.setdefault(cid, []).append((wfield, value))
        else:
            return False
        return True

    def holder(self, checkpoint_id: str) -> tuple[PageView, int] | None:
        """The page that holds this id (the newest page, by seq, when two do)."""
        found = [(view, i) for view in self.paged if (i := view.holds(checkpoint_id)) is not None]
        return max(found, key=lambda hit: hit[0].ref.seq) if found else None

    def merge(self, other: Loaded) -> None:
        self.own.update(other.own)
        self.paged += other.paged
        for cid, writes in other.late.items():
            self.late.setdefault(cid, []).extend(writes)
        self.orphans += other.orphans

    def damaged(self, checkpoint_id: str) -> PageView | None:
        return next((v for v in self.paged if v.page is None and v.ref.may_hold(checkpoint_id)), None)

    def read(self, serde: SerializerProtocol, checkpoint_id: str) -> CheckpointTuple | UnreadableCheckpoint | None:
        """The checkpoint with this id: on its own, else from the page that holds it; None if the reply has none."""
        if checkpoint_id in self.own:
            return read_checkpoint(serde, self.source, checkpoint_id, self.own[checkpoint_id])
        hit = self.holder(checkpoint_id)
        if hit is not None:
            return read_paged(serde, self.source, hit[0], hit[1], self.late.get(checkpoint_id, []))
        view = self.damaged(checkpoint_id)
        return page_unreadable(self.source, view, checkpoint_id) if view is not None else None

    def ids(self) -> list[str]:
        """Every id the reply holds, readable or not (a damaged page by its newest id, an id in the index without a
        record too), newest first."""
        found = set(self.own) | set(self.orphans)
        for view in self.paged:
            found.update(view.page.ids if view.page is not None else [view.ref.newest])
        return sorted(found, reverse=True)


def _view(member: bytes, data: bytes | None, cache: PageCache) -> PageView:
    ref = layout.PageRef.parse(member)
    if data is None:
        return PageView(ref, None, None, "it is missing")
    try:
        return PageView(ref, data, cache.decode(data))
    except pages.PageFault as fault:
        return PageView(ref, data, None, str(fault))


def page_unreadable(source: Source, view: PageView, checkpoint_id: str) -> UnreadableCheckpoint:
    ref = view.ref
    return source.unreadable(checkpoint_id, "p:", f"its page ({ref.count} checkpoints, {ref.oldest} to {ref.newest}) "
                             f"cannot be read: {view.fault}", ref.member)


def parse_load(source: Source, reply: list[Any], cache: PageCache) -> Loaded:
    """A LOAD reply: status first (mode, then ids in the index without a record), then tagged entries."""
    status, entries = reply[0], reply[1:]
    loaded = Loaded(source, orphans=[o.decode(errors="replace") for o in status[1:]], capped=status[0] == b"capped")
    for entry in entries:
        loaded.add(entry, cache)
    return loaded


def orphan_error(source: Source, checkpoint_id: str) -> UnreadableCheckpoint:
    return source.unreadable(checkpoint_id, "c:", "the index lists it but it has no record", None)


def read_checkpoint(serde: SerializerProtocol, source: Source, checkpoint_id: str,
                    entry: list[Any]) -> CheckpointTuple | UnreadableCheckpoint:
    """One checkpoint on its own (record, links, blobs, write fields, write values)."""
    try:
        return _decode(serde, source, checkpoint_id, *entry)
    except _Fault as fault:
        return source.unreadable(checkpoint_id, fault.kind, fault.reason, fault.field)


def _record(serde: SerializerProtocol, checkpoint_id: str, record: bytes, kind: str,
            where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    with _at(kind, where):
        checkpoint, metadata = serde.loads_typed(layout.unpack_typed(record))
        if not (isinstance(checkpoint, dict) and isinstance(metadata, dict)
                and all(k in checkpoint for k in _RECORD_KEYS) and isinstance(checkpoint["channel_versions"], dict)):
            raise ValueError("not a checkpoint record")
        if checkpoint["id"] != checkpoint_id:
            raise _Fault(kind, where, f"its record is that of checkpoint {str(checkpoint['id'])[:40]!r}")
    return checkpoint, metadata


def _check_pairs(checkpoint: dict[str, Any], pairs: list[tuple[str, str]], kind: str, where: str) -> None:
    if dict(pairs) != {c: str(v) for c, v in checkpoint["channel_versions"].items()}:
        raise _Fault(kind, where, "its channel list does not match its record's channel versions")


def _decode(serde: SerializerProtocol, source: Source, checkpoint_id: str, record: bytes, links: bytes | None,
            blobs: list[bytes | None], wfields: list[bytes], wvalues: list[bytes | None]) -> CheckpointTuple:
    checkpoint, metadata = _record(serde, checkpoint_id, record, "cp:", checkpoint_id)
    with _at("v:", checkpoint_id):
        if links is None:
            raise _Fault("v:", checkpoint_id, "its channel list is missing")
        parent, pairs = layout.parse_links(links)
        _check_pairs(checkpoint, pairs, "v:", checkpoint_id)
        if len(blobs) != len(pairs):
            raise _Fault("v:", checkpoint_id, "its channel list does not match its record's channel versions")
    values = {}
    for (channel, version), blob in zip(pairs, blobs, strict=True):
        blob_field = layout.blob_field(channel, version)
        with _at("b:", blob_field):
            if blob is None:
                raise _Fault("b:", blob_field, f"the value of channel {channel!r} is missing")
            if not blob.startswith(layout.EMPTY):
                values[channel] = serde.loads_typed(layout.unpack_typed(blob))
    checkpoint["channel_values"] = values
    writes = _decoded_writes(serde, [], list(zip(wfields, wvalues, strict=True)), source)
    return _tuple(source, checkpoint_id, checkpoint, metadata, parent, writes)


def _tuple(source: Source, checkpoint_id: str, checkpoint: dict[str, Any], metadata: dict[str, Any],
           parent: str | None, writes: list[PendingWrite]) -> CheckpointTuple:
    return CheckpointTuple(
        config=source.config(checkpoint_id), checkpoint=checkpoint, metadata=metadata,  # type: ignore[arg-type]
        parent_config=source.config(parent) if parent else None, pending_writes=writes)


def read_paged(serde: SerializerProtocol, source: Source, view: PageView, i: int,
               late: list[tuple[bytes, bytes | None]]) -> CheckpointTuple | UnreadableCheckpoint:
    """Checkpoint `i` of a page, with the writes put for it after the page was sealed."""
    page, member = view.page, view.ref.member
    assert page is not None
    checkpoint_id = page.ids[i]
    try:
        checkpoint, metadata = _record(serde, checkpoint_id, page.records[i], "p:", member)
        with _at("p:", member):
            refs, page_writes = page.row(i)
        if set(refs) != set(checkpoint["channel_versions"]):
            raise _Fault("p:", member, "its channel values in its page do not match its record's channel versions")
        values = {}
        for channel, ref in refs.items():
            with _at("p:", member):
                typed = page.typed(ref)
                if typed is not None:
                    values[channel] = serde.loads_typed(typed)
        checkpoint["channel_values"] = values
        with _at("p:", member):
            own = [(path, task, idx, channel, page.typed(ref)) for task, path, idx, channel, ref in page_writes]
        writes = _decoded_writes(serde, own, late, source, member)  # type: ignore[arg-type]
    except _Fault as fault:
        return source.unreadable(checkpoint_id, fault.kind, fault.reason, fault.field)
    return _tuple(source, checkpoint_id, checkpoint, metadata, page.parents[i], writes)


def _decoded_writes(serde: SerializerProtocol, own: list[Write], late: list[tuple[bytes, bytes | None]],
                    source: Source, member: str | None = None) -> list[PendingWrite]:
    """A checkpoint's pending writes in `writes_sort_key` order: a page's own, then those stored apart, where a
    task's regular write stays as first stored and a special one (error, interrupt, resume) as last stored."""
    merged: dict[tuple[str, int], tuple[Write, str, Any]] = {(w[1], w[2]): (w, "p:", member) for w in own}
    for wfield, wvalue in late:
        if wvalue is None:  # an index entry without its write: nothing to restore, but say so
            log.warning("%s: pending write %r listed without a value; ignored", source.key("wi:"), _text(wfield))
            continue
        with _at("w:", wfield):
            write = layout.parse_write(wfield, wvalue)
        if write[2] < 0 or (write[1], write[2]) not in merged:
            merged[(write[1], write[2])] = (write, "w:", wfield)
    writes = []
    for (path, task_id, idx, channel, typed), kind, where in merged.values():
        with _at(kind, where):
            writes.append((writes_sort_key(path, task_id, idx), task_id, channel, serde.loads_typed(typed)))
    writes.sort(key=lambda w: w[0])
    return [(task_id, channel, value) for _, task_id, channel, value in writes]


def delta_target(reply: list[Any]) -> str:
    """The checkpoint a DELTA_HISTORY reply walked from ('' when the thread has none)."""
    status = reply[0]
    return status[1].decode(errors="replace") if len(status) > 1 and status[1] else ""


_STOPPED = {b"capped": "its history is longer than a rebuild may walk",
            b"cycle": "its chain of parent checkpoints loops"}


@dataclass
class DeltaWalk:
    """`get_delta_channel_history` from DELTA_HISTORY replies: the script walks checkpoints on their own, and this
    goes on in the pages it sends when the chain reaches sealed ones (asking for another call when it leaves them).
    A walk that cannot finish (a loop or a gap in the parent chain, or one longer than allowed) is an
    `UnreadableCheckpoint` naming the target: a state rebuilt from part of its history would be wrong."""

    serde: SerializerProtocol
    source: Source
    target: str
    channels: Sequence[str]
    needed: bool  # a prefetch: only the channels LangGraph will ask about
    cap: int
    cache: PageCache
    visited: list[tuple[str, list[tuple[tuple[Any, ...], PendingWrite]]]] = field(default_factory=list)
    seeds: dict[str, Any] = field(default_factory=dict)
    want: set[str] = field(default_factory=set)
    _seen: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.want = set(self.channels)

    def feed(self, reply: list[Any]) -> str | None:
        """Take one reply; None when the walk is done, else the id to walk on from (with another call)."""
        status, entries = reply[0], reply[1:]
        loaded = Loaded(self.source)
        for entry in entries:
            if not loaded.add(entry, self.cache):
                self._ancestor(entry[1].decode(errors="replace"), entry[2], entry[3], entry[4])
        if status[0] == b"ok":
            return None
        if status[0] != b"paged":
            why = _STOPPED.get(status[0])
            if why is None:
                missing = status[2].decode(errors="replace") if len(status) > 2 else "?"
                why = f"its ancestor {missing} has no channel list"
            raise self.source.unreadable(self.target, "v:", f"a delta channel cannot be rebuilt: {why}", self.target)
        at = status[2].decode(errors="replace")
        return self._walk_pages(loaded, self._own(loaded, at) if status[3] == b"target" else at)

    def _ancestor(self, checkpoint_id: str, fields: list[bytes], values: list[bytes], seed_pairs: list[bytes]) -> None:
        try:
            writes = []
            for wfield, value in zip(fields, values, strict=True):
                with _at("w:", wfield):
                    path, task_id, idx, channel, typed = layout.parse_write(wfield, value)
                    write = (task_id, channel, self.serde.loads_typed(typed))
                    writes.append((writes_sort_key(path, task_id, idx), write))
            for channel_bytes, blob in zip(seed_pairs[::2], seed_pairs[1::2], strict=True):
                channel = channel_bytes.decode()
                with _at("b:", channel):
                    self.seeds[channel] = self.serde.loads_typed(layout.unpack_typed(blob))
                self.want.discard(channel)
        except _Fault as fault:
            raise self.source.unreadable(checkpoint_id, fault.kind, fault.reason, fault.field) from None
        self._visit(checkpoint_id, writes)

    def _visit(self, checkpoint_id: str, writes: list[tuple[tuple[Any, ...], PendingWrite]]) -> None:
        if checkpoint_id in self._seen:
            raise self.source.unreadable(self.target, "v:", f"a delta channel cannot be rebuilt: "
                                         f"{_STOPPED[b'cycle']}", self.target)
        if len(self.visited) >= self.cap:
            raise self.source.unreadable(self.target, "v:", f"a delta channel cannot be rebuilt: "
                                         f"{_STOPPED[b'capped']}", self.target)
        self.visited.append((checkpoint_id, writes))
        self._seen.add(checkpoint_id)

    def _own(self, loaded: Loaded, target: str) -> str | None:
        """A sealed target: the channels it stores need no walk (in a prefetch); the walk starts at its parent."""
        hit = loaded.holder(target)
        if hit is None:
            raise self._fault(loaded, target)
        view, i = hit
        page = view.page
        assert page is not None
        if self.needed:
            try:
                refs = page.row(i)[0]
            except pages.PageFault as fault:
                raise self.source.unreadable(target, "p:", str(fault), view.ref.member) from None
            for name in list(self.want):
                if refs.get(name) is not None or (refs and name not in refs):
                    self.want.discard(name)
        return page.parents[i]

    def _walk_pages(self, loaded: Loaded, cursor: str | None) -> str | None:
        while self.want and cursor:
            hit = loaded.holder(cursor)
            if hit is None:
                if loaded.damaged(cursor) is not None:
                    raise self._fault(loaded, cursor)
                return cursor  # on its own, or in a page not sent: the next call walks on from it
            view, i = hit
            page = view.page
            assert page is not None
            try:
                with _at("p:", view.ref.member):
                    refs, page_writes = page.row(i)
                    own = [(path, task, idx, ch, page.typed(ref)) for task, path, idx, ch, ref in page_writes
                           if ch in self.want]
                late = [(f, v) for f, v in loaded.late.get(cursor, []) if _channel_of(v) in self.want]
                writes = _decoded_writes(self.serde, own, late, self.source, view.ref.member)  # type: ignore[arg-type]
                for channel, ref in refs.items():
                    if channel in self.want and ref is not None:
                        with _at("p:", view.ref.member):
                            self.seeds[channel] = self.serde.loads_typed(page.typed(ref))  # type: ignore[arg-type]
                        self.want.discard(channel)
            except _Fault as fault:
                raise self.source.unreadable(cursor, fault.kind, fault.reason, fault.field) from None
            self._visit(cursor, [((), w) for w in writes])
            cursor = page.parents[i]
        return None

    def _fault(self, loaded: Loaded, checkpoint_id: str) -> UnreadableCheckpoint:
        view = loaded.damaged(checkpoint_id)
        if view is not None:
            return page_unreadable(self.source, view, checkpoint_id)
        return self.source.unreadable(self.target, "v:", f"a delta channel cannot be rebuilt: its ancestor "
                                      f"{checkpoint_id} has no channel list", self.target)

    def result(self) -> dict[str, DeltaChannelHistory]:
        """Per channel, the writes since its nearest stored value (oldest first, each checkpoint's in
        `writes_sort_key` order) and that value as `seed`."""
        writes: dict[str, list[PendingWrite]] = {c: [] for c in self.channels}
        for _, decoded in reversed(self.visited):  # oldest first
            for _, write in sorted(decoded, key=lambda w: w[0]):
                if write[1] in writes:
                    writes[write[1]].append(write)
        out: dict[str, DeltaChannelHistory] = {}
        for channel in self.channels:  # one the target stores a value of comes back empty: LangGraph asks for none
            entry = DeltaChannelHistory(writes=writes[channel])
            if channel in self.seeds:
                entry["seed"] = self.seeds[channel]
            out[channel] = entry
        return out


def _channel_of(value: bytes | None) -> str | None:
    """The channel of a stored write ("<task path>\\0<channel>\\0..."), None if it has none."""
    parts = value.split(b"\0", 2) if value is not None else []
    return parts[1].decode(errors="replace") if len(parts) > 2 else None


def delta_value(spec: Any, history: DeltaChannelHistory) -> Any:
    """A DeltaChannel's value rebuilt from its history (its stored value, then the writes since), by the channel's
    own reducer: `spec` is the graph's channel (`graph.channels[name]`)."""
    channel = spec.from_checkpoint(history.get("seed"))
    channel.replay_writes(history["writes"])
    return channel.get()
