"""The invocation: runs the tool itself, async on the loop or sync on one of the gateway's threads."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from reactgraph.tools import observations
from reactgraph.tools.policies.base import CallContext
from reactgraph.tools.result import ToolOutput, ToolResult, ToolStatus
from reactgraph.tools.threads import ToolThreads


class Invoke:
    """Calls `meta.run` with the validated arguments; sync tools never block the event loop.

    A sync tool whose earlier calls left too many threads stuck (still running past their timeout) is not
    given another: the call fails at once, and the threads stay for the tools that return.
    """

    def __init__(self, threads: ToolThreads | None = None) -> None:
        self.threads = threads or ToolThreads()

    async def __call__(self, call: CallContext) -> ToolResult:
        kwargs = dict(call.arguments)  # field name → validated value, nested models kept as models
        tool = call.tool
        if tool.injects is not None:  # what the runtime supplies, added after every check of what the model sent
            kwargs.update(tool.injects.values(call.call_id, call.injection, []))
        if tool.is_async:
            value = await tool.run(**kwargs)
            if isinstance(value, ToolOutput):
                return call.result(ToolStatus.OK, observations.render_value(value.content), value=value.content,
                                   artifact=value.artifact)
            return call.result(ToolStatus.OK, observations.render_value(value), value=value)
        stuck = self.threads.refusal(call.name)
        if stuck is not None:
            return call.result(ToolStatus.ERROR, observations.stuck(call.name, stuck, tool.timeout_s),
                               reason="stuck threads", stuck_threads=stuck)
        value, content = await self.threads.run(call.name, lambda: _run_and_render(tool.run, kwargs))
        if content is None:  # a sync-looking callable (partial, callable object) that is async inside
            value = await value
            content = observations.render_value(value)
        return call.result(ToolStatus.OK, content, value=value)


def _run_and_render(run: Callable[..., Any], kwargs: Mapping[str, Any]) -> tuple[Any, str | None]:
    # Rendered on the tool's thread: a huge or slow-to-print value then costs the tool's time, not the loop's.
    value = run(**kwargs)
    if inspect.isawaitable(value):
        return value, None
    return value, observations.render_value(value)
