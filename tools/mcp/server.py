"""One MCP server's persistent session: started once, shared by every call, restarted after a crash.

Everything here runs on the MCP loop (`loop.py`). The session is owned by one long-lived task (`_own`), which
opens the transport and the `ClientSession` and keeps them open until it is told to stop or the connection
ends; calls are other tasks on the same loop sending requests on that session, concurrently.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any

import anyio
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from mcp import ClientSession, McpError, types

from reactgraph.tools.call import ToolError, ToolRegistrationError
from reactgraph.tools.mcp.config import McpServerConfig
from reactgraph.tools.mcp.transports import TRACE_KEYS, open_transport, stderr_report

log = logging.getLogger(__name__)
# anyio's words for a stream whose other end went away (a stdio server that exited): no message of their own
_STREAM_ENDED = (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream)
_CALL_ID = "reactgraph-mcp-call"  # the adapter's tools answer a tool-call input with a ToolMessage, status included
_STOP_GRACE_S = 5.0  # closing a session: stdio servers get their stdin closed, then 2 s (mcp's) before SIGTERM
_servers: set[McpServer] = set()  # every open server of the process, closed at exit (loop.py)
# The calling tool span's trace context, for the call running in this task (set by `McpServer.call`).
_trace_context: ContextVar[dict[str, str] | None] = ContextVar("reactgraph_mcp_trace_context", default=None)


class McpStartError(ToolRegistrationError):
    """An MCP server did not start (bad command, exited at once, connection refused, no answer in time), or was
    not started (a setting it needs cannot be honoured here); `server` is its name."""

    def __init__(self, message: str, server: str = "") -> None:
        super().__init__(message)
        self.server = server


class _Session(ClientSession):
    """A `ClientSession` that tells the server when a request is abandoned, and says when its connection ends.

    mcp 1.x drops an abandoned request silently; the spec's `notifications/cancelled` lets the server stop
    the work (FastMCP cancels the tool's task). The request id is read just before `send_request` takes it.
    """

    def __init__(self, *args: Any, on_end: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._on_end = on_end
        self._notices: set[asyncio.Task[None]] = set()

    async def _receive_loop(self) -> None:
        try:
            await super()._receive_loop()
        finally:
            self._on_end()

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, *args: Any,
                        meta: dict[str, Any] | None = None, **kwargs: Any) -> types.CallToolResult:
        """`tools/call`, with the caller's trace context in `params._meta` (the adapter passes no `meta`)."""
        if trace := _trace_context.get():
            meta = {**trace, **(meta or {})}
        return await super().call_tool(name, arguments, *args, meta=meta, **kwargs)

    async def send_request(self, request: Any, result_type: Any, *args: Any, **kwargs: Any) -> Any:
        request_id = self._request_id
        try:
            return await super().send_request(request, result_type, *args, **kwargs)
        except asyncio.CancelledError:
            task = asyncio.get_running_loop().create_task(self._cancelled(request_id))
            self._notices.add(task)
            task.add_done_callback(self._notices.discard)
            raise

    async def _cancelled(self, request_id: int) -> None:
        notice = types.CancelledNotification(params=types.CancelledNotificationParams(
            requestId=request_id, reason="the caller stopped waiting (timeout or cancellation)"))
        try:
            async with asyncio.timeout(2.0):
                await self.send_notification(types.ClientNotification(notice))
        except Exception:  # noqa: BLE001 - best effort: the session may be closing
            log.debug("could not send notifications/cancelled for request %s", request_id)


class McpServer:
    """The process's connection to one configured server; `call` starts (or restarts) it as needed."""

    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self.starts = 0  # sessions opened so far (1 unless the server died and was restarted)
        self.closed = False
        self.tools: dict[str, BaseTool] = {}  # the server's tools, as the adapter converts them, by MCP name
        self._session: _Session | None = None
        self._stop: asyncio.Event | None = None
        self._owner: asyncio.Task[None] | None = None
        self._lock: asyncio.Lock | None = None
        self._stderr: Any = None

    @property
    def name(self) -> str:
        return self.config.name

    async def start(self) -> dict[str, BaseTool]:
        """The server's tools, starting its session first if none is open (one start for concurrent callers)."""
        if self._session is not None:
            return self.tools
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._session is None:
                if self.closed:
                    raise ToolError(f"MCP server {self.name!r} was closed")
                await self._start()
        return self.tools

    async def call(self, tool_name: str, args: dict[str, Any],
                   trace_context: dict[str, str] | None = None) -> ToolMessage:
        """Call one tool; a lost connection is a `ToolError` for this call, and the next call starts anew.

        `trace_context`: the caller's W3C headers (`trace_headers()`), sent in the request's `params._meta`
        and, over streamable HTTP, as headers of its POST too.
        """
        if trace_context:
            _trace_context.set({k: v for k, v in trace_context.items() if k in TRACE_KEYS})
        tools = await self.start()
        tool = tools.get(tool_name)
        if tool is None:
            raise ToolError(f"MCP server {self.name!r} no longer offers the tool {tool_name!r}")
        session = self._session
        try:
            message = await tool.ainvoke({"type": "tool_call", "name": tool_name, "args": args, "id": _CALL_ID})
        except Exception as exc:
            lost = (isinstance(exc, McpError) and exc.error.code == types.CONNECTION_CLOSED) or session is None \
                or self._session is not session or (self._stop is not None and self._stop.is_set())
            if lost:
                self._lose(session)
                raise ToolError(f"MCP server {self.name!r} stopped during the call ({_cause(exc)}); "
                                "the next call starts it again") from exc
            raise ToolError(f"MCP server {self.name!r}: {_cause(exc)}") from exc
        if not isinstance(message, ToolMessage):  # the adapter always answers a tool call with one
            raise ToolError(f"MCP server {self.name!r}: unexpected result {type(message).__name__}")
        return message

    async def aclose(self) -> None:
        """Close the session (stdio: the server's stdin, then SIGTERM if it lingers); later calls fail."""
        self.closed = True
        _servers.discard(self)
        await self._stop_owner()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    # -- the session's owner -------------------------------------------------------------------------------

    async def _start(self) -> None:
        if self.config.unusable:
            raise McpStartError(f"MCP server {self.name!r} was not started: {self.config.unusable}", self.name)
        await self._stop_owner()  # what is left of a session that died
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        self._stop = asyncio.Event()
        self._owner = loop.create_task(self._own(ready, self._stop), name=f"reactgraph-mcp:{self.name}")
        _servers.add(self)
        try:
            async with asyncio.timeout(self.config.startup_timeout_s):
                await asyncio.shield(ready)
        except TimeoutError:
            ready.cancel()
            await self._stop_owner(at_once=True)  # it is stuck in the handshake, not waiting for a stop
            raise McpStartError(f"MCP server {self.name!r} did not start: no answer within "
                                f"{self.config.startup_timeout_s:g} s ({self.config.describe()})", self.name) from None

    async def _own(self, ready: asyncio.Future[None], stop: asyncio.Event) -> None:
        try:
            async with self._open(on_end=stop.set) as session:
                await session.initialize()
                from langchain_mcp_adapters.tools import load_mcp_tools

                tools = await load_mcp_tools(session, server_name=self.name)
                self.tools = {tool.name: tool for tool in tools}
                self._session = session
                self.starts += 1
                ready.set_result(None)
                await stop.wait()
        except BaseException as exc:  # the owner's end, of any kind (cancellation too), is reported or logged here
            if not ready.done():
                ready.set_exception(McpStartError(f"MCP server {self.name!r} did not start: {self._why(exc)}",
                                                  self.name))
            elif not isinstance(exc, asyncio.CancelledError):
                log.debug("MCP server %r: session ended: %s", self.name, _cause(exc))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._session = None

    def _lose(self, session: _Session | None) -> None:
        if session is not None and self._session is session:
            self._session = None
        if self._stop is not None:
            self._stop.set()

    async def _stop_owner(self, at_once: bool = False) -> None:
        owner, self._owner = self._owner, None
        if owner is None:
            return
        if self._stop is not None:
            self._stop.set()
        done, _ = await asyncio.wait({owner}, timeout=0 if at_once else _STOP_GRACE_S)
        if not done:
            owner.cancel()
            await asyncio.wait({owner}, timeout=_STOP_GRACE_S)

    @asynccontextmanager
    async def _open(self, on_end: Callable[[], None]) -> AsyncIterator[_Session]:
        if self.config.transport == "stdio" and self._stderr is None:
            # the server's log, kept out of the terminal; its last lines explain a failure
            self._stderr = tempfile.TemporaryFile("a+", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed by aclose
        async with open_transport(self.config, self._stderr) as (read, write), \
                _Session(read, write, on_end=on_end, **self.config.session_kwargs) as session:
            yield session

    def _why(self, exc: BaseException) -> str:
        cause = _cause(exc)
        if isinstance(exc, asyncio.CancelledError):
            cause = "cancelled"
        report = stderr_report(self._stderr)
        return f"{cause} ({self.config.describe()})" + (f"; {report}" if report else "")


def _cause(exc: BaseException) -> str:
    """The innermost, first failure of an anyio exception group, as one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if (isinstance(exc, McpError) and exc.error.code == types.CONNECTION_CLOSED) or isinstance(exc, _STREAM_ENDED):
        return "the server closed the connection"
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"


async def close_all() -> None:
    """Close every open server of the process (at exit)."""
    await asyncio.gather(*(server.aclose() for server in list(_servers)), return_exceptions=True)
