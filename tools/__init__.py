"""The tool gateway and its built-in tools: every tool call of every graph goes through `ToolGateway`."""

import logging

from tools.errors import ToolError, ToolInputError, ToolRegistrationError, TransientToolError
from tools.gateway import ToolGateway
from tools.meta import ToolMeta, as_tool_meta
from tools.policies.breaker_state import BreakerConfig, BreakerSnapshot, BreakerState
from tools.policies.breaker_store import MemoryBreakerStore, RedisBreakerStore
from tools.policies.circuit_breaker import CircuitBreaker
from tools.result import ToolResult, ToolStatus
from tools.session import ToolSession

# A library must not print on its own: applications (our CLI included) decide where records go.
logging.getLogger("reactgraph").addHandler(logging.NullHandler())

__all__ = [
    "BreakerConfig", "BreakerSnapshot", "BreakerState", "CircuitBreaker", "MemoryBreakerStore",
    "RedisBreakerStore", "ToolError", "ToolGateway", "ToolInputError", "ToolMeta", "ToolRegistrationError",
    "ToolResult", "ToolSession", "ToolStatus", "TransientToolError", "default_gateway",
]


def default_gateway(*, extra_tools=(), **options):
    """A gateway with the built-in tools, plus `extra_tools` (which replace built-ins of the same name).

    Other options go to `builtin_tools` (http_allow_hosts, http_allow_private, weather_url, rag_index) and to
    `ToolGateway` (limits, breaker config and store).
    """
    from tools.builtin import builtin_tools

    tool_options = {k: options.pop(k) for k in ("http_allow_hosts", "http_allow_private", "weather_url",
                                                 "rag_index") if k in options}
    extras = {meta.name: meta for meta in map(as_tool_meta, extra_tools)}
    builtins = [extras.pop(meta.name, meta) for meta in builtin_tools(**tool_options)]
    return ToolGateway([*builtins, *extras.values()], **options)
