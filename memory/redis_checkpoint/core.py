"""What the sync and async savers share: commands to send, replies to parse, multi-step plans.

Multi-step operations (list, sealing a page, get_delta_channel_history over pages) are written once as
"plans": generators that yield a list of commands and receive the replies, or yield a `CheckpointTuple` for the
caller. The sync and async savers only drive them, so the logic exists once and no I/O style leaks into it.
Plans over whole threads (prune, usage, copying, dropping, deleting runs) are in `upkeep.py`.

Checkpoints are written on their own (`layout.py`); once a namespace holds more than `page_size` of them, the
`put` that found so seals all but the newest into a compressed page (`pages.py`): two more round trips, one
`put` in `page_size`. Reading the latest state, and writing the next, stay one round trip each.
"""

from __future__ import annotations

import bisect
import functools
import logging
import math
import random
import threading
from collections import OrderedDict
from collections.abc import Generator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
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

from reactgraph.memory.redis_checkpoint import layout, pages, scripts
from reactgraph.memory.redis_checkpoint.reading import (
    DeltaWalk,
    Loaded,
    PageCache,
    Source,
    UnreadableCheckpoint,
    delta_target,
    orphan_error,
    parse_load,
)
from reactgraph.memory.redis_checkpoint.serde import AllowListSerializer
from reactgraph.memory.redis_checkpoint.wire import Command

log = logging.getLogger("reactgraph.memory.redis_checkpoint")
Plan = Generator[Any, Any, None]  # yields list[Command] (gets replies) or CheckpointTuple (gets None)
_PAGE = 50  # checkpoints on their own loaded per round trip by `list`
_PAGES = 8  # sealed pages loaded per round trip by `list`
_MAX_DELTA_NAMES = 32  # delta channel names remembered for prefetching (a graph has a few)
_MAX_PREFETCHED = 64  # prefetched histories waiting for their call (one per thread read at the same time)
PAGE_SIZE = 32  # checkpoints per sealed page; benchmarks/session_growth.py measured 16, 32 and 64


