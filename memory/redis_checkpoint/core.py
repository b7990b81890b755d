"""What the sync and async Redis savers share: commands to send, replies to parse, multi-step plans.

Multi-step operations (list, prune, delete_for_runs) are written once as "plans": generators that
yield a list of commands and receive the replies, or yield a `CheckpointTuple` for the caller. The sync
and async savers only drive them, so the logic exists once and no I/O style leaks into it.

`prune(strategy="keep_latest")`: what stays of each namespace, and the script calls that drop the rest.

What each thread holds in Redis: checkpoints, bytes (MEMORY USAGE) and when its last checkpoint was written.

Read with plain commands, never the LOAD script, so looking at a thread does not restart its TTL.

Copying a thread's checkpoints to another thread, on one Redis or across the slots of a Redis Cluster.

On one Redis, COPY_THREAD (scripts.py) does it in one atomic script. Two threads of a cluster live in two
hash slots, maybe on two nodes, and no script may touch both, so there the copy is two scripts: READ_THREAD
takes a consistent picture of the source (atomically, on its node), WRITE_THREAD merges it into the target
(atomically, on its node). The target's indexes are written after its records, as PUT does, so a copy that
fails half-way leaves nothing visible.
"""

from __future__ import annotations

import logging
import math
import random
import threading
from collections import OrderedDict
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from reactgraph.memory.redis_checkpoint import layout, scripts
from reactgraph.memory.redis_checkpoint.reading import (
    Source,
    UnreadableCheckpoint,
    delta_target,
    delta_value,
    read_delta_history,
    read_reply,
)
from reactgraph.memory.redis_checkpoint.scripts import Script
from reactgraph.memory.redis_checkpoint.serde import AllowListSerializer
from reactgraph.memory.redis_checkpoint.wire import Command

log = logging.getLogger("reactgraph.memory.redis_checkpoint")
Plan = Generator[Any, Any, None]  # yields list[Command] (gets replies) or CheckpointTuple (gets None)
_PAGE = 50
_MAX_DELTA_NAMES = 32  # delta channel names remembered for prefetching (a graph has a few)
_MAX_PREFETCHED = 64  # prefetched histories waiting for their call (one per thread read at the same time)


