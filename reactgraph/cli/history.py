"""Reading a session back from its checkpoints: `reactgraph history` (the checkpoints, newest first, each id whole
on one line for `ask --from`) and `reactgraph trace` (one turn's timeline: nodes, model calls, tool calls,
durations and statuses, for users without a tracing backend)."""

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
    from reactgraph.graph.sessions import history

    with unreadable_as_user_error(session):
        rows = list(history(session_reader(opened.saver, session), session, limit))
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
        store_reading = sys.modules.get("reactgraph.memory.redis_store")
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


def show_trace(
    session: Annotated[str, typer.Option(metavar="ID", help="Session (thread) id.")],
    turn: Annotated[int | None, typer.Option(metavar="N", show_default=False,
                                             help="Which turn, 1 for the first (default: the last).")] = None,
    store: Annotated[str | None, typer.Option(metavar="URL", help=STORE_HELP)] = None,
    ttl: TtlOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show how a turn ran: each node in order with its start offset and duration, the model calls (tokens)
    and tool calls (status, latency) it made, and the turn's final status."""
    session = session_option(session) or session
    opened = open_store(store, parse_ttl(ttl))
    from reactgraph.graph.timeline import TraceError, turn_timeline

    try:
        with unreadable_as_user_error(session):
            timeline = turn_timeline(session_reader(opened.saver, session), session, turn)
    except TraceError as exc:
        raise UserError(str(exc)) from exc
    if as_json:
        sys.stdout.write(json.dumps(timeline, ensure_ascii=False, default=str) + "\n")
        return
    from reactgraph.cli.console_view import SafeConsole

    SafeConsole(highlight=False).print(render(timeline), markup=False, soft_wrap=True)


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


def render(t: dict[str, Any]) -> str:
    """The timeline as indented text: a header, one line per node, its calls beneath it, the outcome."""
    from reactgraph.nodes.closing import shown_status

    usage = t["usage"]
    tokens = (f" · {usage.get('input_tokens', 0)} tokens in, {usage.get('output_tokens', 0)} out"
              if usage.get("input_tokens") is not None else "")
    shown = shown_status(t["status"], t.get("coverage"))  # "answered · coverage unchecked" when no check backs it
    status = "unfinished (next: " + ", ".join(t["next"]) + ")" if t["unfinished"] else shown
    lines = [f"Turn {t['turn']} of {t['turns']} · session {t['session']} · {status} · {_ms(t['duration_ms'])}"
             f"{tokens} · {t['model_calls']} model call(s), {t['tool_calls']} tool call(s)"]
    if t["question"]:
        lines.append(f"Q: {t['question'][:200]}")
    width = max([len(node["node"]) for node in t["nodes"]] + [4])
    for node in t["nodes"]:
        lines.append(f"  {'+' + _ms(node['start_ms']):>9}  {node['node']:<{width}}  {_ms(node['duration_ms']):>8}")
        for call in node["model_calls"]:
            wants = f" → {', '.join(call['tool_calls'])}" if call["tool_calls"] else ""
            model = f" {call['model']}" if call["model"] else ""
            lines.append(f"      model{model}: {call['input_tokens'] or 0} tokens in, "
                         f"{call['output_tokens'] or 0} out{wants}")
        for call in node["tool_calls"]:
            args = json.dumps(call["args"], ensure_ascii=False, default=str)
            lines.append(f"      tool {call['tool']}({args[:80]}) · {call['status']} · {_ms(call['latency_ms'])}")
        for record in node["records"]:
            tokens_used = f" · {record['tokens']} tokens" if record["tokens"] else ""
            lines.append(f"      {record['node']}: {record['status']}{tokens_used}")
    if t["answer"]:
        answer = t["answer"].strip().replace("\n", " ")
        lines.append(f"Final ({shown}): {answer[:200]}{'…' if len(answer) > 200 else ''}")
    return "\n".join(lines)


def session_reader(saver: Any, session: str) -> Any:
    """The graph that wrote the session (its checkpoints name it; react for older sessions), compiled on the
    store's saver to read its checkpoints with that paradigm's channels."""
    from reactgraph.graph import graph_builder, session_graph

    return graph_builder(session_graph(saver, session) or "react")(checkpointer=saver)
