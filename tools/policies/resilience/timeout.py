"""The timeout: a hard time limit per call, retries included."""

from __future__ import annotations

import asyncio

from reactgraph.tools.policies.base import CallContext, Handler
from reactgraph.tools.policies.observability.events import emit
from reactgraph.tools.result import ToolResult


class Timeout:
    """Bounds the whole call by the tool's `timeout_s`; an overrun raises `TimeoutError` for `Normalise`.

    It wraps retry (not each attempt) so a result always arrives within the tool's timeout, whatever
    the backoff; retry reads the deadline to avoid starting an attempt it cannot finish.
    """

    async def __call__(self, call: CallContext, proceed: Handler) -> ToolResult:
        loop = asyncio.get_running_loop()
        call.deadline = loop.time() + call.tool.timeout_s
        try:
            async with asyncio.timeout_at(call.deadline):
                return await proceed(call)
        except TimeoutError:
            if call.sink is not None:
                emit(call.sink, call.name, call.call_id, "timeout", timeout_s=call.tool.timeout_s,
                     attempts=call.attempts)
            raise
