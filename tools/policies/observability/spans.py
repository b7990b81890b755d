"""The tracing step: an OpenTelemetry span per tool call while tracing is on (`reactgraph.tools.tracing` holds
the switch); a pass otherwise."""

from __future__ import annotations

from typing import Any

from reactgraph.tools import tracing
from reactgraph.tools.policies.base import CallContext, Handler
from reactgraph.tools.policies.observability.events import EventSink
from reactgraph.tools.policies.observability.telemetry import args_digest
from reactgraph.tools.result import ToolResult, ToolStatus


def _breaker_state(call: CallContext, result: ToolResult) -> str:
    """The circuit as the call was admitted (closed, or half_open for the probe) or refused (open), from what
    the pipeline already knows (no second read of a Redis breaker store); a call that moved it reports where."""
    if result.status is ToolStatus.CIRCUIT_OPEN:
        return "open"
    return "half_open" if call.breaker_probe else "closed"


def _event_attributes(event: dict[str, Any]) -> dict[str, Any]:
    # Gateway events hold numbers and short strings (names, states, error class names), never arguments.
    return {f"reactgraph.{k}": v for k, v in event.items()
            if k not in ("type", "event", "tool", "call_id") and isinstance(v, (str, bool, int, float))}


class ToolTracing:
    """The tracing step: one `execute_tool` span per call, a child of the node span that made it, and
    the current span while the call runs (so `trace_headers()` inside it, and the tool's own spans, follow it).

    The gateway's events (retry, breaker, timeout, waiting) become span events through the call's sink, at
    the points where they are emitted already. Attributes follow the OTel GenAI conventions (`gen_ai.*`) and
    `reactgraph.tool.*` otherwise; arguments appear only as their digest, never as values.
    """

    async def __call__(self, call: CallContext, proceed: Handler) -> ToolResult:
        tracer = tracing.active_tracer()
        if tracer is None:
            return await proceed(call)
        parent = tracing.parent_context()
        with tracer.start_as_current_span(f"execute_tool {call.name}", context=parent, record_exception=False,
                                          set_status_on_exception=False) as span:
            span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name,
                                 "gen_ai.tool.call.id": call.call_id,
                                 "reactgraph.tool.args_digest": args_digest(call.args)})
            breaker_moved: list[str] = []
            call.sink = _tee(span, call.sink, breaker_moved)
            result = await proceed(call)
            span.set_attributes({"reactgraph.tool.status": result.status.value,
                                 "reactgraph.tool.attempts": result.attempts,
                                 "reactgraph.tool.latency_ms": round(result.latency_ms, 3),
                                 "reactgraph.tool.breaker_state": (breaker_moved[-1] if breaker_moved
                                                                   else _breaker_state(call, result))})
            if not result.ok:
                from opentelemetry.trace import Status, StatusCode

                span.set_attribute("error.type", result.status.value)
                span.set_status(Status(StatusCode.ERROR, result.status.value))
            return result


def _tee(span: Any, sink: EventSink | None, breaker_moved: list[str]) -> EventSink:
    """A sink that records each gateway event on the span, then hands it to the caller's sink (if any)."""

    def record(event: dict[str, Any]) -> None:
        span.add_event(f"reactgraph.{event.get('event', 'gateway')}", _event_attributes(event))
        if event.get("event") == "breaker" and isinstance(event.get("state"), str):
            breaker_moved.append(event["state"])
        if sink is not None:
            sink(event)

    return record
