"""Plans over whole namespaces and threads: prune, deleting runs, dropping one checkpoint, usage, copying a thread.

They read a namespace whole (its checkpoints on their own and its sealed pages) without restarting its TTL,
decide in Python, and write with scripts that change nothing if a page changed since it was read (its SHA1).

`prune(strategy="keep_latest")`: what stays of each namespace, and the script calls that drop the rest.

What each thread holds in Redis: checkpoints, bytes (MEMORY USAGE) and when its last checkpoint was written.

Copying a thread's checkpoints to another thread, on one Redis or across the slots of a Redis Cluster. On one
Redis, COPY_THREAD (scripts.py) does it in one atomic script. Two threads of a cluster live in two hash slots,
maybe on two nodes, and no script may touch both, so there the copy is two scripts: READ_THREAD takes a
consistent picture of the source (atomically, on its node), WRITE_THREAD merges it into the target (atomically,
on its node). The target's indexes are written after its records, as PUT does, so a copy that fails half-way
leaves nothing visible.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from reactgraph.memory.redis_checkpoint import layout, pages, scripts
from reactgraph.memory.redis_checkpoint.reading import (
    Loaded,
    PageView,
    Source,
    UnreadableCheckpoint,
    delta_value,
    parse_load,
)
from reactgraph.memory.redis_checkpoint.scripts import Script

if TYPE_CHECKING:
    from reactgraph.memory.redis_checkpoint.core import Plan, RedisSaverCore

log = logging.getLogger("reactgraph.memory.redis_checkpoint")
Typed = tuple[str, bytes]


def namespace_plan(saver: RedisSaverCore, source: Source) -> Generator[Any, Any, Loaded]:
    """Everything a namespace holds, read without restarting its TTL: two round trips."""
    ids, members = yield [("ZRANGE", source.key("c:"), 0, -1), ("ZRANGE", source.key("pi:"), 0, -1)]
    commands = []
    if ids:
        commands.append((scripts.LOAD, 1, source.base + "ns", source.base, source.ns, 0, "ids", *ids))
    if members:
        commands.append((scripts.LOAD, 1, source.base + "ns", source.base, source.ns, 0, "pages", *members))
    loaded = Loaded(source)
    for reply in (yield commands) if commands else []:
        loaded.merge(parse_load(source, reply, saver._pages))
    return loaded


def rewrite(view: PageView, keep: set[str], values: Mapping[str, Mapping[str, Typed]] | None = None) -> list[Any]:
    """REWRITE_PAGES arguments for one page: its checkpoints in `keep` stay (`values`: stored values to replace,
    per checkpoint id, by channel); none kept drops the page."""
    page = view.page
    kept = [i for i, cid in enumerate(page.ids) if cid in keep] if page is not None else []
    if page is None or not kept:
        return [view.ref.member, view.sha1(), "", "", "", 0]
    builder = pages.PageBuilder()
    for i in kept:
        try:
            builder.add_from(page, i, dict((values or {}).get(page.ids[i], {})))
        except pages.PageFault as fault:  # unreadable already; a page is written whole, so it cannot stay
            log.warning("checkpoint %s cannot be read (%s) and leaves its page %s with the ones dropped from it",
                        page.ids[i], fault, view.ref.member.split("\0")[0])
    new = builder.build()
    if not new.ids:
        return [view.ref.member, view.sha1(), "", "", "", 0]
    return [view.ref.member, view.sha1(), new.encode(), new.ids[-1], new.ids[0], len(new.ids)]


def _rewrite_command(source: Source, ttl: int, args: list[Any]) -> tuple[Any, ...]:
    return (scripts.REWRITE_PAGES, 1, source.base + "ns", source.base, source.ns, ttl, *args)


def drop_plan(saver: RedisSaverCore, config: RunnableConfig) -> Generator[Any, Any, bool]:
    """Remove the checkpoint `config` names, readable or not: on its own, or out of its page (a page that cannot be
    read goes whole, with a warning saying how many checkpoints it held). False if there was none."""
    source, cid = saver._source(config), config["configurable"]["checkpoint_id"]
    [reply] = yield [(scripts.LOAD, 1, source.base + "ns", source.base, source.ns, 0, "ids", cid)]
    loaded = parse_load(source, reply, saver._pages)
    hit = loaded.holder(cid)
    if cid in loaded.own or cid in loaded.orphans or (hit is None and loaded.damaged(cid) is None):
        [known] = yield [saver._drop_command(config)]
        return bool(known)
    if hit is not None:
        view = hit[0]
        args = rewrite(view, set(view.page.ids) - {cid})  # type: ignore[union-attr]
    else:
        view = loaded.damaged(cid)  # type: ignore[assignment]
        log.warning("dropping the unreadable page %s%s with its %d checkpoints (%s to %s)", source.key("p:"),
                    view.ref.member.split("\0")[0], view.ref.count, view.ref.oldest, view.ref.newest)
        args = rewrite(view, set())
    done, _ = yield [_rewrite_command(source, saver.ttl, args), saver._drop_command(config)]
    if not done:
        raise RuntimeError(f"checkpoint {cid} of thread {source.thread_id!r} was not dropped: its page changed "
                           "meanwhile; try again")
    return True


def prune_plan(saver: RedisSaverCore, thread_ids: Sequence[str], strategy: str, keep: int = 1,
               channels: Mapping[str, Any] | None = None) -> Plan:
    """`keep_latest`: the newest `keep` checkpoints of each namespace stay (with what they need); `delete`."""
    if strategy not in ("keep_latest", "delete"):
        raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
    if strategy == "keep_latest" and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
        raise ValueError(f"keep must be a whole number of checkpoints, at least 1, not {keep!r}")
    if not thread_ids:
        return
    if strategy == "delete":
        yield [saver._delete_thread_command(t) for t in thread_ids]
        return
    yield from keep_latest_plan(saver, [saver._base(t) for t in thread_ids], keep, channels)


def keep_latest_plan(saver: RedisSaverCore, bases: list[str], keep: int,
                     channels: Mapping[str, Any] | None = None) -> Generator[Any, Any, None]:
    """The newest `keep` checkpoints of each namespace of these threads (by key base) stay, with what they need.

    A kept checkpoint's DeltaChannels are rebuilt from the writes since their last snapshot, so those ancestors
    stay too (BaseCheckpointSaver.prune's warning). Given the graph's `channels` (their reducers), the oldest kept
    checkpoint gets its delta channels' whole values stored instead (`_DeltaSnapshot` blobs, as a snapshot step
    writes them), and the ancestors can go: the newer kept ones rebuild from it."""
    ns_sets = yield [("SMEMBERS", base + "ns") for base in bases]
    for base, nss in zip(bases, ns_sets, strict=True):
        for ns in sorted(n.decode() for n in nss):
            source = Source(base, layout.thread_of(saver.prefix, base), ns)
            loaded = yield from namespace_plan(saver, source)
            yield from _prune_namespace(saver, source, loaded, keep, channels)


def _prune_namespace(saver: RedisSaverCore, source: Source, loaded: Loaded, keep: int,
                     channels: Mapping[str, Any] | None) -> Generator[Any, Any, None]:
    ids = [cid for cid in loaded.ids() if cid not in loaded.orphans]
    kept = ids[:keep]
    if not kept:
        return
    needs: dict[str, list[str]] = {}
    for cid in kept:
        metadata = _metadata(saver.serde, loaded, cid)
        if metadata is None:  # a kept checkpoint we cannot read: leave the namespace as it is
            log.warning("not pruning %s: its kept checkpoint %s is unreadable", source.key("c:"), cid)
            return
        needs[cid] = sorted((metadata.get("counters_since_delta_snapshot") or {}).keys())
    snapshots: dict[str, dict[str, Typed]] = {}  # checkpoint -> channel -> its whole value, to store
    if channels is not None and needs[kept[-1]]:
        stored = yield from _snapshots(saver, source, kept[-1], needs[kept[-1]], channels)
        if stored:
            snapshots[kept[-1]] = stored
    snapshotted = {cid: set(stored) for cid, stored in snapshots.items()}
    stays = set(kept)
    for cid, names in needs.items():
        stays |= _ancestors(loaded, cid, set(names), snapshotted)
    newest, oldest = kept[0], min(stays)
    gone = [cid for cid in loaded.ids() if cid <= newest and cid not in stays]
    changes: list[Any] = []
    for view in loaded.paged:
        if view.page is None:
            if view.ref.newest < oldest:  # unreadable, and older than all that stays: it goes
                changes += rewrite(view, set())
            continue
        staying = {cid for cid in view.page.ids if cid not in gone}
        if staying != set(view.page.ids) or any(cid in snapshots for cid in staying):
            changes += rewrite(view, staying, snapshots)
    commands: list[Any] = []
    if changes:
        commands.append(_rewrite_command(source, 0, changes))
    commands += _own_snapshot_commands(source, loaded, snapshots)
    if gone:
        commands.append((scripts.PRUNE, 1, source.base + "ns", source.base, source.ns, *gone))
    replies = yield commands
    if changes and not replies[0]:
        log.warning("%s changed while it was pruned; its pages were left as they were: prune again", source.key("p:"))


def _own_snapshot_commands(source: Source, loaded: Loaded, snapshots: dict[str, dict[str, Typed]]) -> list[Any]:
    """Snapshots for a kept checkpoint on its own go into its blobs, shared by every checkpoint at that version."""
    blobs: list[Any] = []
    for cid, stored in snapshots.items():
        if cid in loaded.own:
            _, pairs = layout.parse_links(loaded.own[cid][1] or b"")
            versions = dict(pairs)
            blobs += [x for name, typed in stored.items() if name in versions
                      for x in (layout.blob_field(name, versions[name]), layout.pack_typed(typed))]
    return [("HSET", source.key("b:"), *blobs)] if blobs else []


def _metadata(serde: SerializerProtocol, loaded: Loaded, cid: str) -> dict[str, Any] | None:
    """A checkpoint's metadata from its record alone, None if the record cannot be read."""
    if cid in loaded.own:
        record = loaded.own[cid][0]
    else:
        hit = loaded.holder(cid)
        if hit is None or hit[0].page is None:
            return None
        record = hit[0].page.records[hit[1]]
    try:  # Redis content: whatever a damaged record raises, it cannot be read
        checkpoint, metadata = serde.loads_typed(layout.unpack_typed(record))
    except Exception:  # noqa: BLE001
        return None
    return metadata if isinstance(checkpoint, dict) and checkpoint.get("id") == cid and isinstance(metadata, dict) \
        else None


