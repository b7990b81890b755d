"""Key names and byte formats of the Redis checkpoint store, shared by the savers and the Lua scripts.

Every key of a thread starts with `<prefix>{<thread>}:` (the braces make it a cluster hash tag, so one
thread's keys share a slot and each script touches one slot). A checkpoint lives in one of two forms: on its
own (the newest few, and every checkpoint of a saver with `page_size=0`), in the keys below, or sealed with its
neighbours into a compressed page (`pages.py`). Per namespace `<ns>` of the thread, checkpoints on their own:

    <base>ns          SET   namespaces the thread has written
    <base>runs        ZSET  "<run_id>\\0<ns>\\0<checkpoint_id>", score 0: which checkpoints a run made
    <base>c:<ns>      ZSET  checkpoint ids, score 0; uuid6 ids sort by time, so lex order is history order
    <base>cp:<ns>     HASH  checkpoint id -> typed(serde([checkpoint without values, metadata]))
    <base>v:<ns>      HASH  checkpoint id -> "<parent id>\\0<channel>\\0<version>\\0<channel>\\0<version>..."
    <base>b:<ns>      HASH  "<channel>\\0<version>" -> typed(value) ("empty\\0" when the channel had none)
    <base>w:<ns>      HASH  "<checkpoint id>\\0<task id>\\0<idx>" -> "<task path>\\0<channel>\\0" + typed(value)
    <base>wi:<ns>     ZSET  the w: fields, score 0, so one checkpoint's writes are a ZRANGEBYLEX away

and sealed pages:

    <base>pi:<ns>     ZSET  page members "<newest id>\0<oldest id>\0<count>\0<seq>", score 0: lex order by newest id
    <base>p:<ns>      HASH  page member -> page bytes; field "" counts pages made (the seq, newest page wins a tie)

A run's checkpoints on their own are listed in `runs` one by one; once sealed, as "<run_id>\0<ns>\0" (no id):
the run has checkpoints in that namespace's pages, which say which in their records' metadata.

`typed(x)` is `<serde type>\\0<serde bytes>`. Names (channels, task ids, paths, run ids, checkpoint ids) never
contain NUL, so NUL is a safe separator; the namespace goes last in a key, so it may contain anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

KINDS = ("c:", "cp:", "v:", "b:", "w:", "wi:", "pi:", "p:")
EMPTY = b"empty\0"

_ESCAPES = {"%": "%25", "{": "%7B", "}": "%7D"}
_UNESCAPE = re.compile(r"%(25|7B|7D)")
_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")


def normalise_prefix(prefix: str) -> str:
    """`reactgraph` and `reactgraph:` name the same key space."""
    if "{" in prefix or "}" in prefix:
        raise ValueError(f"key prefix {prefix!r} must not contain braces: they would change the hash tag")
    return prefix if not prefix or prefix.endswith(":") else prefix + ":"


def thread_base(prefix: str, thread_id: str) -> str:
    """The common start of every key of one thread."""
    thread_id = str(thread_id)
    if "%" in thread_id or "{" in thread_id or "}" in thread_id:
        # Braces would end the hash tag early and let two thread ids share keys.
        thread_id = "".join(_ESCAPES.get(ch, ch) for ch in thread_id)
    return f"{prefix}{{{thread_id}}}:"


def thread_of(prefix: str, base: str) -> str:
    """The thread id a base (or any key of that thread) belongs to."""
    inner = base[len(prefix) + 1: base.index("}", len(prefix))]
    return _UNESCAPE.sub(lambda m: {"25": "%", "7B": "{", "7D": "}"}[m.group(1)], inner)


def scan_pattern(prefix: str, suffix: str) -> str:
    """A SCAN MATCH pattern for one kind of per-thread key under `prefix`."""
    return _GLOB_SPECIAL.sub(r"\\\1", prefix) + "{*}:" + suffix


def pack_typed(typed: tuple[str, bytes]) -> bytes:
    return typed[0].encode() + b"\0" + typed[1]


def unpack_typed(data: bytes) -> tuple[str, bytes]:
    cut = data.find(b"\0")
    if cut < 0:
        raise ValueError("no serializer type before the data")
    return data[:cut].decode(), data[cut + 1:]


def blob_field(channel: str, version: Any) -> str:
    return f"{channel}\0{version}"


def links(parent_id: str | None, channel_versions: dict[str, Any]) -> str:
    """The v: value: the parent id, then the blob field of every channel the checkpoint has."""
    parts = [parent_id or ""]
    for channel, version in channel_versions.items():
        parts.append(channel)
        parts.append(str(version))
    return "\0".join(parts)


def parse_links(data: bytes) -> tuple[str | None, list[tuple[str, str]]]:
    """Parent id and (channel, version) pairs of a v: value, in the order the script fetched their blobs."""
    parts = data.decode().split("\0")
    if len(parts) % 2 == 0:
        raise ValueError("a channel without a version")
    return parts[0] or None, list(zip(parts[1::2], parts[2::2], strict=True))


def write_field(checkpoint_id: str, task_id: str, idx: int) -> str:
    return f"{checkpoint_id}\0{task_id}\0{idx}"


def write_value(task_path: str, channel: str, typed: tuple[str, bytes]) -> bytes:
    return f"{task_path}\0{channel}\0{typed[0]}\0".encode() + typed[1]


def parse_write(field: bytes, value: bytes) -> tuple[str, str, int, str, tuple[str, bytes]]:
    """(task path, task id, idx, channel, typed value) of one stored write."""
    _, task_id, idx = field.decode().split("\0")
    parts = value.split(b"\0", 3)
    if len(parts) != 4:
        raise ValueError("not a task path, channel, type and data")
    path, channel, type_, data = parts
    return path.decode(), task_id, int(idx), channel.decode(), (type_.decode(), data)


def run_member(run_id: str, ns: str, checkpoint_id: str) -> str:
    return f"{run_id}\0{ns}\0{checkpoint_id}"


@dataclass(frozen=True)
class PageRef:
    """One sealed page as its index member names it: the range of ids it holds, how many, and its seq."""

    member: str
    newest: str
    oldest: str
    count: int
    seq: int

    @classmethod
    def parse(cls, member: bytes | str) -> PageRef:
        text = member.decode() if isinstance(member, bytes) else member
        newest, oldest, count, seq = text.split("\0")
        return cls(text, newest, oldest, int(count), int(seq))

    def may_hold(self, checkpoint_id: str) -> bool:
        return self.oldest <= checkpoint_id <= self.newest
