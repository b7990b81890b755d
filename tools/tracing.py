"""The tool gateway's tracing switch, and W3C trace headers for outgoing requests; free while tracing is off.

This module never imports opentelemetry itself: `reactgraph.graph.tracing.enable_tracing` (the `otel` extra)
hands it a tracer. Until then the gateway's tracing step (`reactgraph.tools.telemetry`) is
one function call per tool call, and `trace_headers()` returns `{}`, so a default install (no opentelemetry)
pays nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

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


def active_tracer() -> Any:
    """The OpenTelemetry `Tracer` while tracing is on, else None."""
    return _tracer


def parent_context() -> Any:
    """The OpenTelemetry context of the graph node the caller runs in (a tool span's parent), or None: then the
    current span is the parent."""
    return _run_context() if _run_context is not None else None


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
