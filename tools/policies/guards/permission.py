"""The permission guard: the session must be allowed to use the tool (by name or tag; deny wins)."""

from __future__ import annotations

from reactgraph.tools import observations
from reactgraph.tools.policies.base import CallContext, Handler
from reactgraph.tools.registry import ToolRegistry
from reactgraph.tools.result import ToolResult, ToolStatus


class Permission:
    """Refuses tools the session's allow/deny lists exclude, naming the ones it may use."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry

    async def __call__(self, call: CallContext, proceed: Handler) -> ToolResult:
        meta = call.tool
        if not call.session.permits(meta.name, meta.tags):
            available = self.registry.available_names(call.session)
            return call.result(ToolStatus.DENIED, observations.denied(meta.name, available),
                               reason="session policy")
        return await proceed(call)
