"""`reactgraph server status|stop`: show or stop the embedded Redis that commands start when REDIS_URL is unset.

Only typer is imported at module level (`reactgraph --help` loads this module); each command imports the
embedded Redis module, and with it redis-py, when it runs. The data directory is `$REACTGRAPH_HOME/redis`.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated, Any

import typer

server_app = typer.Typer(no_args_is_help=True, add_completion=False,
                         help="Show or stop the embedded Redis (used when REDIS_URL is unset).")


@server_app.command("status")
def status(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Whether the embedded Redis runs, and its pid, version, socket, data directory, memory and keys."""
    from reactgraph.memory.embedded_redis import status as server_status

    report = server_status()
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
        return
    for line in describe(report):
        typer.echo(line)


@server_app.command("stop")
def stop() -> None:
    """Stop the embedded Redis; its data stays on disk and the next command starts it again."""
    from reactgraph.memory.embedded_redis import data_dir
    from reactgraph.memory.embedded_redis import stop as stop_server

    directory = data_dir()
    if stop_server(directory):
        typer.echo(f"stopped the embedded Redis (its data stays in {directory})")
    else:
        typer.echo(f"the embedded Redis is not running ({directory})")


def describe(report: dict[str, Any]) -> list[str]:
    """The status report as a few lines for a person."""
    disk = f"{_size(report['disk_bytes'])} on disk"
    if not report["running"]:
        lines = [f"embedded Redis: not running (data: {report['data_dir']}, {disk}); the next command starts it"]
    else:
        lines = [f"embedded Redis: running, {report['server']} {report['version']}, pid {report['pid']}",
                 f"  url:    {report['url']}",
                 f"  data:   {report['data_dir']} ({disk})",
                 f"  memory: {report['memory_used']} used, {report['keys']} keys",
                 f"  log:    {report['log']}"]
    if os.environ.get("REDIS_URL"):
        lines.append("note: REDIS_URL is set, so commands use that server, not this one")
    return lines


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    size = count / 1024
    for unit in ("KB", "MB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"
