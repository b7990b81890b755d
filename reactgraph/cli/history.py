"""`reactgraph history`: a session's checkpoints, newest first, each id whole on one line for `ask --from`."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer

from reactgraph.cli.shared import STORE_HELP, TtlOption, UserError, open_store, parse_ttl, session_option

if TYPE_CHECKING:
    from rich.table import Table

WIDE = 100  # from this many columns on, the table also shows when each checkpoint was written


def show_history(
    session: Annotated[str, typer.Option(metavar="ID", help="Session (thread) id.")],
    limit: Annotated[int, typer.Option(help="Show at most this many checkpoints.")] = 50,
    store: Annotated[str | None, typer.Option(metavar="URL", help=STORE_HELP)] = None,
    ttl: TtlOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    drop: Annotated[str | None, typer.Option("--drop", metavar="CHECKPOINT",
                                             help="Remove this checkpoint (e.g. an unreadable one) instead.")] = None,
) -> None:
    """List a session's checkpoints, newest first; fork from one with `ask --session ID --from CHECKPOINT`.

    A checkpoint that cannot be read is listed as unreadable, with the reason; `--drop CHECKPOINT` removes it.
    """
    session = session_option(session) or session
    opened = open_store(store, parse_ttl(ttl))  # reading a session restarts its TTL
    if drop:
        _drop(opened.saver, session, drop, as_json)
        return
    from reactgraph.graph.react import build_react_graph
    from reactgraph.graph.sessions import history

    with unreadable_as_user_error(session):
        rows = list(history(build_react_graph(checkpointer=opened.saver), session, limit))
    if not rows:
        raise UserError(f"session {session!r} has no checkpoints in this store")
    if as_json:
        sys.stdout.write(json.dumps(rows, ensure_ascii=False, default=str) + "\n")
        return
    from reactgraph.cli.console_view import SafeConsole

    console = SafeConsole()
    console.print(history_table(session, rows, wide=console.width >= WIDE))


def _drop(saver: Any, session: str, checkpoint_id: str, as_json: bool) -> None:
    """`--drop`: remove one checkpoint of the session (its writes too), readable or not."""
    if not hasattr(saver, "delete_checkpoint"):
        raise UserError("--drop works on a Redis store (redis://…, or the default embedded Redis)")
    config = {"configurable": {"thread_id": session, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}
    if not saver.delete_checkpoint(config):
        raise UserError(f"session {session!r} has no checkpoint {checkpoint_id!r}; "
                        f"see `reactgraph history --session {session}`")
    sys.stdout.write(json.dumps({"session": session, "dropped": checkpoint_id}) + "\n" if as_json
                     else f"dropped checkpoint {checkpoint_id} of session {session}\n")


def unreadable_hint(session: str, checkpoint_id: str) -> str:
    """What to do about an unreadable checkpoint: the commands that list, fork past and remove it."""
    return (f"`reactgraph history --session {session}` lists the readable checkpoints to fork from "
            f"(`reactgraph ask --session {session} --from CHECKPOINT ...`); "
            f"`reactgraph history --session {session} --drop {checkpoint_id}` removes this one")


def check_newest(saver: Any, session: str) -> None:
    """Raise UnreadableCheckpoint if the session's newest checkpoint is damaged.

    A new turn continues from the newest checkpoint. The Redis saver reads past a damaged one (so that a fork
    from an older one works), which would quietly drop the newest turn from the conversation: `ask` stops
    instead, and the user forks or drops. An id without any record holds nothing, and is passed over.
    """
    if not hasattr(saver, "checkpoint_ids"):
        return
    from reactgraph.memory.redis_checkpoint.reading import UnreadableCheckpoint
    from reactgraph.memory.redis_checkpoint.scripts import ORPHAN_CAP

    thread = {"thread_id": session, "checkpoint_ns": ""}
    for checkpoint_id in saver.checkpoint_ids({"configurable": thread}, ORPHAN_CAP):
        try:
            saver.get_tuple({"configurable": {**thread, "checkpoint_id": checkpoint_id}})
            return
        except UnreadableCheckpoint as exc:
            if exc.kind != "c:":
                raise


@contextmanager
def unreadable_as_user_error(session: str) -> Iterator[None]:
    """A checkpoint or value the store cannot (or will not) decode becomes one line with its id and a hint."""
    from reactgraph.memory.redis_checkpoint.reading import UnreadableCheckpoint
    from reactgraph.memory.redis_checkpoint.serde import RefusedPayload

    try:
        yield
    except UnreadableCheckpoint as exc:
        raise UserError(f"{exc}; {unreadable_hint(session, exc.checkpoint_id)}") from exc
    except RefusedPayload as exc:  # from a store without key names (SQLite): still one line
        raise UserError(f"session {session!r} holds a value react-graph will not decode: {exc}") from exc
    except ValueError as exc:  # the long-term store's UnreadableItem (loaded only with a Redis store) names its key
        store_reading = sys.modules.get("reactgraph.memory.redis_store.store")
        if store_reading is None or not isinstance(exc, store_reading.UnreadableItem):
            raise
        raise UserError(str(exc)) from exc


def history_table(session: str, rows: list[dict[str, Any]], wide: bool = False) -> Table:
    """Ids, steps and nodes never wrap (an id is copied whole); the summary folds into what width is left."""
    from rich import box
    from rich.table import Table

    unfinished = rows[0]["next"]
    notes = [f"unfinished: next {','.join(unfinished)}; ask the same question on this session to resume"
             if unfinished else "",
             f"unreadable checkpoints: fork from another (ask --from), or remove one (history --session {session} "
             "--drop CHECKPOINT)" if any(row.get("unreadable") for row in rows) else ""]
    caption = "\n".join(n for n in notes if n) or None
    table = Table(title=f"Checkpoints of session {session} (newest first)", caption=caption, box=box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False)
    table.add_column("checkpoint", no_wrap=True)
    table.add_column("step", justify="right", no_wrap=True)
    table.add_column("node", no_wrap=True)
    if wide:
        table.add_column("time", no_wrap=True)
    table.add_column("summary", overflow="fold", min_width=12, ratio=1)
    for row in rows:
        cells = [row["checkpoint"], "-" if row["step"] is None else str(row["step"]), row["node"]]
        if wide:
            cells.append(str(row["time"] or "-")[:19].replace("T", " "))
        summary = f"UNREADABLE: {row['unreadable']}" if row.get("unreadable") else row["summary"] or "-"
        table.add_row(*cells, summary)
    return table
