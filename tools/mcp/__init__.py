"""MCP servers' tools through the gateway: config parsing (config.py), one persistent session per server on the
MCP loop's thread (server.py, loop.py), and MCP tools as `ToolMeta`s (tools.py). Built on langchain-mcp-adapters.

Importing this package is cheap: `mcp` and the adapters load only when a server is started.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reactgraph._lazy import lazy_attributes

if TYPE_CHECKING:
    from reactgraph.tools.mcp.config import ENV_VAR, McpConfigError, McpServerConfig, read_config
    from reactgraph.tools.mcp.server import McpServer, McpStartError

_EXPORTS = {
    "ENV_VAR": "reactgraph.tools.mcp.config",
    "McpConfigError": "reactgraph.tools.mcp.config",
    "McpServerConfig": "reactgraph.tools.mcp.config",
    "read_config": "reactgraph.tools.mcp.config",
    "McpServer": "reactgraph.tools.mcp.server",
    "McpStartError": "reactgraph.tools.mcp.server",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
