"""`reactgraph tools`: every tool the gateway offers, with its parameters, limits, breaker state and stuck threads."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from reactgraph.cli.shared import MCP_HELP, STORE_HELP, TOOLS_HELP, UserError, gateway_with

if TYPE_CHECKING:
    from rich.table import Table


def list_tools(
    tools: Annotated[list[str], typer.Option("--tools", metavar="MODULE:ATTR", help=TOOLS_HELP)] = [],  # noqa: B006
    mcp: Annotated[Path | None, typer.Option("--mcp", metavar="FILE", help=MCP_HELP)] = None,
    store: Annotated[str | None, typer.Option(metavar="URL", help=STORE_HELP + " Breaker states and metrics "
                                              "are read from a Redis store, shared by every process.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    wide: Annotated[bool, typer.Option("--wide", help="Every column (timeout, tags, stuck threads too), "
                                                      "however wide the terminal.")] = False,
) -> None:
    """List the tools: description, parameters, limits, circuit-breaker state, stuck threads and call metrics.

    With a Redis store (--store, $REDIS_URL, or the embedded Redis when it runs) breaker states and metrics are
    those every process shares; otherwise those of this process only (which has made no calls yet).
    """
    import asyncio

    rows = asyncio.run(_status(tools, store, mcp))
    if as_json:
        sys.stdout.write(json.dumps(rows, ensure_ascii=False, indent=2) + "\n")
        return
    from reactgraph.cli.console_view import SafeConsole

    console = SafeConsole()
    wide = wide or console.width >= WIDE_COLUMNS
    table = tools_table(rows, wide=wide, width=console.width)
    if wide and (needed := sum(column.min_width or 0 for column in table.columns) + _GAP * len(table.columns)
                 + _DESCRIPTION_WIDE) > console.width:
        console = SafeConsole(width=needed)  # --wide on a narrow terminal: long lines, as `ls -l` prints them
    console.print(table)
    if rows:
        console.print(f"metrics: {rows[0]['metrics_source']}", highlight=False, markup=False)


WIDE_COLUMNS = 140  # from this terminal width on, every column fits; below it the table keeps what a glance needs
_GAP = 4  # what rich puts between two columns of a SIMPLE_HEAD table (padding and the blank separator)
_DESCRIPTION_WIDE = 72  # the description's share of a --wide line


def tools_table(rows: list[dict], *, wide: bool, width: int) -> Table:
    """One line per tool in `width` columns. Narrow: tool, parameters, breaker, calls and the description's
    first sentence, cut to the width left; wide adds the MCP server, timeout, tags and stuck threads (`--json`
    has everything)."""
    from rich import box
    from rich.table import Table

    servers = wide and any(row["server"] for row in rows)
    headers = ["tool", *(["server"] if servers else []), "parameters",  # server: an MCP tool's (--mcp)
               *(["timeout", "tags", "stuck"] if wide else []), "breaker", "calls"]  # stuck: see ToolGateway.status
    lines = [_cells(row, servers, wide) for row in rows]
    # rich shrinks wrappable columns first, down to nothing: every column but the description keeps its width,
    # and the description gets what is left
    widths = [max([len(header)] + [len(line[i]) for line in lines]) for i, header in enumerate(headers)]
    table = Table(title="Tools (every call goes through the gateway pipeline)", box=box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False,
                  caption=None if wide else "more columns: --wide; everything: --json")
    for header, column_width in zip(headers, widths, strict=True):
        table.add_column(header, no_wrap=True, min_width=column_width)
    table.add_column("description", no_wrap=True, overflow="ellipsis", min_width=len("description"),
                     max_width=max(_DESCRIPTION_WIDE if wide else 16, width - sum(widths) - _GAP * len(widths) - 1))
    for row, line in zip(rows, lines, strict=True):
        table.add_row(*line, _first_sentence(row["description"]))
    return table


def _cells(row: dict, servers: bool, wide: bool) -> list[str]:
    params = ", ".join(f"{k}{'' if k in row['schema'].get('required', []) else '?'}"
                       for k in row["schema"].get("properties", {}))
    cells = [row["name"], *((row["server"] or "",) if servers else ()), params]
    if wide:
        timeout = "none" if row["timeout_s"] is None else f"{row['timeout_s']:g}s"
        cells += [timeout, ",".join(row["tags"]), str(row["stuck_threads"])]
    return [*cells, row["breaker"]["state"], _calls(row["metrics"] or {}, wide)]


def _first_sentence(description: str) -> str:
    line = description.strip().split("\n")[0]
    end = line.find(". ")
    return line[:end + 1] if end > 0 else line


def _calls(metrics: dict, wide: bool) -> str:
    """`25 (1 failed), p95 79 ms` (wide) or `25 (1 failed)`: what the table has room for; --json has the rest."""
    if not metrics:
        return "-"
    failed = f" ({metrics['failures']} failed)" if metrics["failures"] else ""
    return f"{metrics['calls']}{failed}, p95 {metrics['p95_ms']:.0f} ms" if wide else f"{metrics['calls']}{failed}"


async def _status(tools: list[str], store: str | None, mcp: Path | None) -> list[dict]:
    from reactgraph.cli.shared import shared_redis_url

    url = shared_redis_url(store)
    gateway = gateway_with(tools, mcp=mcp, shared_url=url)
    import redis

    try:
        return await gateway.status()
    except (redis.RedisError, OSError) as exc:
        raise UserError(f"cannot read the shared tool state from {_shown(url)}: {exc}") from exc
    finally:
        await gateway.aclose()  # the MCP servers' sessions
        if url:  # the shared stores' clients, closed on the loop that used them
            await gateway.breakers.store.client.aclose()  # type: ignore[attr-defined]
            gateway.telemetry.store.client.close()  # type: ignore[attr-defined]


def _shown(url: str | None) -> str:
    from reactgraph.memory.redis_checkpoint.settings import redact

    return redact(url) if url else "the store"
