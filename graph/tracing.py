"""Switching OpenTelemetry tracing on for runs (the `otel` extra): run, node and model spans plus gateway spans.

Spans of the run, its nodes and its model calls come from our LangChain callback handler (`run_spans.RunSpans`,
GenAI semantic conventions), which every LangChain callback manager of the process picks up through
langchain-core's configure hook while tracing is on. Tool-call spans come from the gateway's own `ToolTracing`
step and switch (reactgraph.tools.telemetry). Importing this
module loads nothing else (the CLI reads `tracing_requested` before any agent machinery is loaded).
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Mapping
from typing import Any

from reactgraph.errors import ReactGraphError

DEFAULT_ENDPOINT = "http://localhost:4318/v1/traces"  # the OTLP/HTTP default of the OTel specification
ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
CONTENT_ENV = "REACTGRAPH_OTEL_CONTENT"
INSTALL_HINT = "tracing needs the otel extra: pip install 'react-graph[otel]'"

_lock = threading.Lock()
_state: dict[str, Any] = {}  # provider, handler, owned (we made the provider), while tracing is on


class _HandlerSwitch:
    """What langchain-core's configure hook reads for every callback manager: our handler while tracing is on.

    The hook is registered once per process (langchain-core has no way to unregister one) and only calls
    `.get()`; a process-wide switch, unlike a ContextVar, also reaches runs started on other threads.
    """

    handler: Any = None
    registered = False

    def get(self) -> Any:
        return self.handler


_switch = _HandlerSwitch()


class TracingUnavailable(ReactGraphError, RuntimeError):
    """OpenTelemetry (the `otel` extra) is not installed."""


def endpoint_from_env(env: Mapping[str, str] | None = None) -> str | None:
    """The OTLP/HTTP traces URL the standard variables ask for, or None when neither is set.

    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as given; OTEL_EXPORTER_OTLP_ENDPOINT is a base URL to which
    `/v1/traces` is appended, as the OTel specification says.
    """
    env = os.environ if env is None else env
    if traces := env.get(ENDPOINT_ENVS[0], "").strip():
        return traces
    if base := env.get(ENDPOINT_ENVS[1], "").strip():
        return base.rstrip("/") + "/v1/traces"
    return None


def tracing_requested(flag: bool = False, env: Mapping[str, str] | None = None) -> bool:
    """Whether a CLI run should trace: `--otel`, or an OTLP endpoint in the environment."""
    return flag or endpoint_from_env(env) is not None


def enable_tracing(endpoint: str | None = None, *, exporter: Any = None, provider: Any = None,
                   batch: bool = True, content: bool | None = None, timeout_s: float | None = None) -> Any:
    """Trace every graph run of this process from now on; returns the `TracerProvider`. Idempotent.

    Spans go to `exporter` (any `SpanExporter`, e.g. the SDK's `InMemorySpanExporter`) if given, else to an
    OTLP/HTTP exporter at `endpoint`, else at the standard environment variables' endpoint, else at
    http://localhost:4318/v1/traces. `provider`: use your own `TracerProvider` (its processors and
    exporters) instead. `batch=False` exports each span as it ends (SimpleSpanProcessor; tests, debugging).
    `content`: also record prompts and completions on model spans (default: off, or
    REACTGRAPH_OTEL_CONTENT=true) — they hold user data and secrets. `timeout_s`: how long the OTLP
    exporter tries one batch, retries included (default: OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT, else 10 s).
    A second call returns the provider already in use; `disable_tracing()` first to change the set-up.
    """
    with _lock:
        if _state:
            return _state["provider"]
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

            from reactgraph.graph.run_spans import RunSpans
        except ImportError as exc:
            raise TracingUnavailable(INSTALL_HINT) from exc
        if content is None:
            content = os.environ.get(CONTENT_ENV, "").strip().lower() in ("1", "true", "yes", "on")
        owned = provider is None
        if owned:
            provider = TracerProvider(resource=Resource.create(
                {"service.name": os.environ.get("OTEL_SERVICE_NAME") or "react-graph"}))
            if exporter is None:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

                exporter = OTLPSpanExporter(endpoint=endpoint or endpoint_from_env() or DEFAULT_ENDPOINT,
                                            timeout=timeout_s)
            provider.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
        from reactgraph.tools import telemetry as tool_tracing

        tracer = provider.get_tracer("reactgraph")
        _register_hook()
        _switch.handler = RunSpans(tracer, content=content)
        tool_tracing.set_tracer(tracer, _switch.handler.current_context)
        _state.update(provider=provider, handler=_switch.handler, owned=owned)
        return provider


def _register_hook() -> None:
    """Have every LangChain callback manager (every graph run, node and model call) include `_switch.get()`."""
    if _switch.registered:
        return
    from contextvars import ContextVar
    from typing import cast

    from langchain_core.tracers.context import register_configure_hook

    register_configure_hook(cast("ContextVar[Any]", _switch), inheritable=True)
    _switch.registered = True


def disable_tracing() -> None:
    """Stop tracing: no more spans from runs started after this; flush and shut down the provider we made
    (not one you gave)."""
    with _lock:
        if not _state:
            return
        from reactgraph.tools import telemetry as tool_tracing

        tool_tracing.set_tracer(None)
        _switch.handler = None
        if _state["owned"]:
            _state["provider"].shutdown()  # exports what the batch processor still holds
        _state.clear()


def current_span_context() -> Any:
    """The `SpanContext` of what the calling code runs in: the node or model call of a traced graph run, else
    the current OpenTelemetry span (invalid when there is none). For log records' trace and span ids."""
    from opentelemetry import trace

    handler = _switch.handler
    context = handler.current_context() if handler is not None else None
    return trace.get_current_span(context).get_span_context()


def flush(timeout_s: float = 5.0) -> bool:
    """Export the spans still queued (e.g. before a worker hands its process back); True if all went out in time."""
    provider = _state.get("provider")
    return bool(provider.force_flush(int(timeout_s * 1000))) if provider is not None else True


# A process that ends without disable_tracing() (a Python user's script) still exports its last spans.
atexit.register(disable_tracing)
