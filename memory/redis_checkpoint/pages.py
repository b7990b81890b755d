"""Sealed pages: a run of one namespace's checkpoints in one compressed Redis value, and its bytes both ways.

Why pages. A checkpoint on its own costs Redis a hash field per record, channel list, blob and write, and a
sorted-set entry per index (50-150 bytes of overhead each), and it repeats what its parent holds: the ~30
channels' versions, each node's seen versions, the whole message list. On the ReAct graph that is ~80 KB a
turn (~9 checkpoints). Sealed together, a page keeps each distinct value once (a list's items apart, so a
message kept in the window for ten checkpoints is stored once) and zlib removes what consecutive records
repeat: measured ~2.5 KB a turn (benchmarks/session_growth.py). The newest checkpoints stay on their own, so
reading the latest state and writing the next one cost what they did.

A page holds, for each checkpoint, the bytes the savers wrote for it on its own, unchanged: its record
(`cp:`, which lists its channel versions), its parent (left out when it is the checkpoint before it in the
page), its writes, and per channel a reference to its value; channel values and write values are stored once
per page, a list value as its msgpack items (joined back into the very bytes that were written). The value
starts with `MAGIC` and a format byte, the version marker: a page of another format is refused, not guessed.

Reading trusts nothing: the zlib stream is inflated to at most `MAX_PAGE_BYTES`, the msgpack is a fixed shape
checked field by field, every index is bounds-checked, and values are decoded later by the allow-list serde.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import ormsgpack

from reactgraph.errors import ReactGraphError
from reactgraph.memory.redis_checkpoint import layout

MAGIC = b"RGP"
FORMAT = 1
MAX_PAGE_BYTES = 64 * 1024 * 1024  # inflated; a page the sealer would make bigger is not made (they stay on their own)
MAX_PAGE_CHECKPOINTS = 10_000
_LEVEL = 9  # 2% smaller than zlib's default 6 on session pages; sealing is once in `page_size` puts
_OPTIONS = ormsgpack.OPT_NON_STR_KEYS

ValueRef = int | list[int] | None  # no value stored | one whole typed element | a msgpack list of item elements


class PageFault(ReactGraphError, ValueError):
    """A page (or one checkpoint in it) that cannot be read; the message says why in one line."""


def _keep_ext(code: int, data: bytes) -> ormsgpack.Ext:
    return ormsgpack.Ext(code, data)


def _array_header(n: int) -> bytes:
    if n < 16:
        return bytes([0x90 | n])
    return (b"\xdc" + n.to_bytes(2, "big")) if n < 0x10000 else (b"\xdd" + n.to_bytes(4, "big"))


def split_list(typed: tuple[str, bytes]) -> list[bytes] | None:
    """A msgpack list value's items, each its own msgpack bytes, if joining them gives back the very bytes (else
    None: the value is kept whole). Nothing is built: extensions (messages, documents) stay opaque."""
    kind, data = typed
    if kind != "msgpack" or not data or not (0x90 <= data[0] <= 0x9F or data[0] in (0xDC, 0xDD)):
        return None
    try:
        items = ormsgpack.unpackb(data, ext_hook=_keep_ext, option=_OPTIONS)
        parts = [ormsgpack.packb(item, option=_OPTIONS) for item in items]
    except (ValueError, TypeError, RecursionError):
        return None
    return parts if _array_header(len(parts)) + b"".join(parts) == data else None


@dataclass
class Page:
    """The checkpoints of one page, in id order, with their values and writes by element index."""

    ids: list[str] = field(default_factory=list)
    parents: list[str | None] = field(default_factory=list)
    records: list[bytes] = field(default_factory=list)
    refs: list[Any] = field(default_factory=list)  # per checkpoint: channel -> its value (read them with `row`)
    writes: list[Any] = field(default_factory=list)  # per checkpoint: (task, path, idx, channel, value) (`row`)
    elements: list[bytes] = field(default_factory=list)
    _checked: set[int] = field(default_factory=set, repr=False, compare=False)

    def row(self, i: int) -> tuple[dict[str, ValueRef], list[tuple[str, str, int, str, ValueRef]]]:
        """Checkpoint `i`'s channel values and writes, checked the first time (a page from Redis is untrusted, and
        checking all of it for one checkpoint would cost most of reading it); PageFault if they are not sound."""
        if i not in self._checked:
            count, own = len(self.elements), self.refs[i]
            if not isinstance(own, dict):
                raise PageFault("a checkpoint's channel values are not a map")
            self.refs[i] = {_string(k, "channel"): _ref(v, count) for k, v in own.items()}
            self.writes[i] = [_write(w, count) for w in _list(self.writes[i], "writes")]
            self._checked.add(i)
        return self.refs[i], self.writes[i]

    def position(self, checkpoint_id: str) -> int | None:
        try:
            return self.ids.index(checkpoint_id)
        except ValueError:
            return None

    def typed(self, ref: ValueRef) -> tuple[str, bytes] | None:
        """The stored (type, bytes) of a value, None for a channel that had no value."""
        if ref is None:
            return None
        if isinstance(ref, int):
            return layout.unpack_typed(self.elements[ref])
        return "msgpack", _array_header(len(ref)) + b"".join(self.elements[i] for i in ref)

    def encode(self) -> bytes:
        parents = [None if i and parent == self.ids[i - 1] else parent or "" for i, parent in enumerate(self.parents)]
        body = ormsgpack.packb([FORMAT, self.ids, parents, self.records, self.refs,
                                [[list(w) for w in ws] for ws in self.writes], self.elements])
        if len(body) > MAX_PAGE_BYTES:
            raise PageFault(f"a page of {len(body):,} bytes is over the {MAX_PAGE_BYTES:,} a reader inflates")
        return MAGIC + bytes([FORMAT]) + zlib.compress(body, _LEVEL)


class PageBuilder:
    """Collects checkpoints (as stored on their own, or from other pages) into one page, each value once."""

    def __init__(self) -> None:
        self.page = Page()
        self._elements: dict[bytes, int] = {}

    def _element(self, data: bytes) -> int:
        index = self._elements.get(data)
        if index is None:
            index = self._elements[data] = len(self.page.elements)
            self.page.elements.append(data)
        return index

    def ref(self, typed: tuple[str, bytes] | None) -> ValueRef:
        if typed is None:
            return None
        items = split_list(typed)
        if items is None:
            return self._element(layout.pack_typed(typed))
        return [self._element(item) for item in items]

    def add(self, checkpoint_id: str, parent: str | None, record: bytes,
            values: dict[str, tuple[str, bytes] | None],
            writes: Iterable[tuple[str, str, int, str, tuple[str, bytes]]]) -> None:
        """One checkpoint: `values` maps each of its channels to (type, bytes), None for no value."""
        page = self.page
        page.ids.append(checkpoint_id)
        page.parents.append(parent)
        page.records.append(record)
        page.refs.append({channel: self.ref(typed) for channel, typed in values.items()})
        page.writes.append([(task, path, idx, channel, self.ref(typed)) for task, path, idx, channel, typed in writes])
        page._checked.add(len(page.ids) - 1)

    def add_from(self, source: Page, i: int, values: dict[str, tuple[str, bytes]] | None = None) -> None:
        """Checkpoint `i` of another page (its stored values replaced by `values`, by channel, if given)."""
        refs, source_writes = source.row(i)
        own = {channel: source.typed(ref) for channel, ref in refs.items()}
        own.update(values or {})
        writes = [(t, p, x, c, _present(source.typed(r))) for t, p, x, c, r in source_writes]
        self.add(source.ids[i], source.parents[i], source.records[i], own, writes)

    def build(self) -> Page:
        """The page, its checkpoints in id order."""
        page = self.page
        order = sorted(range(len(page.ids)), key=page.ids.__getitem__)
        for name in ("ids", "parents", "records", "refs", "writes"):
            items = getattr(page, name)
            setattr(page, name, [items[i] for i in order])
        return page  # every row of it is checked: the builder made them


def decode(data: bytes) -> Page:
    """A page's bytes into a `Page`, or PageFault saying in one line what is wrong with them."""
    if not isinstance(data, bytes) or not data.startswith(MAGIC) or len(data) < len(MAGIC) + 1:
        raise PageFault("it is not a page (no page marker)")
    if data[len(MAGIC)] != FORMAT:
        raise PageFault(f"it is a page of format {data[len(MAGIC)]}, which this react-graph does not read")
    inflate = zlib.decompressobj()
    try:
        body = inflate.decompress(data[len(MAGIC) + 1:], MAX_PAGE_BYTES)
    except zlib.error as exc:
        raise PageFault(f"its compressed bytes are damaged ({exc})") from None
    if inflate.unconsumed_tail:
        raise PageFault(f"it inflates to more than {MAX_PAGE_BYTES:,} bytes")
    if not inflate.eof:
        raise PageFault("its compressed bytes are cut short")
    try:
        shape = ormsgpack.unpackb(body, ext_hook=_no_ext)
    except (ValueError, TypeError, RecursionError) as exc:
        raise PageFault(f"its contents are not valid msgpack ({(str(exc).splitlines() or [''])[0][:80]})") from None
    return _checked(shape)