def _ancestors(loaded: Loaded, cid: str, names: set[str], snapshotted: Mapping[str, set[str]]) -> set[str]:
    """The checkpoints a DeltaChannel of `cid` is rebuilt from: its parents back to a stored value of each."""
    out: set[str] = set()
    cursor: str | None = cid
    while names and cursor and cursor not in out:
        out.add(cursor)
        parent, stored = _parent_and_stored(loaded, cursor)
        names -= stored | snapshotted.get(cursor, set())
        cursor = parent
    return out


def _parent_and_stored(loaded: Loaded, cid: str) -> tuple[str | None, set[str]]:
    """A checkpoint's parent, and the channels it holds a value of (not "empty")."""
    if cid in loaded.own:
        links, blobs = loaded.own[cid][1], loaded.own[cid][2]
        try:
            parent, pairs = layout.parse_links(links or b"")
        except ValueError:
            return None, set()
        return parent, {c for (c, _), b in zip(pairs, blobs, strict=False) if b and not b.startswith(layout.EMPTY)}
    hit = loaded.holder(cid)
    if hit is None:
        return None, set()
    page, i = hit[0].page, hit[1]
    assert page is not None
    try:
        refs = page.row(i)[0]
    except pages.PageFault:
        return page.parents[i], set()
    return page.parents[i], {c for c, ref in refs.items() if ref is not None}


