"""The retry: transient failures are tried again with exponential backoff and full jitter."""

from __future__ import annotations

import asyncio
import random

from reactgraph.tools.errors import TransientToolError
from reactgraph.tools.policies.base import CallContext, Handler
from reactgraph.tools.policies.observability.events import emit
from reactgraph.tools.result import ToolResult


class Retry:
    """Retries only `TransientToolError`s, up to the tool's `max_attempts`, and only while time remains.

    Timeouts are never retried (the timeout policy sits outside this one) and neither are argument
    errors (validation ran before, and `ToolInputError` is not transient).
    """

    def __init__(self, base_delay_s: float = 0.2, max_delay_s: float = 2.0, rng: random.Random | None = None) -> None:
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self.rng = rng or random.Random()

    def backoff(self, attempt: int) -> float:
        """Full jitter: a random delay up to base·2^(attempt-1), capped, so retrying workers spread out."""
        return self.rng.uniform(0, min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1)))

    async def __call__(self, call: CallContext, proceed: Handler) -> ToolResult:
        while True:
            call.attempts += 1
            try:
                return await proceed(call)
            except TransientToolError as exc:
                if call.attempts >= call.tool.max_attempts:
                    raise
                delay = self.backoff(call.attempts)
                if call.deadline is not None and asyncio.get_running_loop().time() + delay >= call.deadline:
                    raise  # no time left for another attempt: report the real error, not a timeout
                if call.sink is not None:
                    emit(call.sink, call.name, call.call_id, "retry", attempt=call.attempts + 1,
                         max_attempts=call.tool.max_attempts, error=type(exc).__name__, delay_s=round(delay, 3))
                await asyncio.sleep(delay)