class RedisSaverCore(BaseCheckpointSaver[str]):
    """Key layout, serialisation and operation plans; subclasses add the I/O.

    Without a `serde`, values are decoded by `AllowListSerializer()`: LangGraph's and LangChain's types only
    (pass `serde=AllowListSerializer([YourType, ...])` for state classes of your own).
    """

    # The latest checkpoint, damaged: passed over (logged) to the newest readable one, so that a person can fork
    # from an older one. False for a caller that carries on from the latest unattended (the service): it is
    # raised, since continuing from an older state would quietly drop what the damaged one held.
    pass_over_damaged_latest = True

    def __init__(self, *, url: str, prefix: str = "reactgraph", ttl: float | None = None,
                 serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde if serde is not None else AllowListSerializer())
        self.url = url
        self.prefix = layout.normalise_prefix(prefix)
        if ttl is not None and ttl <= 0:
            raise ValueError(f"ttl must be a positive number of seconds, not {ttl!r}")
        self.ttl = math.ceil(ttl) if ttl else 0  # EXPIRE takes whole seconds; never round down to "forever"
        # DeltaChannel rebuilds: the channel names LangGraph asked `get_delta_channel_history` for, and the histories
        # a `get_tuple` fetched for them in its own round trip, kept for the call that follows it (_prefetch_command).
        self._delta_names: set[str] = set()
        self._prefetched: OrderedDict[tuple[str, str, str], dict[str, DeltaChannelHistory]] = OrderedDict()
        self._prefetch_lock = threading.Lock()

    def get_next_version(self, current: str | int | None, channel: None = None) -> str:
        """LangGraph's version strings (InMemorySaver's, SqliteSaver's, the Agent Server's): a 32-digit counter and a
        random tail that keeps two forks' versions, and so their blobs, apart. The counter's form must stay: every
        process that writes a thread (the LangGraph API server parses the counter as 32 decimal digits) orders the
        versions as strings. The tail is 8 hex digits rather than a float's 18: a checkpoint holds each channel's
        version twice and each node's seen versions, so at ~30 channels that is ~500 bytes less per checkpoint."""
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(current.split(".")[0])
        return f"{current_v + 1:032}.{random.getrandbits(32):08x}"

    def _base(self, thread_id: str) -> str:
        return layout.thread_base(self.prefix, thread_id)

    # --- one-round-trip operations -------------------------------------------------------------------

    def _put_command(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                     new_versions: ChannelVersions) -> tuple[Command, RunnableConfig]:
        conf = config["configurable"]
        thread_id, ns = conf["thread_id"], conf.get("checkpoint_ns", "")
        base, cid = self._base(thread_id), checkpoint["id"]
        stored: dict[str, Any] = dict(checkpoint)  # the record; channel values go apart, one blob per version
        values: dict[str, Any] = stored.pop("channel_values", None) or {}
        meta = get_serializable_checkpoint_metadata(config, metadata)
        dumps = self.serde.dumps_typed
        run_id = meta.get("run_id")
        args: list[Any] = [
            base, ns, cid,
            layout.pack_typed(dumps([stored, meta])),
            layout.links(conf.get("checkpoint_id"), stored["channel_versions"]),
            self.ttl,
            layout.run_member(str(run_id), ns, cid) if run_id else "",
        ]
        for channel, version in new_versions.items():
            args.append(layout.blob_field(channel, version))
            args.append(layout.pack_typed(dumps(values[channel])) if channel in values else layout.EMPTY)
        saved: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}}
        return (scripts.PUT, 1, base + "ns", *args), saved

    def _put_writes_command(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                            task_path: str) -> Command | None:
        if not writes:
            return None
        conf = config["configurable"]
        ns, cid = conf.get("checkpoint_ns", ""), conf["checkpoint_id"]
        base = self._base(conf["thread_id"])
        dumps = self.serde.dumps_typed
        args: list[Any] = [base, ns, self.ttl]
        for idx, (channel, value) in enumerate(writes):
            widx = WRITES_IDX_MAP.get(channel, idx)
            args.append(layout.write_field(cid, task_id, widx))
            args.append(layout.write_value(task_path, channel, dumps(value)))
            args.append("1" if widx < 0 else "0")
        return (scripts.PUT_WRITES, 1, base + "ns", *args)

    def _load_command(self, thread_id: str, ns: str, *ids: str, below: str = "+") -> Command:
        """LOAD these ids, or (no ids) the newest checkpoint with a record below `below` (a lex bound)."""
        base = self._base(thread_id)
        mode = ("ids", *ids) if ids else ("range", below, 1)
        return (scripts.LOAD, 1, base + "ns", base, ns, self.ttl, *mode)

    def _get_plan(self, config: RunnableConfig) -> Plan:
        """get_tuple. By id: that checkpoint, or UnreadableCheckpoint. The latest: the newest that can be read,
        each one skipped on the way logged, so a damaged latest cannot hide the thread (LangGraph reads the latest
        to fork from an older one); more than ORPHAN_CAP skipped raises the first. Without
        `pass_over_damaged_latest`, a damaged one (not an id without a record) is raised instead."""
        conf = config["configurable"]
        thread_id, ns, wanted = conf["thread_id"], conf.get("checkpoint_ns", ""), get_checkpoint_id(config)
        source = Source(self._base(thread_id), thread_id, ns)
        prefetch = self._prefetch_command(source, wanted or "")
        if wanted:
            [reply, *history] = yield [self._load_command(thread_id, ns, wanted), *prefetch]
            read = read_reply(self.serde, source, reply)
            for item in (*read.orphans, *read.found):  # an id in the index without a record is no "None" either
                if isinstance(item, UnreadableCheckpoint):
                    raise item
                self._keep_prefetched(source, item, history)
                yield item
            return
        skipped: list[UnreadableCheckpoint] = []
        below = "+"
        while len(skipped) <= scripts.ORPHAN_CAP:
            [reply, *history] = yield [self._load_command(thread_id, ns, below=below), *prefetch]
            prefetch = []  # only with the newest: an older one read after a damaged one is rare
            read = read_reply(self.serde, source, reply)
            skipped += read.orphans
            if read.capped:
                raise skipped[0]  # so many ids without a record that the script gave up: say so
            if not read.found:
                break
            item = read.found[0]
            if isinstance(item, CheckpointTuple):
                for bad in skipped:
                    log.warning("%s; skipped", bad)
                self._keep_prefetched(source, item, history)
                yield item
                return
            if not self.pass_over_damaged_latest:
                raise item
            skipped.append(item)
            below = "(" + item.checkpoint_id
        damaged = [bad for bad in skipped if bad.kind != "c:"]
        if damaged or len(skipped) > scripts.ORPHAN_CAP:
            raise (damaged or skipped)[0]  # nothing readable, or we gave up: say why, never "an empty thread"
        for bad in skipped:
            log.warning("%s; skipped, and the thread has no other checkpoint", bad)

    def _delta_history_plan(self, config: RunnableConfig,
                            channels: Sequence[str]) -> Generator[Any, Any, Mapping[str, DeltaChannelHistory]]:
        """get_delta_channel_history: what the `get_tuple` before it fetched, else one DELTA_HISTORY script call
        that walks the whole parent chain on the server."""
        if not channels:
            return {}
        conf = config["configurable"]
        thread_id, ns, target = conf["thread_id"], conf.get("checkpoint_ns", ""), get_checkpoint_id(config) or ""
        if len(self._delta_names) < _MAX_DELTA_NAMES:
            self._delta_names.update(c for c in channels if isinstance(c, str) and len(c) <= 200)
        with self._prefetch_lock:
            kept = self._prefetched.pop((thread_id, ns, target), None) if target else None
        if kept is not None and all(c in kept for c in channels):
            return {c: kept[c] for c in channels}
        base = self._base(thread_id)
        [reply] = yield [(scripts.DELTA_HISTORY, 1, base + "ns", base, ns, target, scripts.MAX_DELTA_WALK, "all",
                          *channels)]
        return read_delta_history(self.serde, Source(base, thread_id, ns), target or "latest", channels, reply)

    def _prefetch_command(self, source: Source, target: str) -> list[Command]:
        """A DELTA_HISTORY call to send with a LOAD, in the same round trip, for the delta channels this saver has
        been asked about (LangGraph reads a checkpoint, then asks for their history: one round trip, not two)."""
        names = sorted(self._delta_names)
        if not names:
            return []
        return [(scripts.DELTA_HISTORY, 1, source.base + "ns", source.base, source.ns, target,
                 scripts.MAX_DELTA_WALK, "needed", *names)]

    def _keep_prefetched(self, source: Source, found: CheckpointTuple, history: list[Any]) -> None:
        """Keep a prefetched history for the `get_delta_channel_history` call that follows, when it is the found
        checkpoint's (a checkpoint written between the two scripts makes them differ: then it is asked anew)."""
        cid = found.config["configurable"]["checkpoint_id"]
        if not history or delta_target(history[0]) != cid:
            return
        names = sorted(self._delta_names)
        try:
            histories = read_delta_history(self.serde, source, cid, names, history[0])
        except UnreadableCheckpoint:
            return  # the explicit call raises it, for the checkpoint it is asked about
        checkpoint = found.checkpoint  # the channels LangGraph rebuilds: a version, and no value stored here
        needed = {n: h for n, h in histories.items()
                  if n in checkpoint["channel_versions"] and n not in checkpoint["channel_values"]}
        with self._prefetch_lock:
            self._prefetched[(source.thread_id, source.ns, cid)] = needed
            while len(self._prefetched) > _MAX_PREFETCHED:
                self._prefetched.popitem(last=False)

    def _readable(self, source: tuple[str, str], reply: list[Any]) -> list[CheckpointTuple]:
        """list's reading of a LOAD reply: what cannot be read is skipped with a warning (get_tuple raises it)."""
        thread_id, ns = source
        read = read_reply(self.serde, Source(self._base(thread_id), thread_id, ns), reply)
        for item in (*read.orphans, *read.found):
            if isinstance(item, UnreadableCheckpoint):
                log.warning("%s; skipped", item)
        return [item for item in read.found if not isinstance(item, UnreadableCheckpoint)]

    def _ids_command(self, config: RunnableConfig, limit: int, oldest_first: bool = False) -> Command:
        """The ids in the thread's index, newest first (or oldest first), readable or not (what `history` lists)."""
        conf = config["configurable"]
        key = self._base(conf["thread_id"]) + "c:" + conf.get("checkpoint_ns", "")
        if oldest_first:
            return ("ZRANGEBYLEX", key, "-", "+", "LIMIT", 0, limit)
        return ("ZREVRANGEBYLEX", key, "+", "-", "LIMIT", 0, limit)

    def _drop_command(self, config: RunnableConfig) -> Command:
        """Remove one checkpoint (record, channel list, writes, the blobs only it used); it may be unreadable."""
        conf = config["configurable"]
        base = self._base(conf["thread_id"])
        return (scripts.DROP_CHECKPOINT, 1, base + "ns", base, conf.get("checkpoint_ns", ""), conf["checkpoint_id"])

    def _delete_thread_command(self, thread_id: str) -> Command:
        base = self._base(thread_id)
        return (scripts.DELETE_THREAD, 1, base + "ns", base)

    def _copy_thread_command(self, source_thread_id: str, target_thread_id: str) -> Command:
        src, dst = self._base(source_thread_id), self._base(target_thread_id)
        return (scripts.COPY_THREAD, 2, src + "ns", dst + "ns", src, dst, self.ttl)

    # --- plans ---------------------------------------------------------------------------------------

    def _threads_plan(self) -> Generator[Any, Any, list[str]]:
        """Every thread under this prefix (a SCAN: fine for admin use, not for a hot path)."""
        threads, cursor, pattern = [], b"0", layout.scan_pattern(self.prefix, "ns")
        while True:
            [(cursor, keys)] = yield [("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)]
            threads += [layout.thread_of(self.prefix, k.decode()) for k in keys]
            if cursor in (b"0", 0, "0"):
                return sorted(set(threads))

    def _list_plan(self, config: RunnableConfig | None, filter: dict[str, Any] | None,
                   before: RunnableConfig | None, limit: int | None) -> Plan:
        if limit is not None and limit <= 0:
            return
        conf = (config or {}).get("configurable", {})
        threads = [conf["thread_id"]] if conf.get("thread_id") is not None else (yield from self._threads_plan())
        if not threads:
            return
        if conf.get("checkpoint_ns") is not None and conf.get("thread_id") is not None:
            sources = [(threads[0], conf["checkpoint_ns"])]
        else:
            ns_sets = yield [("SMEMBERS", self._base(t) + "ns") for t in threads]
            sources = [(t, ns.decode()) for t, nss in zip(threads, ns_sets, strict=True) for ns in sorted(nss)]
        if not sources:
            return
        wanted_id = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        if wanted_id:
            ids_per_source = [[wanted_id] if not before_id or wanted_id < before_id else [] for _ in sources]
        else:
            top = ("(" + before_id) if before_id else "+"
            cap = ("LIMIT", 0, limit) if limit and not filter else ()
            replies = yield [("ZREVRANGEBYLEX", self._base(t) + "c:" + ns, top, "-", *cap) for t, ns in sources]
            ids_per_source = [[i.decode() for i in ids] for ids in replies]
        # Newest first across every source, like the SQL savers' ORDER BY checkpoint_id DESC.
        order = sorted(((cid, s) for s, ids in enumerate(ids_per_source) for cid in ids),
                       key=lambda e: e[0], reverse=True)
        page = min(limit, 100) if limit and not filter else _PAGE
        remaining = limit
        for start in range(0, len(order), page):
            chunk = order[start:start + page]
            by_source: dict[int, list[str]] = {}
            for cid, s in chunk:
                by_source.setdefault(s, []).append(cid)
            replies = yield [self._load_command(sources[s][0], sources[s][1], *ids) for s, ids in by_source.items()]
            found = {}
            for s, reply in zip(by_source, replies, strict=True):
                for tup in self._readable(sources[s], reply):
                    found[(tup.config["configurable"]["checkpoint_id"], s)] = tup
            for key in chunk:
                hit = found.get(key)
                if hit is None or (filter and any(hit.metadata.get(k) != v for k, v in filter.items())):
                    continue
                yield hit
                if remaining is not None:
                    remaining -= 1
                    if remaining <= 0:
                        return

    def _prune_plan(self, thread_ids: Sequence[str], strategy: str, keep: int = 1,
                    channels: Mapping[str, Any] | None = None) -> Plan:
        """`keep_latest`: the newest `keep` checkpoints of each namespace stay (with what they need); `delete`."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
        if strategy == "keep_latest" and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
            raise ValueError(f"keep must be a whole number of checkpoints, at least 1, not {keep!r}")
        if not thread_ids:
            return
        if strategy == "delete":
            yield [self._delete_thread_command(t) for t in thread_ids]
            return
        yield from keep_latest_plan(self.serde, [self._base(t) for t in thread_ids], keep, channels)

    def _delete_for_runs_plan(self, run_ids: Sequence[str]) -> Plan:
        run_ids = [str(r) for r in run_ids]
        if not run_ids:
            return
        cursor, pattern = b"0", layout.scan_pattern(self.prefix, "runs")
        while True:
            [(cursor, keys)] = yield [("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)]
            if keys:
                yield [(scripts.DELETE_RUNS, 1, k, k[:-len(b"runs")], *run_ids) for k in keys]
            if cursor in (b"0", 0, "0"):
                return


def keep_latest_plan(serde: SerializerProtocol, bases: list[str], keep: int,
                     channels: Mapping[str, Any] | None = None) -> Generator[Any, Any, None]:
    """The newest `keep` checkpoints of each namespace of these threads (by key base) stay, with what they need.

    A kept checkpoint's DeltaChannels are rebuilt from the writes since their last snapshot, so those ancestors
    stay too (BaseCheckpointSaver.prune's warning). Given the graph's `channels` (their reducers), the oldest kept
    checkpoint gets its delta channels' whole values stored instead (`_DeltaSnapshot` blobs, as a snapshot step
    writes them), and the ancestors can go: the newer kept ones rebuild from it."""
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
            stored = _prunable_record(serde, base, ns, cid, record)
            if stored is None:  # a kept checkpoint we cannot read: leave the namespace as it is
                args = []
                break
            checkpoint, metadata = stored
            delta = sorted((metadata.get("counters_since_delta_snapshot") or {}).keys())
            if channels is not None and cid == ids[-1] and delta:
                delta = yield from _store_snapshots(serde, base, ns, cid, checkpoint, delta, channels)
            # DeltaChannels not stored at a kept checkpoint are rebuilt from ancestors' writes; the script keeps
            # those ancestors.
            args += [cid, len(delta), *delta]
        if args:
            commands.append((scripts.PRUNE, 1, base + "ns", base, ns, args[0], *args))
    if commands:
        yield commands


def _store_snapshots(serde: SerializerProtocol, base: str, ns: str, cid: str, checkpoint: dict[str, Any],
                     delta: list[str], channels: Mapping[str, Any]) -> Generator[Any, Any, list[str]]:
    """Store the whole value of `cid`'s delta channels that `channels` can rebuild; the ones left to rebuild from
    ancestors. A value is stored under the channel's version, as every checkpoint at that version holds it."""
    rebuildable = [name for name in delta if isinstance(channels.get(name), DeltaChannel)
                   and name in checkpoint["channel_versions"]]
    if not rebuildable:
        return delta
    [reply] = yield [(scripts.DELTA_HISTORY, 1, base + "ns", base, ns, cid, scripts.MAX_DELTA_WALK, "all",
                      *rebuildable)]
    try:
        histories = read_delta_history(serde, Source(base, "", ns), cid, rebuildable, reply)
    except UnreadableCheckpoint as exc:
        log.warning("not storing snapshots at %s before pruning: %s", cid, exc)
        return delta
    blobs: list[Any] = []
    for name in rebuildable:
        blobs += [layout.blob_field(name, checkpoint["channel_versions"][name]),
                  layout.pack_typed(serde.dumps_typed(_DeltaSnapshot(delta_value(channels[name], histories[name]))))]
    yield [("HSET", base + "b:" + ns, *blobs)]
    return [name for name in delta if name not in rebuildable]


def _prunable_record(serde: SerializerProtocol, base: str, ns: str, cid: str,
                     record: bytes | None) -> tuple[dict[str, Any], dict[str, Any]] | None:
    if record is None:
        return None
    try:
        checkpoint, metadata = serde.loads_typed(layout.unpack_typed(record))
        if not (isinstance(checkpoint, dict) and isinstance(checkpoint.get("channel_versions"), dict)):
            raise ValueError("not a checkpoint record")
    except Exception as exc:  # noqa: BLE001 - untrusted bytes fail in many ways; the namespace is left as is
        metadata = exc
    if isinstance(metadata, dict):
        return checkpoint, metadata
    log.warning("not pruning %scp:%s: its kept checkpoint %s is unreadable (%s)", base, ns, cid, metadata)
    return None


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


# KEYS[1] source ns-set; ARGV source base. Returns: the namespace count, then per namespace its name, for each
# of cp: v: b: w: the field count and the field/value pairs, for each of wi: c: the member count and members;
# last the runs index's count and members.
READ_THREAD = Script("read_thread", r"""
local src, out = ARGV[1], {}
local function put_all(items)
  out[#out + 1] = #items
  for _, x in ipairs(items) do out[#out + 1] = x end
end
local namespaces = redis.call('SMEMBERS', KEYS[1])
out[1] = #namespaces
for _, ns in ipairs(namespaces) do
  out[#out + 1] = ns
  for _, kind in ipairs({'cp:', 'v:', 'b:', 'w:'}) do
    local flat = redis.call('HGETALL', src .. kind .. ns)
    out[#out + 1] = #flat / 2
    for _, x in ipairs(flat) do out[#out + 1] = x end
  end
  put_all(redis.call('ZRANGE', src .. 'wi:' .. ns, 0, -1))
  put_all(redis.call('ZRANGE', src .. 'c:' .. ns, 0, -1))
end
put_all(redis.call('ZRANGE', src .. 'runs', 0, -1))
return out
""")

# KEYS[1] target ns-set; ARGV target base, ttl, then READ_THREAD's reply. Merges into the target.
WRITE_THREAD = Script("write_thread", r"""
local dst, at = ARGV[1], 3
local function next_count()
  local n = tonumber(ARGV[at]); at = at + 1
  return n
end
local function copy_hash(key)
  local n = next_count()  -- before `at` is read: it moves past the count
  local last = at + 2 * n - 1
  for i = at, last, 1000 do redis.call('HSET', key, unpack(ARGV, i, math.min(i + 999, last))) end
  at = last + 1
end
local function copy_zset(key)
  local n = next_count()
  local last, args = at + n - 1, {}
  for i = at, last do
    args[#args + 1] = 0
    args[#args + 1] = ARGV[i]
    if #args >= 1000 then redis.call('ZADD', key, unpack(args)); args = {} end
  end
  if #args > 0 then redis.call('ZADD', key, unpack(args)) end
  at = last + 1
end
local namespaces = next_count()
for _ = 1, namespaces do
  local ns = ARGV[at]; at = at + 1
  for _, kind in ipairs({'cp:', 'v:', 'b:', 'w:'}) do copy_hash(dst .. kind .. ns) end
  copy_zset(dst .. 'wi:' .. ns)
  copy_zset(dst .. 'c:' .. ns)  -- the index last: a copy that failed above shows nothing
  redis.call('SADD', KEYS[1], ns)
end
copy_zset(dst .. 'runs')
touch(dst, tonumber(ARGV[2]))
return namespaces
""", "touch")


def copy_thread_plan(saver: RedisSaverCore, source_thread_id: str, target_thread_id: str) -> Plan:
    """One script on one Redis; on a cluster, a read on the source's slot, then a write on the target's."""
    if not getattr(getattr(saver, "_wire", None), "is_cluster", False):
        yield [saver._copy_thread_command(source_thread_id, target_thread_id)]
        return
    src, dst = saver._base(source_thread_id), saver._base(target_thread_id)
    [picture] = yield [(READ_THREAD, 1, src + "ns", src)]
    if picture and int(picture[0]) > 0:
        yield [(WRITE_THREAD, 1, dst + "ns", dst, saver.ttl, *picture)]
