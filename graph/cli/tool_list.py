"""`reactgraph tools`: every tool the gateway offers, with its parameters, limits, breaker state and stuck threads."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from reactgraph.graph.cli.shared import MCP_HELP, TOOLS_HELP, gateway_with


def list_tools(
    tools: Annotated[list[str], typer.Option("--tools", metavar="MODULE:ATTR", help=TOOLS_HELP)] = [],  # noqa: B006
    mcp: Annotated[Path | None, typer.Option("--mcp", metavar="FILE", help=MCP_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the tools: description, parameters, limits, circuit-breaker state and stuck threads."""
    import asyncio

    gateway = gateway_with(tools, mcp=mcp)
    try:
        rows = asyncio.run(gateway.status())
    finally:
        gateway.close()
    if as_json:
        sys.stdout.write(json.dumps(rows, ensure_ascii=False, indent=2) + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Tools (every call goes through the gateway pipeline)")
    # "stuck": threads still running calls of the tool that already timed out (see ToolGateway.status).
    # "server": the MCP server a tool comes from, shown only when there are MCP tools (--mcp, $REACTGRAPH_MCP).
    servers = any(row["server"] for row in rows)
    for column in ("tool", *(("server",) if servers else ()), "parameters", "timeout", "tags", "breaker", "stuck",
                   "description"):
        table.add_column(column)
    for row in rows:
        params = ", ".join(f"{k}{'' if k in row['schema'].get('required', []) else '?'}"
                           for k in row["schema"].get("properties", {}))
        table.add_row(row["name"], *((row["server"] or "",) if servers else ()), params, f"{row['timeout_s']:g}s",
                      ",".join(row["tags"]), row["breaker"]["state"], str(row["stuck_threads"]),
                      row["description"].split("\n")[0][:80])
    Console().print(table)
