"""OpenTelemetry spans of graph runs, their nodes and their model calls: a lean LangChain callback handler.

One `invoke_agent GRAPH` span per run (the root), one `execute_task NODE` span per node run, one `chat MODEL`
span per model call; the runnables inside a node (a structured-output chain's sequence, parsers, fallbacks)
get none, and a model call among them is a child of its node. Attributes follow the OTel GenAI semantic
conventions. Loaded only by `enable_tracing` (needs the `otel` extra).

Spans are parented along LangChain's run tree, and no callback changes the current OpenTelemetry context:
LangChain reports an async run's end from a copy of the context its start ran in (a shielded task), so a
context attached at the start could not be detached there and would stay current in the caller, making the
caller's next run a child of this one. Code inside a node asks `current_context()` instead, which finds the
node (or model call) it runs in from LangChain's run config; the gateway's tool spans and the `traceparent`
of their requests use it.
"""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import LLMResult
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.errors import GraphBubbleUp
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer, get_current_span, set_span_in_context

from reactgraph.models.gateway import FALLBACK_EVENT

# Provider finish reasons -> the GenAI conventions' values (stop, length, content_filter, tool_call, error).
FINISH_REASONS = {"tool_calls": "tool_call", "function_call": "tool_call", "tool_use": "tool_call",
                  "end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}
MAX_CONTENT_CHARS = 16_000  # per message when content is recorded: a long document must not make a huge span


class _Open:
    """A span this handler started, its context (for children and for `current_context`), and its run's root."""

    __slots__ = ("context", "root", "span")

    def __init__(self, span: Any, root: UUID) -> None:
        self.span, self.context, self.root = span, set_span_in_context(span), root


class RunSpans(BaseCallbackHandler):
    """Spans for LangGraph runs, nodes and model calls; one handler serves every run of the process.

    `content=True` also records prompts and completions (`gen_ai.input.messages` / `gen_ai.output.messages`).
    """

    run_inline = True  # called in order on the run's own thread, not handed to an executor

    def __init__(self, tracer: Tracer, *, content: bool = False) -> None:
        super().__init__()
        self.tracer = tracer
        self.content = content
        self.open: dict[UUID, _Open] = {}
        self.skipped: dict[UUID, UUID | None] = {}  # a run without a span -> its nearest ancestor with one

    def current_context(self) -> Context | None:
        """The context of the innermost node or model call the calling code runs in; None outside a run, or
        when the current OpenTelemetry span is closer (use that)."""
        config = var_child_runnable_config.get()
        run_id = self._kept(getattr((config or {}).get("callbacks"), "parent_run_id", None))
        opened = self.open.get(run_id) if run_id is not None else None
        if opened is None:
            return None
        # A span started inside the node and current now (a tool call's, the node's own code's) is closer.
        current = get_current_span()
        started = getattr(current, "start_time", None)
        if isinstance(started, int) and started >= opened.span.start_time and current.get_span_context().is_valid:
            return None
        return opened.context

    # -- chains: the graph run and its nodes ------------------------------------------------------------------
    def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *, run_id: UUID,
                       parent_run_id: UUID | None = None, metadata: dict[str, Any] | None = None,
                       **kwargs: Any) -> None:
        parent = self._kept(parent_run_id)
        name = kwargs.get("name") or _serialized_name(serialized)
        metadata = metadata or {}
        if parent is None:
            attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
            if isinstance(thread := metadata.get("thread_id"), str):
                attributes["gen_ai.conversation.id"] = thread
            self._start(run_id, None, f"invoke_agent {name}", attributes, SpanKind.INTERNAL)
        elif metadata.get("langgraph_node") == name:
            attributes = {"gen_ai.operation.name": "execute_task", "gen_ai.task.name": name}
            if isinstance(step := metadata.get("langgraph_step"), int):
                attributes["langgraph.step"] = step
            self._start(run_id, parent, f"execute_task {name}", attributes, SpanKind.INTERNAL)
        else:
            self.skipped[run_id] = parent

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, error)

    # -- model calls ------------------------------------------------------------------------------------------
    def on_chat_model_start(self, serialized: dict[str, Any] | None, messages: list[list[BaseMessage]], *,
                            run_id: UUID, parent_run_id: UUID | None = None,
                            metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._start_model(run_id, parent_run_id, metadata or {}, kwargs.get("invocation_params") or {},
                          messages[0] if messages else [], "chat")

    def on_llm_start(self, serialized: dict[str, Any] | None, prompts: list[str], *, run_id: UUID,
                     parent_run_id: UUID | None = None, metadata: dict[str, Any] | None = None,
                     **kwargs: Any) -> None:
        self._start_model(run_id, parent_run_id, metadata or {}, kwargs.get("invocation_params") or {},
                          prompts, "text_completion")

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        if (opened := self.open.get(run_id)) is not None:
            opened.span.set_attributes(_response_attributes(response, self.content))
        self._end(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, error)

    # -- a model fallback (models/gateway.py): an event on the node's span, naming both models --------------
    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        kept = self._kept(run_id) if name == FALLBACK_EVENT and isinstance(data, dict) else None
        if kept is not None and (opened := self.open.get(kept)) is not None:
            opened.span.add_event(FALLBACK_EVENT, {
                f"reactgraph.{key}": str(data.get(key, ""))[:300] for key in ("failed", "model", "error")})
            opened.span.set_attribute("reactgraph.fallback_model", str(data.get("model", ""))[:200])

    # -- tools and retrievers: the gateway traces tool calls; these runs only pass their parent on --------------
    def on_tool_start(self, serialized: Any, input_str: Any, *, run_id: UUID, parent_run_id: UUID | None = None,
                      **kwargs: Any) -> None:
        self.skipped[run_id] = self._kept(parent_run_id)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.skipped.pop(run_id, None)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.skipped.pop(run_id, None)

    def on_retriever_start(self, serialized: Any, query: str, *, run_id: UUID, parent_run_id: UUID | None = None,
                           **kwargs: Any) -> None:
        self.skipped[run_id] = self._kept(parent_run_id)

    def on_retriever_end(self, documents: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.skipped.pop(run_id, None)

    on_retriever_error = on_tool_error

    # -- the span bookkeeping ---------------------------------------------------------------------------------
    def _kept(self, parent_run_id: UUID | None) -> UUID | None:
        """The nearest ancestor run that has a span (None: this run is a root)."""
        if parent_run_id is None or parent_run_id in self.open:
            return parent_run_id
        return self.skipped.get(parent_run_id)

    def _start_model(self, run_id: UUID, parent_run_id: UUID | None, metadata: dict[str, Any],
                     params: dict[str, Any], messages: list[Any], operation: str) -> None:
        model = params.get("model") or params.get("model_name") or metadata.get("ls_model_name") or "unknown"
        attributes: dict[str, Any] = {"gen_ai.operation.name": operation, "gen_ai.request.model": str(model)}
        if isinstance(provider := metadata.get("ls_provider"), str):
            attributes["gen_ai.provider.name"] = provider
        if isinstance(purpose := metadata.get("reactgraph_purpose"), str):  # the gateway's ModelCall.purpose
            attributes["reactgraph.model.purpose"] = purpose
        for key, source in (("gen_ai.request.temperature", "temperature"), ("gen_ai.request.max_tokens", "max_tokens")):
            if isinstance(value := params.get(source, metadata.get(f"ls_{source}")), (int, float)):
                attributes[key] = value
        if self.content:
            attributes["gen_ai.input.messages"] = json.dumps([_message(m) for m in messages], ensure_ascii=False)
        self._start(run_id, self._kept(parent_run_id), f"{operation} {model}", attributes, SpanKind.CLIENT)

    def _start(self, run_id: UUID, parent: UUID | None, name: str, attributes: dict[str, Any],
               kind: SpanKind) -> None:
        # A root continues the caller's current span (a server's request span, a test's); others, their parent's.
        parent_open = self.open.get(parent) if parent is not None else None
        span = self.tracer.start_span(name, context=parent_open.context if parent_open else None, kind=kind,
                                      attributes=attributes)
        self.open[run_id] = _Open(span, parent_open.root if parent_open else run_id)

    def _end(self, run_id: UUID, error: BaseException | None = None) -> None:
        opened = self.open.pop(run_id, None)
        if opened is None:
            self.skipped.pop(run_id, None)
            return
        if error is not None and not isinstance(error, GraphBubbleUp):  # an interrupt or a Command is no failure
            opened.span.set_attribute("error.type", type(error).__qualname__)
            opened.span.set_status(Status(StatusCode.ERROR, str(error)[:300]))
        opened.span.end()
        if opened.root == run_id:
            self._forget(run_id)

    def _forget(self, root: UUID) -> None:
        """A run's end ends every span of it still open (a stream abandoned half-way reports no node ends)."""
        for run_id in [r for r, o in self.open.items() if o.root == root]:
            self.open.pop(run_id).span.end()
        if not self.open:
            self.skipped.clear()


def _serialized_name(serialized: dict[str, Any] | None) -> str:
    if not serialized:
        return "unknown"
    if name := (serialized.get("kwargs") or {}).get("name") or serialized.get("name"):
        return str(name)
    ids = serialized.get("id")
    return str(ids[-1]) if isinstance(ids, list) and ids else "unknown"


def _response_attributes(response: LLMResult, content: bool) -> dict[str, Any]:
    """Model, token counts and finish reasons of a model call (and its completions when content is on)."""
    generations = [g for batch in response.generations for g in batch]
    messages = [m for g in generations if isinstance(m := getattr(g, "message", None), BaseMessage)]
    attributes: dict[str, Any] = {}
    output = response.llm_output or {}
    model = output.get("model_name") or output.get("model_id") or next(
        (m.response_metadata.get("model_name") for m in messages if m.response_metadata.get("model_name")), None)
    if isinstance(model, str):
        attributes["gen_ai.response.model"] = model
    usage = next((u for m in messages if (u := getattr(m, "usage_metadata", None))), None)
    if usage:
        attributes["gen_ai.usage.input_tokens"] = int(usage.get("input_tokens", 0))
        attributes["gen_ai.usage.output_tokens"] = int(usage.get("output_tokens", 0))
    elif isinstance(tokens := output.get("token_usage") or output.get("usage"), dict):
        attributes["gen_ai.usage.input_tokens"] = int(tokens.get("prompt_tokens") or tokens.get("input_tokens") or 0)
        attributes["gen_ai.usage.output_tokens"] = int(tokens.get("completion_tokens")
                                                       or tokens.get("output_tokens") or 0)
    reasons = [str(r) for g in generations
               if (r := (g.generation_info or {}).get("finish_reason")
                   or (g.message.response_metadata.get("finish_reason") if hasattr(g, "message") else None))]
    if reasons:
        attributes["gen_ai.response.finish_reasons"] = [FINISH_REASONS.get(r, r) for r in reasons]
    if content:
        attributes["gen_ai.output.messages"] = json.dumps(
            [_message(m) for m in messages] or [_message(g.text) for g in generations], ensure_ascii=False)
    return attributes


def _message(message: Any) -> dict[str, Any]:
    """A message as the GenAI conventions write it: role and parts (text cut to MAX_CONTENT_CHARS)."""
    if isinstance(message, str):
        return {"role": "user", "parts": [{"type": "text", "content": message[:MAX_CONTENT_CHARS]}]}
    role = {"human": "user", "ai": "assistant"}.get(message.type, message.type)
    parts: list[dict[str, Any]] = []
    if text := message.text:
        parts.append({"type": "text", "content": text[:MAX_CONTENT_CHARS]})
    for call in getattr(message, "tool_calls", None) or []:
        parts.append({"type": "tool_call", "id": call.get("id"), "name": call.get("name"),
                      "arguments": call.get("args")})
    if role == "tool":
        parts = [{"type": "tool_call_response", "id": getattr(message, "tool_call_id", None),
                  "response": text[:MAX_CONTENT_CHARS]}]
    return {"role": role, "parts": parts}
