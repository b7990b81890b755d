"""OpenTelemetry spans for tool calls, and W3C trace headers for outgoing requests; free while tracing is off.

This module never imports opentelemetry itself: `reactgraph.graph.tracing.enable_tracing` (the `otel` extra)
hands it a tracer. Until then the pipeline step below is one global read per call, and `trace_headers()`
returns `{}`, so a default install (no opentelemetry) pays nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from reactgraph.tools.policies.base import CallContext, Handler
from reactgraph.tools.policies.observability.events import EventSink
from reactgraph.tools.policies.observability.telemetry import args_digest
from reactgraph.tools.result import ToolResult, ToolStatus

PROPAGATE_ENV = "REACTGRAPH_OTEL_PROPAGATE"
_FALSE = {"0", "false", "no", "off"}

_tracer: Any = None  # an opentelemetry Tracer while tracing is on
_run_context: Callable[[], Any] | None = None  # the OTel context of the graph node the caller runs in, if any


def set_tracer(tracer: Any, run_context: Callable[[], Any] | None = None) -> None:
    """Turn gateway spans on (an OpenTelemetry `Tracer`) or off (None); called by enable/disable_tracing.

    `run_context()`: the context of the node (or model call) that the calling code runs in, or None; a tool
    span is its child. Outside a graph run (or without it), the current OpenTelemetry span is the parent.
    """
    global _tracer, _run_context
    _tracer, _run_context = tracer, run_context


def tracing_on() -> bool:
    return _tracer is not None


def propagation_allowed() -> bool:
    """Whether REACTGRAPH_OTEL_PROPAGATE lets trace context go out on requests (default: yes)."""
    return os.environ.get(PROPAGATE_ENV, "").strip().lower() not in _FALSE


def propagation_on() -> bool:
    """Whether trace context goes out on HTTP (and MCP) requests: tracing is on and not switched off."""
    return _tracer is not None and propagation_allowed()


def trace_headers() -> dict[str, str]:
    """W3C `traceparent` / `tracestate` headers of the current span, to add to an outgoing request.

    `{}` when tracing is off or REACTGRAPH_OTEL_PROPAGATE=false. For every client of remote services that we
    trust with our trace ids (allow-listed `http_get` hosts, MCP servers).
    """
    if not propagation_on():
        return {}
    from opentelemetry.propagate import inject

    headers: dict[str, str] = {}
    inject(headers)
    return headers


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
        tracer = _tracer
        if tracer is None:
            return await proceed(call)
        parent = _run_context() if _run_context is not None else None
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
