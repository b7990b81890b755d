"""The existence guard: the named tool must be registered and enabled."""

from __future__ import annotations

from reactgraph.tools import observations
from reactgraph.tools.policies.base import CallContext, Handler
from reactgraph.tools.registry import ToolRegistry
from reactgraph.tools.result import ToolResult, ToolStatus


class Existence:
    """Resolves the call's tool; unknown or disabled tools end the call with the list of usable ones."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry

    async def __call__(self, call: CallContext, proceed: Handler) -> ToolResult:
        meta = self.registry.get(call.name)
        if meta is None:
            available = self.registry.available_names(call.session)
            return call.result(ToolStatus.UNKNOWN_TOOL, observations.unknown_tool(call.name, available))
        if not meta.enabled:
            available = self.registry.available_names(call.session)
            return call.result(ToolStatus.DENIED, observations.disabled_tool(call.name, available),
                               reason="disabled")
        call.meta = meta
        return await proceed(call)
