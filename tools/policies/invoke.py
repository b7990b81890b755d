"""The innermost step: run the tool itself, async on the loop or sync on a worker thread."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from concurrent.futures import ThreadPoolExecutor

from reactgraph.tools import observations
from reactgraph.tools.policies.base import CallContext
from reactgraph.tools.result import ToolResult, ToolStatus


class Invoke:
    """Calls `meta.run` with the validated arguments; sync tools never block the event loop."""

    def __init__(self, executor: ThreadPoolExecutor | None = None) -> None:
        # A pool of our own: a hung sync tool keeps its thread, and must not starve the loop's default pool.
        self.executor = executor or ThreadPoolExecutor(max_workers=32, thread_name_prefix="tool")

    async def __call__(self, call: CallContext) -> ToolResult:
        kwargs = dict(call.arguments)  # field name → validated value, nested models kept as models
        run = call.tool.run
        if call.tool.is_async:
            value = await run(**kwargs)
        else:
            ctx = contextvars.copy_context()
            value = await asyncio.get_running_loop().run_in_executor(
                self.executor, functools.partial(ctx.run, run, **kwargs))
            if inspect.isawaitable(value):  # a sync-looking callable (partial, callable object) that is async inside
                value = await value
        return call.result(ToolStatus.OK, observations.render_value(value), value=value)
