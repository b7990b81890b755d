"""Opening one MCP server's transport (stdio, streamable HTTP or SSE) from its checked config.

The adapters' connection parameters are honoured here: a stdio server's `encoding`, an HTTP server's `timeout`,
`sse_read_timeout`, `terminate_on_close`, `auth` and `httpx_client_factory` (the client then gets our trace hook).
Values may name environment variables as Claude Code and VS Code configs write them: `${VAR}`, `${VAR:-default}`
and `${env:VAR}`, in the command, its arguments, `env`, `cwd`, the URL and the headers (an unset variable with no
default is left as written, as langchain-mcp-adapters does). A stdio server runs under `exit_report.py`, so its
start error can name how it ended.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import httpx
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from reactgraph.tools.mcp.config import McpServerConfig
from reactgraph.tools.mcp.exit_report import MARKER

TRACE_KEYS = ("traceparent", "tracestate")  # W3C trace context, in `params._meta` as MCP's SEP-414 puts it
_VARIABLE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_EXIT_REPORT = str(Path(__file__).with_name("exit_report.py"))
Streams = tuple[MemoryObjectReceiveStream[Any], MemoryObjectSendStream[Any]]
# asyncio's child watchers, when a child's exit status was read before them (ThreadedChildWatcher; PidfdChildWatcher)
_REAPED_ELSEWHERE = frozenset({"Unknown child process pid %d, will report returncode 255",
                               "child process pid %d exit status already read:  will report returncode 255"})


class _ReapedElsewhere(logging.Filter):
    """Leaves out asyncio's warning that a child process had been reaped before its watcher could wait for it.

    asyncio's subprocess transport, closed just after its child exited and before the watcher reported it, reads
    the exit status itself (`Popen.poll()` in `close()`); the watcher then finds no child and warns. The MCP SDK's
    stdio client closes a server's process that way when the server ends early: a race inside asyncio that says
    nothing about the server (exit_report.py says how it ended), and a stray line on the CLI's stderr."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg in _REAPED_ELSEWHERE)  # a msg may be any object


if not any(isinstance(f, _ReapedElsewhere) for f in logging.getLogger("asyncio").filters):
    logging.getLogger("asyncio").addFilter(_ReapedElsewhere())


def expand(value: str) -> str:
    """`value` with each `${VAR}`, `${VAR:-default}` or `${env:VAR}` replaced from the environment."""
    def one(match: re.Match[str]) -> str:
        found = os.environ.get(match.group(1))
        if found is None or (found == "" and match.group(2) is not None):
            return match.group(2) if match.group(2) is not None else match.group(0)
        return found
    return _VARIABLE.sub(one, value)


def _expand_all(values: dict[str, str]) -> dict[str, str]:
    return {key: expand(value) for key, value in values.items()}


@asynccontextmanager
async def open_transport(config: McpServerConfig, stderr: TextIO | None) -> AsyncIterator[Streams]:
    """The server's (read, write) message streams, open for the block; a stdio server's log goes to `stderr`."""
    if config.transport == "stdio":
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(
            command=sys.executable, args=["-I", "-S", _EXIT_REPORT, expand(config.command),
                                          *map(expand, config.args)],
            cwd=expand(config.cwd) if config.cwd else None,
            env=None if config.env is None else _expand_all(config.env),
            encoding=config.encoding, encoding_error_handler=config.encoding_error_handler)
        async with stdio_client(params, errlog=stderr or sys.stderr) as streams:
            yield streams
        return
    from mcp.client.streamable_http import create_mcp_http_client

    headers = _expand_all(config.headers)
    make_client = config.httpx_client_factory or create_mcp_http_client  # the adapters' parameter, from Python

    def traced_client(headers: dict[str, str] | None = None, timeout: httpx.Timeout | None = None,
                      auth: httpx.Auth | None = None) -> httpx.AsyncClient:
        client = make_client(headers=headers, timeout=timeout, auth=auth)
        client.event_hooks["request"].append(_trace_headers_from_meta)
        return client
    if config.transport == "sse":  # the 2024-11-05 transport: still what many hosted servers speak
        from mcp.client.sse import sse_client

        async with sse_client(expand(config.url), headers=headers, httpx_client_factory=traced_client,
                              timeout=config.http_timeout_s or config.startup_timeout_s, auth=config.auth,
                              **_given(sse_read_timeout=config.sse_read_timeout_s)) as streams:
            yield streams
        return
    from mcp.client.streamable_http import streamable_http_client

    async with traced_client(headers=headers, timeout=_http_timeout(config), auth=config.auth) as client, \
            streamable_http_client(expand(config.url), http_client=client,
                                   terminate_on_close=config.terminate_on_close) as (read, write, _):
        yield read, write


def _http_timeout(config: McpServerConfig) -> httpx.Timeout | None:
    """The adapters' `timeout` and `sse_read_timeout` as langchain-mcp-adapters builds them (None: mcp's own
    30 s, and 300 s for a read); one given alone keeps mcp's default for the other."""
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

    if config.http_timeout_s is None and config.sse_read_timeout_s is None:
        return None
    return httpx.Timeout(config.http_timeout_s or MCP_DEFAULT_TIMEOUT,
                         read=config.sse_read_timeout_s or MCP_DEFAULT_SSE_READ_TIMEOUT)


def _given(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


async def _trace_headers_from_meta(request: Any) -> None:
    """Copy a request's trace context from its JSON-RPC `params._meta` to W3C headers of its HTTP POST.

    The transport posts from the session's own task, where the calling task's context is not current; the
    message itself carries the call's trace context, so each POST gets its own call's. Our own outgoing body,
    read only when it names a traceparent.
    """
    if request.method != "POST" or b'"traceparent"' not in (body := request.content):
        return
    try:
        message = json.loads(body)
    except ValueError:
        return
    meta = (message.get("params") or {}).get("_meta") if isinstance(message, dict) else None
    if isinstance(meta, dict):
        for key in TRACE_KEYS:
            if isinstance(value := meta.get(key), str):
                request.headers[key] = value


def stderr_report(stream: TextIO | None) -> str:
    """What a stdio server's log says about its end: how it ended and its last lines of output (at most 3)."""
    if stream is None:
        return ""
    try:
        stream.flush()
        stream.seek(0)
        lines = [line.strip() for line in stream.read()[-4000:].splitlines() if line.strip()]
        stream.seek(0, os.SEEK_END)
    except (OSError, ValueError):
        return ""
    ended = [line for line in lines if line.startswith(MARKER)]
    output = [line[:200] for line in lines if not line.startswith(MARKER)][-3:]
    parts = [ended[-1].removeprefix("[reactgraph: the MCP server ").rstrip("]")] if ended else []
    if output:
        parts.append("its last output: " + " | ".join(output))
    return "; ".join(parts)
