"""The normaliser: turns what the inner steps produced (a value or an exception) into a model-readable `ToolResult`."""

from __future__ import annotations

from reactgraph.tools import observations
from reactgraph.tools.errors import ToolInputError
from reactgraph.tools.policies.base import CallContext, Handler
from reactgraph.tools.policies.guards.validation import schema_hint
from reactgraph.tools.policies.resilience.containment import tool_fault
from reactgraph.tools.result import ToolResult, ToolStatus


class Normalise:
    """The boundary below which tools may raise anything; above it, every outcome is a `ToolResult`.

    Only the caller stopping the run (its task cancelled, a user's Ctrl-C) passes through, re-raised: see
    `containment` for how that is told apart from a tool raising KeyboardInterrupt or CancelledError itself.
    """

    async def __call__(self, call: CallContext, proceed: Handler) -> ToolResult:
        try:
            return await proceed(call)
        except TimeoutError:
            return call.result(ToolStatus.TIMEOUT, observations.timeout(call.name, call.tool.timeout_s))
        except ToolInputError as exc:
            return call.result(ToolStatus.INVALID_ARGS,
                               observations.invalid_args(call.name, str(exc), schema_hint(call.tool)))
        except BaseException as exc:  # noqa: BLE001 - a tool's fault, of any kind, must never escape the gateway
            return tool_fault(call, exc)
