"""Switching OpenTelemetry tracing on for runs (the `otel` extra): LangChain instrumentation plus gateway spans.

Spans of the run, its nodes and its model calls come from traceloop's `opentelemetry-instrumentation-langchain`
(GenAI semantic conventions; it makes each node span the current OTel span, so our gateway's tool spans and
the `traceparent` of outgoing requests nest under the node that made the call). Tool-call spans come from
the gateway's own `ToolTracing` step (reactgraph.tools.tracing). Importing this module loads nothing else
(the CLI reads `tracing_requested` before any agent machinery is loaded).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import weakref
from collections.abc import Mapping
from typing import Any

DEFAULT_ENDPOINT = "http://localhost:4318/v1/traces"  # the OTLP/HTTP default of the OTel specification
ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
CONTENT_ENV = "REACTGRAPH_OTEL_CONTENT"
TRACELOOP_CONTENT_ENV = "TRACELOOP_TRACE_CONTENT"
INSTALL_HINT = "tracing needs the otel extra: pip install 'react-graph[otel]'"

_lock = threading.Lock()
_state: dict[str, Any] = {}  # provider, instrumentor, owned (we made the provider), while tracing is on
# Each compiled graph's (nodes, edges) for the root span, kept across disable/enable (see _cache_graph_structure).
_drawn: weakref.WeakKeyDictionary[Any, tuple[list[str], list[str]]] = weakref.WeakKeyDictionary()


class TracingUnavailable(RuntimeError):
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
    `content`: also record prompts, completions and tool-call arguments on model spans (default: off, or
    REACTGRAPH_OTEL_CONTENT=true) — they hold user data and secrets. `timeout_s`: how long the OTLP
    exporter tries one batch, retries included (default: OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT, else 10 s).
    A second call returns the provider already in use; `disable_tracing()` first to change the set-up.
    """
    with _lock:
        if _state:
            return _state["provider"]
        try:
            from opentelemetry.instrumentation.langchain import LangchainInstrumentor
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        except ImportError as exc:
            raise TracingUnavailable(INSTALL_HINT) from exc
        if content is None:
            content = os.environ.get(CONTENT_ENV, "").strip().lower() in ("1", "true", "yes", "on")
        # The instrumentation reads this variable on every model call; ours decides (default: no content).
        content_before = os.environ.get(TRACELOOP_CONTENT_ENV)
        os.environ[TRACELOOP_CONTENT_ENV] = "true" if content else "false"
        owned = provider is None
        if owned:
            provider = TracerProvider(resource=Resource.create(
                {"service.name": os.environ.get("OTEL_SERVICE_NAME") or "react-graph"}))
            if exporter is None:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

                exporter = OTLPSpanExporter(endpoint=endpoint or endpoint_from_env() or DEFAULT_ENDPOINT,
                                            timeout=timeout_s)
            provider.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
        from reactgraph.tools import tracing as tool_tracing

        # The instrumentation also puts `traceparent` on OpenAI clients' requests; the same switch covers it.
        instrumentor = LangchainInstrumentor(disable_trace_context_propagation=not tool_tracing.propagation_allowed())
        wrapped = _instrument(instrumentor, provider)
        tool_tracing.set_tracer(provider.get_tracer("reactgraph"))
        _state.update(provider=provider, instrumentor=instrumentor, owned=owned, wrapped=wrapped,
                      content_before=content_before)
        return provider


def _instrument(instrumentor: Any, provider: Any) -> list[tuple[str, str]]:
    """Instrument LangChain and LangGraph, noting each function the instrumentation wraps (see `_unwrap`)."""
    import opentelemetry.instrumentation.langchain as module

    wrapped: list[tuple[str, str]] = []
    original = module.wrap_function_wrapper

    def recording(target: Any, name: str, wrapper: Any) -> Any:
        wrapped.append((target, name))
        if (handler := getattr(wrapper, "_callback_handler", None)) is not None:
            _only_graph_node_and_model_spans(handler)
        return original(target, name, wrapper)

    module.wrap_function_wrapper = recording
    try:
        instrumentor.instrument(tracer_provider=provider)
    finally:
        module.wrap_function_wrapper = original
    _cache_graph_structure()
    return wrapped