class RedisSaverCore(BaseCheckpointSaver[str]):
    """Key layout, serialisation and operation plans; subclasses add the I/O.

    Without a `serde`, values are decoded by `AllowListSerializer()`: LangGraph's and LangChain's types only
    (pass `serde=AllowListSerializer([YourType, ...])` for state classes of your own). `page_size` checkpoints
    of a namespace are sealed into one compressed page once more than that are on their own (0: never; every
    checkpoint stays on its own, as the savers stored them before pages).
    """

    # The latest checkpoint, damaged: passed over (logged) to the newest readable one, so that a person can fork
    # from an older one. False for a caller that carries on from the latest unattended (the service): it is
    # raised, since continuing from an older state would quietly drop what the damaged one held.
    pass_over_damaged_latest = True

    def __init__(self, *, url: str, prefix: str = "reactgraph", ttl: float | None = None,
                 serde: SerializerProtocol | None = None, page_size: int = PAGE_SIZE) -> None:
        super().__init__(serde=serde if serde is not None else AllowListSerializer())
        self.url = url
        self.prefix = layout.normalise_prefix(prefix)
        if ttl is not None and ttl <= 0:
            raise ValueError(f"ttl must be a positive number of seconds, not {ttl!r}")
        self.ttl = math.ceil(ttl) if ttl else 0  # EXPIRE takes whole seconds; never round down to "forever"
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 0:
            raise ValueError(f"page_size must be a whole number of checkpoints (0: no pages), not {page_size!r}")
        self.page_size = page_size
        self._pages = PageCache()
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

    def _put_plan(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                  new_versions: ChannelVersions) -> Generator[Any, Any, tuple[RunnableConfig, Any]]:
        """put: one round trip, two when the checkpoint shares values with a sealed one that are stored nowhere else
        (a fork from an old checkpoint); returns its config and how many checkpoints are on their own."""
        command, saved = self._put_command(config, checkpoint, metadata, new_versions)
        [reply] = yield [command]
        if isinstance(reply, list):
            channels = [f.split(b"\0", 1)[0].decode() for f in reply]
            versions = {**{c: checkpoint["channel_versions"][c] for c in channels}, **new_versions}
            command, saved = self._put_command(config, checkpoint, metadata, versions)
            [reply] = yield [command]
            if isinstance(reply, list):
                raise RuntimeError(f"checkpoint {checkpoint['id']} was not saved: channel values it shares were "
                                   "dropped while it was written; try again")
        return saved, reply

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
        mode = ("ids", *ids) if ids else ("range", below)
        return (scripts.LOAD, 1, base + "ns", base, ns, self.ttl, *mode)

    def _pages_command(self, source: Source, members: Sequence[str]) -> Command:
        """LOAD these sealed pages, with the writes kept apart from their pages."""
        return (scripts.LOAD, 1, source.base + "ns", source.base, source.ns, self.ttl, "pages", *members)

    def _source(self, config: RunnableConfig) -> Source:
        conf = config["configurable"]
        return Source(self._base(conf["thread_id"]), conf["thread_id"], conf.get("checkpoint_ns", ""))

    def _seal_plan(self, config: RunnableConfig) -> Generator[Any, Any, None]:
        """Seal the oldest checkpoints of the namespace on their own, all but the newest, into one page. Nothing
        happens if one of them changed between reading and sealing (a write, a drop): the next put tries again."""
        source = self._source(config)
        [read] = yield [(scripts.SEAL_READ, 1, source.base + "ns", source.base, source.ns, self.page_size, 1)]
        page, sealed = pages.seal(read)
        if not sealed:
            return
        data = page.encode()
        digests = [x for checkpoint_id, digest in sealed for x in (checkpoint_id, digest)]
        [done] = yield [(scripts.SEAL_WRITE, 1, source.base + "ns", source.base, source.ns, self.ttl, data,
                         page.ids[-1], page.ids[0], len(page.ids), *digests)]
        if not done:
            log.debug("%s: a page was not sealed, its checkpoints changed meanwhile", source.key("pi:"))

    def _wants_seal(self, on_its_own: Any) -> bool:
        return bool(self.page_size) and isinstance(on_its_own, int) and on_its_own > self.page_size


    def _get_plan(self, config: RunnableConfig) -> Plan:
        """get_tuple. By id: that checkpoint, or UnreadableCheckpoint. The latest: the newest that can be read,
        each one skipped on the way logged, so a damaged latest cannot hide the thread (LangGraph reads the latest
        to fork from an older one); more than ORPHAN_CAP skipped raises the first. Without
        `pass_over_damaged_latest`, a damaged one (not an id without a record) is raised instead."""
        conf = config["configurable"]
        thread_id, ns, wanted = conf["thread_id"], conf.get("checkpoint_ns", ""), get_checkpoint_id(config)
        source = self._source(config)
        prefetch = self._prefetch_command(source, wanted or "")
        if wanted:
            [reply, *history] = yield [self._load_command(thread_id, ns, wanted), *prefetch]
            loaded = parse_load(source, reply, self._pages)
            if loaded.orphans:  # an id in the index without a record is no "None" either
                raise orphan_error(source, loaded.orphans[0])
            item = loaded.read(self.serde, wanted)
            if isinstance(item, UnreadableCheckpoint):
                raise item
            if item is not None:
                self._keep_prefetched(source, item, history)
                yield item
            return
        yield from self._latest_plan(source, prefetch)

    def _latest_plan(self, source: Source, prefetch: list[Command]) -> Plan:
        skipped: list[UnreadableCheckpoint] = []
        below = "+"
        while len(skipped) <= scripts.ORPHAN_CAP:
            [reply, *history] = yield [self._load_command(source.thread_id, source.ns, below=below), *prefetch]
            prefetch = []  # only with the newest: an older one read after a damaged one is rare
            loaded = parse_load(source, reply, self._pages)
            skipped += [orphan_error(source, o) for o in loaded.orphans]
            if loaded.capped:
                raise skipped[0]  # so many ids without a record that the script gave up: say so
            newest = _newest_below(loaded, below)
            if newest is None:
                break
            item = loaded.read(self.serde, newest[0])
            if isinstance(item, CheckpointTuple):
                for bad in skipped:
                    log.warning("%s; skipped", bad)
                self._keep_prefetched(source, item, history)
                yield item
                return
            if item is None:
                break
            if not self.pass_over_damaged_latest:
                raise item
            skipped.append(item)
            below = newest[1]
        damaged = [bad for bad in skipped if bad.kind != "c:"]
        if damaged or len(skipped) > scripts.ORPHAN_CAP:
            raise (damaged or skipped)[0]  # nothing readable, or we gave up: say why, never "an empty thread"
        for bad in skipped:
            log.warning("%s; skipped, and the thread has no other checkpoint", bad)

    def _delta_history_plan(self, config: RunnableConfig,
                            channels: Sequence[str]) -> Generator[Any, Any, Mapping[str, DeltaChannelHistory]]:
        """get_delta_channel_history: what the `get_tuple` before it fetched, else DELTA_HISTORY script calls: one that
        walks the whole parent chain on the server, and one more each time the chain leaves the pages it sent."""
        if not channels:
            return {}
        source, target = self._source(config), get_checkpoint_id(config) or ""
        if len(self._delta_names) < _MAX_DELTA_NAMES:
            self._delta_names.update(c for c in channels if isinstance(c, str) and len(c) <= 200)
        with self._prefetch_lock:
            kept = self._prefetched.pop((source.thread_id, source.ns, target), None) if target else None
        if kept is not None and all(c in kept for c in channels):
            return {c: kept[c] for c in channels}
        walk = DeltaWalk(self.serde, source, target or "latest", channels, False, scripts.MAX_DELTA_WALK, self._pages)
        start, mode, names = target, "all", list(channels)
        while True:
            [reply] = yield [(scripts.DELTA_HISTORY, 1, source.base + "ns", source.base, source.ns, start,
                              scripts.MAX_DELTA_WALK, mode, *names)]
            cursor = walk.feed(reply)
            if cursor is None:
                return walk.result()
            if mode == "from" and cursor == start:  # the pages said they hold it, and do not
                raise source.unreadable(walk.target, "v:", f"a delta channel cannot be rebuilt: its ancestor "
                                        f"{cursor} has no channel list", walk.target)
            start, mode, names = cursor, "from", sorted(walk.want)

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
        checkpoint's and whole (a checkpoint written between the two scripts makes them differ, and a walk that goes
        on past the pages sent needs another call: then it is asked anew)."""
        cid = found.config["configurable"]["checkpoint_id"]
        if not history or delta_target(history[0]) != cid:
            return
        names = sorted(self._delta_names)
        walk = DeltaWalk(self.serde, source, cid, names, True, scripts.MAX_DELTA_WALK, self._pages)
        try:
            if walk.feed(history[0]) is not None:
                return
        except UnreadableCheckpoint:
            return  # the explicit call raises it, for the checkpoint it is asked about
        checkpoint = found.checkpoint  # the channels LangGraph rebuilds: a version, and no value stored here
        needed = {n: h for n, h in walk.result().items()
                  if n in checkpoint["channel_versions"] and n not in checkpoint["channel_values"]}
        with self._prefetch_lock:
            self._prefetched[(source.thread_id, source.ns, cid)] = needed
            while len(self._prefetched) > _MAX_PREFETCHED:
                self._prefetched.popitem(last=False)

    def _drop_command(self, config: RunnableConfig) -> Command:
        """Remove one checkpoint on its own (record, channel list, writes, the blobs only it used), readable or not,
        and any writes kept for it apart from its page."""
        source = self._source(config)
        return (scripts.DROP_CHECKPOINT, 1, source.base + "ns", source.base, source.ns,
                config["configurable"]["checkpoint_id"])

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
            pairs = [(threads[0], conf["checkpoint_ns"])]
        else:
            ns_sets = yield [("SMEMBERS", self._base(t) + "ns") for t in threads]
            pairs = [(t, ns.decode()) for t, nss in zip(threads, ns_sets, strict=True) for ns in sorted(nss)]
        sources = [Source(self._base(t), t, ns) for t, ns in pairs]
        wanted_id = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        if wanted_id:
            order = self._wanted_plan(sources, wanted_id, before_id)
        else:
            order = self._ordered_plan(sources, before_id, limit if not filter else None)
        remaining, reply = limit, None
        while True:
            try:
                step = order.send(reply)
            except StopIteration:
                return
            if isinstance(step, list):
                reply = yield step
                continue
            reply, item = None, step[1]()
            if isinstance(item, UnreadableCheckpoint):
                log.warning("%s; skipped", item)
                continue
            if filter and any(item.metadata.get(k) != v for k, v in filter.items()):
                continue
            yield item
            if remaining is not None:
                remaining -= 1
                if remaining <= 0:
                    return

    def _wanted_plan(self, sources: list[Source], wanted_id: str, before_id: str | None) -> Generator[Any, Any, None]:
        if before_id and not wanted_id < before_id:
            return
        replies = yield [self._load_command(s.thread_id, s.ns, wanted_id) for s in sources]
        for source, reply in zip(sources, replies, strict=True):
            item = parse_load(source, reply, self._pages).read(self.serde, wanted_id)
            if item is not None:
                yield (wanted_id, functools.partial(_same, item))

    def _ordered_plan(self, sources: list[Source], before_id: str | None, limit: int | None,
                      oldest_first: bool = False, ids_only: bool = False) -> Generator[Any, Any, None]:
        """Yields command lists, then (id, a call that reads it: a checkpoint or UnreadableCheckpoint) newest first
        (or oldest first) across the sources, as the SQL savers' ORDER BY checkpoint_id: on their own and in pages,
        merged by id, each page loaded when the merge reaches it. `ids_only`: the ids, read from the index for
        checkpoints on their own (the readers then read nothing)."""
        top = ("(" + before_id) if before_id else "+"
        index = ("ZRANGEBYLEX", "-", top) if oldest_first else ("ZREVRANGEBYLEX", top, "-")
        cap = ("LIMIT", 0, limit) if limit else ()
        replies = yield [c for s in sources for c in ((index[0], s.base + "c:" + s.ns, *index[1:], *cap),
                                                       ("ZRANGE", s.base + "pi:" + s.ns, 0, -1))]
        units: list[tuple[str, int, str | layout.PageRef]] = []  # (the first id it may hold, source, id or page)
        for s, (ids, members) in enumerate(zip(replies[::2], replies[1::2], strict=True)):
            units += [(i.decode(), s, i.decode()) for i in ids]
            refs = [layout.PageRef.parse(m) for m in members]
            units += [(r.oldest if oldest_first else r.newest, s, r) for r in refs
                      if not before_id or r.oldest < before_id]
        units.sort(key=lambda u: u[0], reverse=not oldest_first)
        pending: list[tuple[str, int]] = []  # sorted (id, -source)
        found: dict[tuple[str, int], tuple[float, Loaded]] = {}  # (id, source) -> (rank, the reply that holds it)
        while units or pending:
            batch, units = _next_batch(units)
            if batch:
                yield from self._load_batch(sources, batch, before_id, found, pending, ids_only)
            horizon = units[0][0] if units else None  # no unit left can hold an id beyond it
            while pending and (horizon is None or (pending[0][0] < horizon if oldest_first
                                                   else pending[-1][0] > horizon)):
                cid, s = pending.pop(0 if oldest_first else -1)
                loaded = found.pop((cid, -s))[1]
                yield (cid, functools.partial(self._read_one, loaded, cid))

    def _read_one(self, loaded: Loaded, cid: str) -> CheckpointTuple | UnreadableCheckpoint:
        return loaded.read(self.serde, cid) or orphan_error(loaded.source, cid)

    def _load_batch(self, sources: list[Source], batch: list[tuple[str, int, Any]], before_id: str | None,
                    found: dict[tuple[str, int], tuple[float, Loaded]], pending: list[tuple[str, int]],
                    ids_only: bool = False) -> Generator[Any, Any, None]:
        """Load a batch of units into `found`: a checkpoint on its own beats a page's copy, a newer page an older."""
        ids: dict[int, list[str]] = {}
        members: dict[int, list[str]] = {}
        for _, s, unit in batch:
            if isinstance(unit, str) and ids_only:
                _take(found, pending, unit, s, math.inf, Loaded(sources[s]))
            elif isinstance(unit, str):
                ids.setdefault(s, []).append(unit)
            else:
                members.setdefault(s, []).append(unit.member)
        if not ids and not members:
            return
        commands = [self._load_command(sources[s].thread_id, sources[s].ns, *i) for s, i in ids.items()]
        commands += [self._pages_command(sources[s], m) for s, m in members.items()]
        replies = yield commands
        for s, reply in zip([*ids, *members], replies, strict=True):
            loaded = parse_load(sources[s], reply, self._pages)
            for cid in loaded.ids():
                if before_id and cid >= before_id:
                    continue
                hit = loaded.holder(cid)
                rank = math.inf if cid in loaded.own or cid in loaded.orphans else hit[0].ref.seq if hit else -1
                _take(found, pending, cid, s, rank, loaded)  # decoded when its turn comes: `list` may stop before

    def _ids_plan(self, config: RunnableConfig, limit: int, oldest_first: bool = False
                  ) -> Generator[Any, Any, list[str]]:
        """The ids of the thread's namespace, newest first (or oldest first), readable or not (a damaged page by its
        newest id)."""
        order = self._ordered_plan([self._source(config)], None, limit, oldest_first, ids_only=True)
        out: list[str] = []
        reply = None
        while len(out) < limit:
            try:
                step = order.send(reply)
            except StopIteration:
                break
            if isinstance(step, list):
                reply = yield step
            else:
                reply = None
                out.append(step[0])
        return out


