"""`reactgraph prune`: keep the newest N checkpoints of each session, drop sessions idle longer than a duration
(their checkpoints and their long-term store items), and say what was removed."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from reactgraph.cli.shared import STORE_HELP, UserError, open_store, store_errors

NOT_REDIS = "prune works on Redis stores (redis://, rediss://, unix://, or the embedded default): {}"
HINTS = {"memory": "in-process memory is gone when its process exits, so there is nothing to prune",
         "sqlite": "SQLite keeps every session; delete one with LangGraph's delete_thread, or delete the file"}


@dataclass
class Removal:
    """What prune removes (or, with --dry-run, would remove) from one session."""

    session: str
    action: str  # "drop" (the whole session) | "prune" (all but the newest N checkpoints of each namespace)
    checkpoints: int
    store_items: int
    bytes: int | None  # MEMORY USAGE freed; None when unknown (a dry-run prune)
    idle_s: float | None


def session_prefixes(session: str) -> list[tuple[str, ...]]:
    """The store namespaces that belong to a session (graph/sessions.py says which)."""
    from reactgraph.graph.sessions import session_namespaces

    return session_namespaces(session)


def refresh_session(store: Any, session: str) -> None:
    """Restart the TTL of a session's store items (if the store has one), so they live as long as its checkpoints."""
    from reactgraph.memory.retention import refresh_items

    if store is not None and getattr(store, "ttl_config", None):
        refresh_items(store, session_prefixes(session))