def _no_ext(code: int, data: bytes) -> Any:
    raise ValueError(f"unexpected msgpack extension {code}")


def _checked(shape: Any) -> Page:
    if not (isinstance(shape, list) and len(shape) == 7 and shape[0] == FORMAT):  # its rows: Page.row
        raise PageFault("its contents are not a page's")
    _, ids, parents, records, refs, writes, elements = shape
    n = len(ids) if isinstance(ids, list) else -1
    if not 0 < n <= MAX_PAGE_CHECKPOINTS or not all(isinstance(x, list) and len(x) == n
                                                    for x in (parents, records, refs, writes)):
        raise PageFault("its lists of checkpoints do not match")
    if not (isinstance(elements, list) and all(type(e) is bytes for e in elements)):
        raise PageFault("its values are not bytes")
    page = Page(ids=_strings(ids, "ids"), records=_bytes_list(records), refs=refs, writes=writes, elements=elements)
    for i, parent in enumerate(parents):  # none: the checkpoint before it in the page; "": no parent
        parent = page.ids[i - 1] if parent is None and i else _string(parent, "parent id")
        page.parents.append(parent or None)
    return page


def _string(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise PageFault(f"a {what} is not text")
    return value


def _strings(values: Any, what: str) -> list[str]:
    return [_string(v, what) for v in _list(values, what)]


def _optional_string(value: Any) -> str | None:
    return None if value is None else _string(value, "parent id")


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise PageFault(f"its {what} are not a list")
    return value


def _bytes_list(values: list[Any]) -> list[bytes]:
    if not all(isinstance(v, bytes) for v in values):
        raise PageFault("a record is not bytes")
    return values


def _ref(ref: Any, count: int) -> ValueRef:
    if ref is None:
        return None
    indexes = [ref] if isinstance(ref, int) else ref
    if not isinstance(indexes, list) or not all(isinstance(i, int) and 0 <= i < count for i in indexes):
        raise PageFault("a value points outside the page")
    return ref


def _write(write: Any, count: int) -> tuple[str, str, int, str, ValueRef]:
    if not (isinstance(write, list) and len(write) == 5 and isinstance(write[2], int)):
        raise PageFault("a pending write is not (task, path, index, channel, value)")
    task, path, idx, channel, ref = write
    if ref is None:
        raise PageFault("a pending write has no value")
    return (_string(task, "task id"), _string(path, "task path"), idx, _string(channel, "channel"),
            _ref(ref, count))


def _present(typed: tuple[str, bytes] | None) -> tuple[str, bytes]:
    if typed is None:
        raise PageFault("a pending write has no value")
    return typed


def seal(reply: list[Any]) -> tuple[Page, list[tuple[str, str]]]:
    """A page of the checkpoints a SEAL_READ reply holds ({id, record, links, write fields, write values}..., then
    the blob fields they use and their values), and (id, digest) of those in it. One whose stored parts do not hold
    together (no channel list, a missing blob, a garbled write) is left out, on its own, where reading it says what
    is wrong."""
    found, fields, blobs = reply
    stored = dict(zip(fields, blobs, strict=True))
    builder, sealed = PageBuilder(), []
    for entry in found:
        parts = _parts(entry, stored)
        if parts is not None:
            checkpoint_id = entry[0].decode()
            builder.add(checkpoint_id, *parts)
            sealed.append((checkpoint_id, digest(*entry[1:])))
    return builder.build(), sealed


def digest(record: bytes, links: bytes | None, wfields: list[bytes], wvalues: list[bytes | None]) -> str:
    """What SEAL_WRITE compares to see that a checkpoint is still as it was read (its Lua `digest`, the same bytes)."""
    parts = [record, links or b"", *(x or b"" for pair in zip(wfields, wvalues, strict=True) for x in pair)]
    return hashlib.sha1(b"".join(b"%d:%s" % (len(x), x) for x in parts)).hexdigest()  # a change check, as Lua's


def _parts(entry: list[Any], stored: dict[bytes, bytes | None]) -> tuple[Any, ...] | None:
    _, record, links, wfields, wvalues = entry
    try:
        if links is None:
            return None
        parent, pairs = layout.parse_links(links)
        found = [stored.get(layout.blob_field(c, v).encode()) for c, v in pairs]
        blobs = [blob for blob in found if blob is not None]
        if len(blobs) != len(found):
            return None
        layout.unpack_typed(record)
        values = {channel: None if blob.startswith(layout.EMPTY) else layout.unpack_typed(blob)
                  for (channel, _), blob in zip(pairs, blobs, strict=True)}
        writes = []
        for wfield, wvalue in zip(wfields, wvalues, strict=True):
            if wvalue is not None:  # an index entry without its write: reading ignores it too
                path, task_id, idx, channel, typed = layout.parse_write(wfield, wvalue)
                writes.append((task_id, path, idx, channel, typed))
    except ValueError:  # UnicodeDecodeError too
        return None
    return parent, record, values, writes