def _snapshots(saver: RedisSaverCore, source: Source, cid: str, delta: list[str],
               channels: Mapping[str, Any]) -> Generator[Any, Any, dict[str, Typed]]:
    """The whole values of `cid`'s delta channels that `channels` can rebuild, by channel."""
    tup = yield from _read_plan(saver, source, cid)
    if tup is None:
        return {}
    versions = tup.checkpoint["channel_versions"]
    rebuildable = [n for n in delta if isinstance(channels.get(n), DeltaChannel) and n in versions]
    if not rebuildable:
        return {}
    try:
        histories = yield from saver._delta_history_plan(source.config(cid), rebuildable)
    except UnreadableCheckpoint as exc:
        log.warning("not storing snapshots at %s before pruning: %s", cid, exc)
        return {}
    return {n: saver.serde.dumps_typed(_DeltaSnapshot(delta_value(channels[n], histories[n]))) for n in rebuildable}


def _read_plan(saver: RedisSaverCore, source: Source, cid: str) -> Generator[Any, Any, Any]:
    [reply] = yield [(scripts.LOAD, 1, source.base + "ns", source.base, source.ns, 0, "ids", cid)]
    item = parse_load(source, reply, saver._pages).read(saver.serde, cid)
    return None if isinstance(item, UnreadableCheckpoint) else item


