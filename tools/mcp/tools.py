"""MCP servers' tools as gateway tools: one `ToolMeta` per MCP tool, its calls sent to the server's session."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from reactgraph.tools.call import ToolOutput, ToolRegistrationError
from reactgraph.tools.mcp import loop
from reactgraph.tools.mcp.config import McpServerConfig, read_config
from reactgraph.tools.mcp.server import McpServer, McpStartError
from reactgraph.tools.meta import ToolMeta, in_band_outcome
from reactgraph.tools.telemetry import trace_headers

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from reactgraph.tools.gateway import ToolGateway

log = logging.getLogger(__name__)
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")  # model providers accept only these in tool names
_START_MARGIN_S = 10.0  # past the servers' own startup timeouts, for the hop to the MCP loop and back


def prepare(config: Mapping[str, Any] | str, startup_cap_s: float | None = None
            ) -> tuple[list[McpServerConfig], str]:
    """The enabled servers of a config, checked, and the config's source (a file's resolved path); with
    `startup_cap_s`, no server's `startup_timeout_s` (its first start and every restart) is longer than that."""
    servers, source = read_config(config)
    enabled = [server for server in servers if server.enabled]
    if startup_cap_s is None:
        return enabled, source
    return [_capped(server, startup_cap_s) for server in enabled], source


def _capped(server: McpServerConfig, cap_s: float) -> McpServerConfig:
    if server.startup_timeout_s <= cap_s:
        return server
    log.warning("MCP server %r: startup_timeout_s %g s capped to %g s (below the session lease's expiry)",
                server.name, server.startup_timeout_s, cap_s)
    return dataclasses.replace(server, startup_timeout_s=cap_s)


async def start_all(configs: Iterable[McpServerConfig]) -> tuple[list[McpServer], list[McpStartError]]:
    """Start the servers concurrently (on the MCP loop): those that started, and why each other one did not.

    One server that does not start leaves the others be, as Claude Code does: a config of five servers with one
    down still gives four servers' tools."""
    servers = [McpServer(config) for config in configs]
    outcomes = await asyncio.gather(*(server.start() for server in servers), return_exceptions=True)
    if stop := next((o for o in outcomes if isinstance(o, BaseException) and not isinstance(o, Exception)), None):
        await _close(servers)  # an interrupt or exit, not a server's failure: nothing is kept
        raise stop
    started, failed = [], []
    for server, outcome in zip(servers, outcomes, strict=True):
        if isinstance(outcome, Exception):
            await server.aclose()  # what is left of it (its log file)
            failed.append(outcome if isinstance(outcome, McpStartError) else McpStartError(
                f"MCP server {server.name!r} did not start: {type(outcome).__name__}: {outcome}", server.name))
        else:
            started.append(server)
    return started, failed


def register(gateway: ToolGateway, servers: list[McpServer], scope: str = "") -> list[ToolMeta]:
    """Each server's tools as `ToolMeta`s, registered all or none: a name clash is one line naming both sources."""
    metas = [tool_meta(server, tool, scope) for server in servers for tool in server.tools.values()]
    seen: dict[str, str] = {}
    for meta in metas:
        source = f"MCP server {meta.extra['mcp_server']!r}"
        other = seen.get(meta.name) or _source_of(gateway.registry.get(meta.name))
        if other:
            raise ToolRegistrationError(
                f"tool name {meta.name!r} from {source} clashes with {other}; set a \"prefix\" for the server "
                "in the MCP config (its tools become <prefix><name>)")
        seen[meta.name] = source
    for meta in metas:
        gateway.register(meta)
    return metas


def tool_meta(server: McpServer, tool: BaseTool, scope: str = "") -> ToolMeta:
    """One MCP tool as a gateway tool: its JSON schema unchanged, tagged `mcp` and `mcp:<server>`."""
    config = server.config
    mcp_name = tool.name
    name = config.prefix + _UNSAFE.sub("_", mcp_name)

    async def run(**arguments: Any) -> str:
        # Read here, where the gateway's tool span is current: the call itself runs on the MCP loop's thread.
        message = await loop.run(server.call(mcp_name, arguments, trace_context=trace_headers()))
        outcome = in_band_outcome(name, message)
        # the adapter's artifact (images, structured content) is the server's data, unbounded: not kept in the state
        return render_content(outcome.content if isinstance(outcome, ToolOutput) else outcome)

    schema = tool.args_schema if isinstance(tool.args_schema, dict) else {"type": "object", "properties": {}}
    tags = ("mcp", f"mcp:{config.name}", *((scope,) if scope else ()))
    return ToolMeta.from_json_schema(name, tool.description or mcp_name, schema, run, tags=tags,
                                     approval=config.approval, timeout_s=config.timeout_s, max_attempts=1,
                                     extra={"mcp_server": config.name, "mcp_tool": mcp_name,
                                            "mcp_config": config.source})


