"""Turns whatever the inner steps produced (a value or an exception) into a model-readable `ToolResult`."""

from __future__ import annotations

import asyncio

from reactgraph.tools import observations
from reactgraph.tools.errors import ToolInputError
from reactgraph.tools.policies.base import CallContext, Handler
from reactgraph.tools.policies.validation import schema_hint
from reactgraph.tools.result import ToolResult, ToolStatus


class Normalise:
    """The boundary below which tools may raise; above it, every outcome is a `ToolResult`."""

    async def __call__(self, call: CallContext, proceed: Handler) -> ToolResult:
        try:
            return await proceed(call)
        except TimeoutError:
            return call.result(ToolStatus.TIMEOUT, observations.timeout(call.name, call.tool.timeout_s))
        except ToolInputError as exc:
            return call.result(ToolStatus.INVALID_ARGS,
                               observations.invalid_args(call.name, str(exc), schema_hint(call.tool)))
        except asyncio.CancelledError:
            raise  # the caller gave up (e.g. the graph run was cancelled): not the tool's fault to report
        except Exception as exc:  # noqa: BLE001 - a tool's fault must never escape the gateway
            return call.result(ToolStatus.ERROR, observations.failed(call.name, exc),
                               error_type=type(exc).__name__)
