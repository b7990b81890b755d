"""`reactgraph history`: a session's checkpoints, newest first, each id whole on one line for `ask --from`."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from reactgraph.graph.cli.shared import STORE_HELP, TtlOption, UserError, open_store, parse_ttl

if TYPE_CHECKING:
    from rich.table import Table

WIDE = 100  # from this many columns on, the table also shows when each checkpoint was written


def show_history(
    session: Annotated[str, typer.Option(metavar="ID", help="Session (thread) id.")],
    limit: Annotated[int, typer.Option(help="Show at most this many checkpoints.")] = 50,
    store: Annotated[str | None, typer.Option(metavar="URL", help=STORE_HELP)] = None,
    ttl: TtlOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List a session's checkpoints, newest first; fork from one with `ask --session ID --from CHECKPOINT`."""
    opened = open_store(store, parse_ttl(ttl))  # reading a session restarts its TTL
    from reactgraph.graph.react import build_react_graph
    from reactgraph.graph.sessions import history

    rows = list(history(build_react_graph(checkpointer=opened.saver), session, limit))
    if not rows:
        raise UserError(f"session {session!r} has no checkpoints in this store")
    if as_json:
        sys.stdout.write(json.dumps(rows, ensure_ascii=False, default=str) + "\n")
        return
    from rich.console import Console

    console = Console()
    console.print(history_table(session, rows, wide=console.width >= WIDE))


def history_table(session: str, rows: list[dict[str, Any]], wide: bool = False) -> Table:
    """Ids, steps and nodes never wrap (an id is copied whole); the summary folds into what width is left."""
    from rich import box
    from rich.table import Table

    unfinished = rows[0]["next"]
    caption = (f"unfinished: next {','.join(unfinished)}; ask the same question on this session to resume"
               if unfinished else None)
    table = Table(title=f"Checkpoints of session {session} (newest first)", caption=caption, box=box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False)
    table.add_column("checkpoint", no_wrap=True)
    table.add_column("step", justify="right", no_wrap=True)
    table.add_column("node", no_wrap=True)
    if wide:
        table.add_column("time", no_wrap=True)
    table.add_column("summary", overflow="fold", min_width=12, ratio=1)
    for row in rows:
        cells = [row["checkpoint"], str(row["step"]), row["node"]]
        if wide:
            cells.append(str(row["time"])[:19].replace("T", " "))
        table.add_row(*cells, row["summary"] or "-")
    return table