def _only_graph_node_and_model_spans(handler: Any) -> None:
    """No spans for the runnables inside a node (a structured-output chain's sequence, parallel, parsers and
    fallbacks: ten spans per `reflect`, half of a run's spans and of tracing's cost). The graph, its nodes,
    subgraph nodes and every model call keep theirs; a model call inside such a chain becomes a child of its
    node (the nearest ancestor that has a span)."""
    skipped: dict[Any, Any] = {}  # run id of a chain without a span -> the nearest ancestor run with one

    def kept(parent_run_id: Any) -> Any:
        return skipped.get(parent_run_id, parent_run_id)

    def starting(method: Any) -> Any:
        def start(*args: Any, run_id: Any, parent_run_id: Any = None, **kwargs: Any) -> Any:
            return method(*args, run_id=run_id, parent_run_id=kept(parent_run_id), **kwargs)
        return start

    def ending(method: Any) -> Any:
        def end(*args: Any, run_id: Any, **kwargs: Any) -> Any:
            if run_id in skipped:
                del skipped[run_id]
                return None
            return method(*args, run_id=run_id, **kwargs)
        return end

    chain_start = handler.on_chain_start

    def on_chain_start(serialized: Any, inputs: Any, *, run_id: Any, parent_run_id: Any = None,
                       metadata: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        node = (metadata or {}).get("langgraph_node")
        if parent_run_id is not None and node is not None and handler._get_name_from_callback(
                serialized, **kwargs) != node:
            skipped[run_id] = kept(parent_run_id)
            return None
        return chain_start(serialized, inputs, run_id=run_id, parent_run_id=kept(parent_run_id), metadata=metadata,
                           **kwargs)

    handler.on_chain_start = on_chain_start
    handler.on_chain_end = ending(handler.on_chain_end)
    handler.on_chain_error = ending(handler.on_chain_error)
    for name in ("on_chat_model_start", "on_llm_start", "on_tool_start", "on_retriever_start"):
        setattr(handler, name, starting(getattr(handler, name)))


def _cache_graph_structure() -> None:
    """The instrumentation draws the whole graph (nodes, edges) on every run for the root span's attributes:
    about a tenth of an offline run. A compiled graph never changes, so it is drawn once per graph."""
    from opentelemetry.instrumentation.langchain import langgraph_utils

    extract = getattr(langgraph_utils.extract_graph_structure, "__wrapped__", langgraph_utils.extract_graph_structure)
    drawn = _drawn

    def cached(graph_instance: Any) -> tuple[list[str], list[str]]:
        try:
            return drawn[graph_instance]
        except (KeyError, TypeError):  # TypeError: an object that takes no weak reference, drawn every time
            structure = extract(graph_instance)
            with contextlib.suppress(TypeError):
                drawn[graph_instance] = structure
            return structure

    cached.__wrapped__ = extract  # type: ignore[attr-defined]
    langgraph_utils.extract_graph_structure = cached


def _unwrap(wrapped: list[tuple[str, str]]) -> None:
    """Undo the instrumentation's wrappers. Its own `uninstrument` (0.62) leaves them in place (it passes
    dotted class paths that `opentelemetry.instrumentation.utils.unwrap` cannot resolve), and a wrapper
    left behind keeps adding its callback handler, and spans for a shut-down provider, to every later run."""
    import wrapt

    for target, name in reversed(wrapped):
        try:
            parent, attribute, current = wrapt.resolve_path(target, name)
        except (ImportError, AttributeError):
            continue
        if isinstance(current, wrapt.FunctionWrapper):
            setattr(parent, attribute, current.__wrapped__)
    from opentelemetry.instrumentation.langchain import langgraph_utils

    extract = langgraph_utils.extract_graph_structure
    langgraph_utils.extract_graph_structure = getattr(extract, "__wrapped__", extract)


def disable_tracing() -> None:
    """Stop tracing: remove the instrumentation, flush and shut down the provider we made (not one you gave)."""
    with _lock:
        if not _state:
            return
        from reactgraph.tools import tracing as tool_tracing

        tool_tracing.set_tracer(None)
        _state["instrumentor"].uninstrument()
        _unwrap(_state["wrapped"])
        if _state["owned"]:
            _state["provider"].shutdown()  # exports what the batch processor still holds
        if _state["content_before"] is None:
            os.environ.pop(TRACELOOP_CONTENT_ENV, None)
        else:
            os.environ[TRACELOOP_CONTENT_ENV] = _state["content_before"]
        _state.clear()


def flush(timeout_s: float = 5.0) -> bool:
    """Export the spans still queued (e.g. before a worker hands its process back); True if all went out in time."""
    provider = _state.get("provider")
    return bool(provider.force_flush(int(timeout_s * 1000))) if provider is not None else True


# A process that ends without disable_tracing() (a Python user's script) still exports its last spans.
atexit.register(disable_tracing)