def delete_runs_plan(saver: RedisSaverCore, run_ids: Sequence[str]) -> Plan:
    """LangGraph's delete_for_runs: checkpoints on their own by the runs index; sealed ones by their pages, which the
    index names per namespace, their records' metadata saying which run wrote each."""
    run_ids = [str(r) for r in run_ids]
    if not run_ids:
        return
    cursor, pattern = b"0", layout.scan_pattern(saver.prefix, "runs")
    while True:
        [(cursor, keys)] = yield [("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)]
        if keys:
            replies = yield [(scripts.DELETE_RUNS, 1, k, k[:-len(b"runs")], *run_ids) for k in keys]
            for key, reply in zip(keys, replies, strict=True):
                base = key[:-len(b"runs")].decode()
                for ns in reply[1:]:
                    source = Source(base, layout.thread_of(saver.prefix, base), ns.decode())
                    yield from _delete_paged_runs(saver, source, set(run_ids))
        if cursor in (b"0", 0, "0"):
            return


def _delete_paged_runs(saver: RedisSaverCore, source: Source, run_ids: set[str]) -> Generator[Any, Any, None]:
    loaded = yield from namespace_plan(saver, source)
    gone = set()
    for view in loaded.paged:
        for cid in view.page.ids if view.page is not None else []:
            metadata = _metadata(saver.serde, loaded, cid)
            if metadata is not None and str(metadata.get("run_id")) in run_ids:
                gone.add(cid)
    changes = [x for view in loaded.paged if view.page is not None and gone & set(view.page.ids)
               for x in rewrite(view, set(view.page.ids) - gone)]
    commands: list[Any] = [_rewrite_command(source, 0, changes)] if changes else []
    if gone:
        commands.append((scripts.PRUNE, 1, source.base + "ns", source.base, source.ns, *sorted(gone)))
    commands.append(("ZREM", source.base + "runs", *(f"{r}\0{source.ns}\0" for r in sorted(run_ids))))
    replies = yield commands
    if changes and not replies[0]:
        log.warning("%s changed while runs were deleted from it; run delete_for_runs again", source.key("p:"))


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
            for ns in nss:
                commands += [("ZCARD", base + "c:" + ns), ("ZREVRANGEBYLEX", base + "c:" + ns, "+", "-", "LIMIT", 0, 1),
                             ("ZRANGE", base + "pi:" + ns, 0, -1)]
        replies = iter((yield commands))
        totals, newest = [], []
        for base, nss in zip(bases, namespaces, strict=True):
            size = sum(next(replies) or 0 for _ in range(2 + len(layout.KINDS) * len(nss)))
            counts, tops = {}, []
            for ns in nss:
                own, top, refs = next(replies), next(replies), [layout.PageRef.parse(m) for m in next(replies)]
                counts[ns] = own + sum(r.count for r in refs)
                last = max(refs, key=lambda r: r.newest, default=None)
                if last is not None and (not top or last.newest > top[0].decode()):
                    tops.append(("HGET", base + "p:" + ns, last.member))
                elif top:
                    tops.append(("HGET", base + "cp:" + ns, top[0]))
            totals.append((size, counts))
            newest.append(tops)
        records = iter((yield [cmd for tops in newest for cmd in tops]) if any(newest) else [])
        for thread, (size, counts), tops in zip(chunk, totals, newest, strict=True):
            stamps = [_written_at(saver, cmd[1], next(records)) for cmd in tops]
            if size:
                yield ThreadUsage(thread, counts, size, max((s for s in stamps if s), default=None))


def _written_at(saver: RedisSaverCore, key: str, stored: bytes | None) -> datetime | None:
    """The time of the newest checkpoint: its record, or the newest record of a page."""
    if stored is None:
        return None
    try:  # Redis content: a damaged checkpoint has no known time (the session is not taken for idle by it)
        record = saver._pages.decode(stored).records[-1] if key.rsplit("}:", 1)[1].startswith("p:") else stored
        checkpoint, _ = saver.serde.loads_typed(layout.unpack_typed(record))
        return datetime.fromisoformat(checkpoint["ts"])
    except Exception:  # noqa: BLE001 - whatever a damaged record raises in the serializer, the time is unknown
        return None


# KEYS[1] source ns-set; ARGV source base. Returns: the namespace count, then per namespace its name, for each
# of cp: v: b: w: the field count and the field/value pairs, wi:'s member count and members, the page count and
# (member, bytes) pairs, c:'s member count and members; last the runs index's count and members.
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
  local members = redis.call('ZRANGE', src .. 'pi:' .. ns, 0, -1)
  out[#out + 1] = #members
  for _, m in ipairs(members) do
    out[#out + 1] = m
    out[#out + 1] = redis.call('HGET', src .. 'p:' .. ns, m) or ''
  end
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
  for _ = 1, next_count() do
    if ARGV[at + 1] ~= '' then add_page(dst, ns, ARGV[at], ARGV[at + 1]) end
    at = at + 2
  end
  copy_zset(dst .. 'c:' .. ns)  -- the index last: a copy that failed above shows nothing
  redis.call('SADD', KEYS[1], ns)
end
copy_zset(dst .. 'runs')
touch(dst, tonumber(ARGV[2]))
return namespaces
""", "add_page", "touch")


def copy_thread_plan(saver: RedisSaverCore, source_thread_id: str, target_thread_id: str) -> Plan:
    """One script on one Redis; on a cluster, a read on the source's slot, then a write on the target's."""
    if not getattr(getattr(saver, "_wire", None), "is_cluster", False):
        yield [saver._copy_thread_command(source_thread_id, target_thread_id)]
        return
    src, dst = saver._base(source_thread_id), saver._base(target_thread_id)
    [picture] = yield [(READ_THREAD, 1, src + "ns", src)]
    if picture and int(picture[0]) > 0:
        yield [(WRITE_THREAD, 1, dst + "ns", dst, saver.ttl, *picture)]
