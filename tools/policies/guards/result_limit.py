"""The result-limit guard: no result leaves the gateway larger than its limit, so none reaches a graph's state whole."""

from __future__ import annotations

from reactgraph.tools import observations
from reactgraph.tools.policies.base import CallContext, Handler
from reactgraph.tools.result import ToolResult


class ResultLimit:
    """Cuts a result's text to the tool's `max_result_chars` (else the gateway's), saying how much was cut.

    A cut result also drops its raw `value`: the point is that a 100 MB tool output is gone before the
    result is returned, not only from the text (results become messages, checkpoints and pending writes).
    """

    def __init__(self, max_chars: int) -> None:
        if max_chars < 1:
            raise ValueError("max_result_chars must be >= 1")
        self.max_chars = max_chars

    async def __call__(self, call: CallContext, proceed: Handler) -> ToolResult:
        result = await proceed(call)
        meta = call.meta
        limit = self.max_chars if meta is None or meta.max_result_chars is None else meta.max_result_chars
        total = len(result.content)
        if total > limit:
            result.content = result.content[:limit] + observations.cut_note(limit, total)
            result.value = None
            result.detail["cut"] = {"kept_chars": limit, "total_chars": total}
        return result