def _take(found: dict[tuple[str, int], tuple[float, Loaded]], pending: list[tuple[str, int]], cid: str, s: int,
          rank: float, loaded: Loaded) -> None:
    """Keep the copy of a checkpoint of the highest rank (on its own: infinite; in a page: the page's seq)."""
    if (cid, s) in found and found[(cid, s)][0] >= rank:
        return
    if (cid, s) not in found:
        bisect.insort(pending, (cid, -s))
    found[(cid, s)] = (rank, loaded)


def _same(item: Any) -> Any:
    return item


def _next_batch(units: list[tuple[str, int, Any]]) -> tuple[list[tuple[str, int, Any]], list[tuple[str, int, Any]]]:
    """The next units to load in one round trip: up to _PAGE checkpoints on their own or _PAGES pages."""
    own = paged = 0
    for n, (_, _, unit) in enumerate(units):
        if isinstance(unit, str):
            own += 1
        else:
            paged += 1
        if own >= _PAGE or paged >= _PAGES:
            return units[:n + 1], units[n + 1:]
    return units, []


def _newest_below(loaded: Loaded, bound: str) -> tuple[str, str] | None:
    """The newest id a range reply holds below `bound` ("+" or "(<id>"), and the bound to look below next if it
    cannot be read (below a damaged page, all of it)."""
    limit = None if bound == "+" else bound[1:]
    best: tuple[str, str] | None = None
    candidates = [(cid, "(" + cid) for cid in loaded.own]
    for view in loaded.paged:
        if view.page is not None:
            candidates += [(cid, "(" + cid) for cid in view.page.ids]
        else:
            ref = view.ref
            candidates.append((ref.newest if limit is None or ref.newest < limit else ref.oldest, "(" + ref.oldest))
    for cid, after in candidates:
        if (limit is None or cid < limit) and (best is None or cid > best[0]):
            best = (cid, after)
    return best
