"""The tool gateway and its built-in tools: every tool call of every graph goes through `ToolGateway`."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from reactgraph._lazy import lazy_attributes

if TYPE_CHECKING:
    from reactgraph.tools.call import (
        ToolError,
        ToolInputError,
        ToolRegistrationError,
        ToolResult,
        ToolSession,
        ToolStatus,
        TransientToolError,
    )
    from reactgraph.tools.gateway import ToolGateway
    from reactgraph.tools.meta import ToolMeta, as_tool_meta
    from reactgraph.tools.resilience import (
        BreakerConfig,
        BreakerSnapshot,
        BreakerState,
        CircuitBreaker,
        MemoryBreakerStore,
        RedisBreakerStore,
    )

_EXPORTS = {
    "ToolError": "reactgraph.tools.call",
    "ToolInputError": "reactgraph.tools.call",
    "ToolRegistrationError": "reactgraph.tools.call",
    "TransientToolError": "reactgraph.tools.call",
    "ToolGateway": "reactgraph.tools.gateway",
    "ToolMeta": "reactgraph.tools.meta",
    "as_tool_meta": "reactgraph.tools.meta",
    "BreakerConfig": "reactgraph.tools.resilience",
    "BreakerSnapshot": "reactgraph.tools.resilience",
    "BreakerState": "reactgraph.tools.resilience",
    "MemoryBreakerStore": "reactgraph.tools.resilience",
    "RedisBreakerStore": "reactgraph.tools.resilience",
    "CircuitBreaker": "reactgraph.tools.resilience",
    "ToolResult": "reactgraph.tools.call",
    "ToolStatus": "reactgraph.tools.call",
    "ToolSession": "reactgraph.tools.call",
}
__all__ = [*_EXPORTS, "default_gateway", "gateway_for"]
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)

# A library must not print on its own: applications (our CLI included) decide where records go.
logging.getLogger("reactgraph").addHandler(logging.NullHandler())

def default_gateway(*, extra_tools=(), **options):
    """A gateway with the built-in tools, plus `extra_tools` (which replace built-ins of the same name).

    Other options go to `builtin_tools` (http_allow_hosts, http_allow_private, http_approval, weather_url,
    rag_index) and to
    `ToolGateway` (limits, breaker config and store).
    """
    from reactgraph.tools.builtin import builtin_tools
    from reactgraph.tools.gateway import ToolGateway
    from reactgraph.tools.meta import as_tool_meta

    tool_options = {k: options.pop(k) for k in ("http_allow_hosts", "http_allow_private", "http_approval",
                                                 "weather_url", "rag_index") if k in options}
    extras = {meta.name: meta for meta in map(as_tool_meta, extra_tools)}
    builtins = [extras.pop(meta.name, meta) for meta in builtin_tools(**tool_options)]
    return ToolGateway([*builtins, *extras.values()], **options)


def gateway_for(gateway=None, tools=None):
    """The gateway a graph builder runs on: `gateway` as given; `tools=[...]` as LangChain's `create_agent` takes
    them (LangChain tools, typed functions or `ToolMeta`: only those, on a gateway of their own, with its
    policies); a list passed where the gateway goes is taken as those tools; neither means `default_gateway()`."""
    from reactgraph.tools.gateway import ToolGateway

    if isinstance(gateway, list | tuple):
        gateway, tools = None, [*gateway, *(tools or ())]
    if gateway is not None and tools is not None:
        raise TypeError("give either a gateway or tools=[...], not both (gateway.register adds tools to a gateway)")
    if gateway is not None and not isinstance(gateway, ToolGateway):
        raise TypeError(f"gateway must be a ToolGateway or a list of tools, not {type(gateway).__name__}")
    if tools is not None:
        return ToolGateway(tools)
    return gateway or default_gateway()