def render_content(content: Any) -> str:
    """An MCP result as text: text blocks joined; images, files and other blocks as a short note (never raw)."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, Mapping):
            parts.append(_note(block))
        else:
            parts.append(f"[{type(block).__name__} content not shown]")
    return "\n".join(parts) if parts else "(the tool returned no content)"


def _note(block: Mapping[str, Any]) -> str:
    kind = str(block.get("type", "content"))
    mime = block.get("mime_type") or block.get("mimeType") or ""
    data = block.get("base64") or block.get("data")
    size = f", {len(data) * 3 // 4 / 1024:.1f} KB" if isinstance(data, str) else ""
    where = f", {block['url']}" if isinstance(block.get("url"), str) else ""
    return f"[{kind}{': ' + mime if mime else ''}{size}{where[:200]} — not shown]"


def _source_of(meta: ToolMeta | None) -> str:
    if meta is None:
        return ""
    if server := meta.extra.get("mcp_server"):
        return f"MCP server {server!r}"
    builtin = getattr(meta.run, "__module__", "").startswith("reactgraph.tools.builtin")
    return f"the {'built-in' if builtin else 'registered'} tool {meta.name!r}"


async def aadd_servers(gateway: ToolGateway, config: Mapping[str, Any] | str, scope: str = "") -> list[ToolMeta]:
    """`ToolGateway.aadd_mcp_servers`: start the config's servers, register the tools of those that started."""
    configs, source = prepare(config, gateway.mcp_startup_cap_s)
    servers, failed = await loop.run(start_all(configs))
    try:
        metas = _keep(gateway, servers, scope)
    except ToolRegistrationError:
        await loop.run(_close(servers))
        raise
    _report(gateway, configs, failed, source)
    return metas


def add_servers(gateway: ToolGateway, config: Mapping[str, Any] | str, scope: str = "") -> list[ToolMeta]:
    """`ToolGateway.add_mcp_servers`: the same from sync code (inside a running loop too: it waits on the MCP
    loop's thread, never on the caller's loop)."""
    configs, source = prepare(config, gateway.mcp_startup_cap_s)
    wait_s = max((c.startup_timeout_s for c in configs), default=0.0) + _START_MARGIN_S
    servers, failed = loop.run_blocking(start_all(configs), wait_s)
    try:
        metas = _keep(gateway, servers, scope)
    except ToolRegistrationError:
        loop.run_blocking(_close(servers), 2 * _START_MARGIN_S)
        raise
    _report(gateway, configs, failed, source)
    return metas


def _keep(gateway: ToolGateway, servers: list[McpServer], scope: str) -> list[ToolMeta]:
    metas = register(gateway, servers, scope)
    gateway.mcp_servers.extend(servers)
    for server in servers:
        gateway.mcp_failed.pop(server.name, None)  # a server of that name that failed before has started now
    return metas


def _report(gateway: ToolGateway, configs: list[McpServerConfig], failed: list[McpStartError], source: str) -> None:
    """Each server that did not start: in `gateway.mcp_failed` and one warning record; and, when none of the
    config's servers started, one more record saying so."""
    for failure in failed:
        gateway.mcp_failed[failure.server] = str(failure)
        log.warning("%s; its tools are left out", failure,
                    extra={"mcp_start": {"server": failure.server, "config": source, "error": str(failure)}})
    if failed and len(failed) == len(configs):
        log.warning("MCP config %s: none of its %d server(s) started; going on without their tools",
                    "(a dict or JSON text)" if source == "config" else source, len(configs),
                    extra={"mcp_start": {"config": source, "started": 0, "configured": len(configs)}})


async def close_servers(servers: Iterable[McpServer]) -> None:
    """Close these servers' sessions (on the MCP loop)."""
    await loop.run(_close(servers))


async def _close(servers: Iterable[McpServer]) -> None:
    await asyncio.gather(*(server.aclose() for server in servers), return_exceptions=True)
