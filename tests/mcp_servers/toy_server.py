"""A small MCP server for the tests (mcp 1.x `FastMCP`): `python toy_server.py stdio|http PORT [--starts FILE]`.

Each start appends the process id to FILE, so a test can count how many server processes its calls started.
`--start-delay S` sleeps S seconds before answering anything (a server slow to start).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from mcp.server.fastmcp import Context, FastMCP, Image


def build(port: int = 0, events: Path | None = None) -> FastMCP:
    server = FastMCP("toy", host="127.0.0.1", port=port, log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def add(a: int, b: int = 0) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def fail(message: str) -> str:
        """Always fails with the message (an MCP in-band error, isError)."""
        raise ValueError(message)

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep, then answer; a cancelled call is written to the events file."""
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            if events is not None:
                with events.open("a") as out:
                    out.write("cancelled\n")
            raise
        return f"slept {seconds}"

    @server.tool()
    def crash() -> str:
        """End the server process at once, mid-call."""
        os._exit(1)

    @server.tool()
    def picture() -> list:
        """A text block and an image block."""
        return ["a red pixel", Image(data=b"\x89PNG\r\n\x1a\n" + b"\0" * 2000, format="png")]

    @server.tool()
    def trace_context(ctx: Context) -> dict:
        """The W3C trace context this call arrived with: in `params._meta`, and as HTTP headers (HTTP only)."""
        meta = ctx.request_context.meta
        request = ctx.request_context.request
        headers = getattr(request, "headers", None) or {}
        return {"meta": {k: getattr(meta, k, None) for k in ("traceparent", "tracestate")},
                "headers": {k: headers.get(k) for k in ("traceparent", "tracestate")}}

    return server


def main(argv: list[str]) -> None:
    transport, rest = argv[0], argv[1:]
    starts = Path(rest[rest.index("--starts") + 1]) if "--starts" in rest else None
    events = Path(rest[rest.index("--events") + 1]) if "--events" in rest else None
    if starts is not None:
        with starts.open("a") as out:
            out.write(f"{os.getpid()}\n")
    if "--start-delay" in rest:
        import time

        time.sleep(float(rest[rest.index("--start-delay") + 1]))
    if transport == "stdio":
        build(events=events).run("stdio")
    else:
        build(int(rest[0]), events=events).run("streamable-http")


if __name__ == "__main__":
    main(sys.argv[1:])