def prune(
    keep: Annotated[int | None, typer.Option(metavar="N", min=1,
                                             help="Keep the newest N checkpoints of each session.")] = None,
    idle_for: Annotated[str | None, typer.Option(metavar="DURATION", help="Drop sessions whose last checkpoint is "
                                                 "older than this (e.g. 30m, 12h, 7d), store items included.")] = None,
    session: Annotated[list[str], typer.Option(metavar="ID", help="Only this session (repeatable; "
                                               "default: every session in the store).")] = [],  # noqa: B006
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be removed; remove nothing.")] = False,
    store: Annotated[str | None, typer.Option(metavar="URL", help=STORE_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Remove old checkpoints and idle sessions from the store, and print what was removed.

    A session is idle for the time since its newest checkpoint; dropping it removes its checkpoints, its Q&A
    log and its lessons. --keep keeps whatever the kept checkpoints need (their pending writes, the values
    they use), so the session goes on where it was.
    """
    if keep is None and idle_for is None:
        raise UserError("say what to remove: --keep N, --idle-for DURATION, or both")
    idle = _idle_seconds(idle_for)
    opened = open_store(store)
    if opened.redis_url is None:
        raise UserError(NOT_REDIS.format(HINTS["memory" if "memory" in opened.description else "sqlite"]))
    from reactgraph.memory import RedisStore

    saver = opened.saver  # a RedisSaver without a TTL: looking at a session restarts none
    try:
        with RedisStore.from_url(opened.redis_url) as long_term:
            removals = _plan(saver, long_term, session, keep, idle)
            if not dry_run:
                _apply(saver, long_term, removals, keep)
    except store_errors() as exc:  # each step is atomic per session: run it again to finish
        raise UserError(f"{exc}; prune stopped, run it again to finish") from exc
    finally:
        saver.close()  # type: ignore[attr-defined]
    _report(removals, dry_run, as_json)


def _idle_seconds(idle_for: str | None) -> float | None:
    from reactgraph.memory.retention import parse_duration

    try:
        return None if idle_for is None else parse_duration(idle_for)
    except ValueError as exc:
        raise UserError(f"--idle-for: {exc}") from exc


def _plan(saver: Any, store: Any, sessions: list[str], keep: int | None, idle: float | None) -> list[Removal]:
    """One Removal per session that loses something, from what the store holds now."""
    from reactgraph.memory.retention import items_bytes, session_items

    usages = {u.thread_id: u for u in saver.usage(sessions or None)}
    orphans = _store_only(store, sessions, set(usages)) if idle is not None or sessions else {}
    missing = [s for s in sessions if s not in usages and s not in orphans]
    if missing:
        raise UserError(f"no such session in this store: {', '.join(missing)} (nothing was removed)")
    now, removals = datetime.now(UTC), []
    for name in sorted({*usages, *orphans}):
        usage = usages.get(name)
        last = usage.last_checkpoint_at if usage else orphans[name]
        age = (now - last).total_seconds() if last else None
        if idle is not None and age is not None and age > idle:
            items = session_items(store, session_prefixes(name))
            removals.append(Removal(name, "drop", usage.checkpoints if usage else 0, len(items),
                                    (usage.bytes if usage else 0) + (items_bytes(store, items) or 0), age))
        elif keep is not None and usage:
            surplus = sum(max(0, n - keep) for n in usage.per_namespace.values())
            if surplus:
                removals.append(Removal(name, "prune", surplus, 0, None, age))
    return removals


def _store_only(store: Any, sessions: list[str], known: set[str]) -> dict[str, datetime]:
    """Sessions with store items but no checkpoints (deleted or expired apart): name -> newest item's time."""
    from reactgraph.memory.retention import last_update, store_sessions

    roots = sorted({prefix[0] for prefix in session_prefixes("-")})
    names = set(sessions) if sessions else store_sessions(store, roots)
    return {name: when for name in sorted(names - known) if (when := last_update(store, session_prefixes(name)))}


def _apply(saver: Any, store: Any, removals: list[Removal], keep: int | None) -> None:
    """Remove what the plan says; a prune's counts and bytes are then measured, not estimated."""
    from reactgraph.memory.retention import drop_items, session_items

    for removal in removals:
        if removal.action == "drop":
            saver.delete_thread(removal.session)
            drop_items(store, session_items(store, session_prefixes(removal.session)))
    pruned = {r.session: r for r in removals if r.action == "prune"}
    if not pruned:
        return
    before = {u.thread_id: u for u in saver.usage(list(pruned))}
    saver.prune(list(pruned), keep=keep)
    for after in saver.usage(list(pruned)):
        was = before[after.thread_id]
        removal = pruned[after.thread_id]
        removal.checkpoints, removal.bytes = was.checkpoints - after.checkpoints, was.bytes - after.bytes


def _report(removals: list[Removal], dry_run: bool, as_json: bool) -> None:
    total = {"sessions": len(removals), "checkpoints": sum(r.checkpoints for r in removals),
             "store_items": sum(r.store_items for r in removals), "bytes": sum(r.bytes or 0 for r in removals)}
    if as_json:
        sys.stdout.write(json.dumps({"dry_run": dry_run, "removed": total,
                                     "sessions": [asdict(r) for r in removals]}, ensure_ascii=False) + "\n")
        return
    verb = {"drop": "would drop" if dry_run else "dropped", "prune": "would prune" if dry_run else "pruned"}
    for r in removals:
        idle = f", idle {_duration(r.idle_s)}" if r.action == "drop" and r.idle_s is not None else ""
        items = f", {r.store_items} store items" if r.action == "drop" else ""
        size = f", {_size(r.bytes)}" if r.bytes is not None else ""
        typer.echo(f"{verb[r.action]} {r.session}: {r.checkpoints} checkpoints{items}{size}{idle}")
    if not removals:
        typer.echo("nothing to remove")
        return
    typer.echo(f"{'would remove' if dry_run else 'removed'} {total['checkpoints']} checkpoints and "
               f"{total['store_items']} store items from {total['sessions']} sessions"
               + ("" if dry_run else f" ({_size(total['bytes'])})"))


def _size(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _duration(seconds: float) -> str:
    for unit, scale in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= scale:
            return f"{seconds / scale:.1f}{unit}"
    return f"{seconds:.0f}s"
