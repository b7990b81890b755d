"""`reactgraph tools`: every tool the gateway offers, with its parameters, limits, breaker state and stuck threads."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from reactgraph.cli.shared import MCP_HELP, STORE_HELP, TOOLS_HELP, UserError, gateway_with


def list_tools(
    tools: Annotated[list[str], typer.Option("--tools", metavar="MODULE:ATTR", help=TOOLS_HELP)] = [],  # noqa: B006
    mcp: Annotated[Path | None, typer.Option("--mcp", metavar="FILE", help=MCP_HELP)] = None,
    store: Annotated[str | None, typer.Option(metavar="URL", help=STORE_HELP + " Breaker states and metrics "
                                              "are read from a Redis store, shared by every process.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
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
    from rich.table import Table

    from reactgraph.cli.terminal_text import SafeConsole

    table = Table(title="Tools (every call goes through the gateway pipeline)")
    # "stuck": threads still running calls of the tool that already timed out (see ToolGateway.status).
    # "server": the MCP server a tool comes from, shown only when there are MCP tools (--mcp, $REACTGRAPH_MCP).
    servers = any(row["server"] for row in rows)
    table.add_column("tool", no_wrap=True, min_width=max([len(row["name"]) for row in rows] + [4]))
    for column in (*(("server",) if servers else ()), "parameters", "timeout", "tags", "breaker", "stuck", "calls",
                   "description"):
        table.add_column(column)
    for row in rows:
        params = ", ".join(f"{k}{'' if k in row['schema'].get('required', []) else '?'}"
                           for k in row["schema"].get("properties", {}))
        m = row["metrics"] or {}
        table.add_row(row["name"], *((row["server"] or "",) if servers else ()), params, f"{row['timeout_s']:g}s",
                      ",".join(row["tags"]),
                      row["breaker"]["state"], str(row["stuck_threads"]), _calls(m),
                      row["description"].split("\n")[0][:80])
    console = SafeConsole()
    console.print(table)
    if rows:
        console.print(f"metrics: {rows[0]['metrics_source']}", highlight=False, markup=False)


def _calls(metrics: dict) -> str:
    """`25 (1 failed), p95 79 ms`: what the table has room for; --json has the rest."""
    if not metrics:
        return "-"
    failed = f" ({metrics['failures']} failed)" if metrics["failures"] else ""
    return f"{metrics['calls']}{failed}, p95 {metrics['p95_ms']:.0f} ms"


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
    from reactgraph.memory.redis_checkpoint.errors import redact

    return redact(url) if url else "the store"
