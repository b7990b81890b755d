"""What the nodes of one compiled graph share: the tool gateway, the chat models they resolve, the retry policy
of the nodes that call a model, and what is derived from those once rather than on every step."""

from __future__ import annotations

import warnings
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.constants import TAG_NOSTREAM
from langgraph.types import RetryPolicy

from reactgraph.models.loader import ModelConfigError, load_chat_model, structured_runnable
from reactgraph.models.response_format import ResponseFormat
from reactgraph.models.unloadable import UnloadableModel
from reactgraph.nodes.runtime.model_retry import model_retry_policy
from reactgraph.nodes.state.context import Context, FallbackContext, UnknownToolNames, unknown_tool_names
from reactgraph.tools import ToolGateway, ToolMeta, ToolSession

STRUCTURED_SHARE = 2  # plans, reflections, lessons and summaries: at most half a reply's tokens


class AgentServices:
    """The gateway plus a model per (spec, temperature), built once per graph and reused across runs."""

    def __init__(self, gateway: ToolGateway, model: BaseChatModel | None = None,
                 retry: RetryPolicy | None = None) -> None:
        self.gateway = gateway
        # An explicit model (tests' scripted models, a user's configured client) overrides Context.model.
        self.fixed_model = model
        self.retry = retry if retry is not None else model_retry_policy()
        self._models: dict[tuple[str, float], BaseChatModel] = {}
        # Keyed by object ids; the objects are kept alongside, so an id is never reused while it is a key.
        self._schemas: dict[int, tuple[ToolMeta, dict[str, Any]]] = {}
        self._derived: dict[tuple[Any, ...], tuple[Any, Runnable]] = {}

    def _loaded(self, context: Context) -> BaseChatModel:
        if self.fixed_model is not None and not isinstance(context, FallbackContext):
            return self.fixed_model
        key = (context.model, context.temperature)
        if key not in self._models:
            try:
                self._models[key] = load_chat_model(*key)
            except ModelConfigError as exc:
                if not (context.fallback_models or isinstance(context, FallbackContext)):
                    raise
                # With fallbacks, a model that cannot be loaded fails its calls, as one that cannot be reached
                # does: the next fallback is tried (nodes/runtime/model_fallback.py).
                return UnloadableModel(model_name=context.model, error=exc)
        return self._models[key]

    def _bounded(self, context: Context, limit: int) -> BaseChatModel:
        """The model with replies of at most `limit` tokens (`max_tokens` on every request). A model without that
        setting (a test's scripted model) is used as it is."""
        model = self._loaded(context)
        if "max_tokens" not in type(model).model_fields:
            return model
        bounded = self._derive(("bounded", id(model), limit), model,
                               lambda: model.model_copy(update={"max_tokens": limit}))
        return cast(BaseChatModel, bounded)

    def model(self, context: Context) -> BaseChatModel:
        """The run's model, its replies bounded by `Context.max_output_tokens`."""
        return self._bounded(context, context.max_output_tokens)

    def model_name(self, context: Context) -> str:
        model = self.model(context)
        return getattr(model, "model_name", None) or getattr(model, "model", None) or type(model).__name__

    def session(self, context: Context, config: RunnableConfig | None) -> ToolSession:
        """The run's gateway session; a Context naming an MCP config file adds its servers' tools (once per file
        per gateway: the first run waits for them to start) and lets this session see them."""
        thread_id = ((config or {}).get("configurable") or {}).get("thread_id") or "default"
        scopes = (self.gateway.mcp_config_scope(context.mcp_config.strip()),) if context.mcp_config.strip() else ()
        return ToolSession.of(id=str(thread_id), allow=context.allowed_tools or None, deny=context.denied_tools,
                              approval=context.approval, mcp_scopes=scopes)

    def schemas(self, context: Context, config: RunnableConfig | None) -> list[dict[str, Any]]:
        """The OpenAI schemas of the tools this run may use (each tool's schema is built once)."""
        session = self.session(context, config)  # first: it may add the tools of the Context's MCP config
        # A warning, not an error: one Context may serve graphs whose gateways hold different tools, and an
        # unknown name fails closed (allow: fewer tools; deny: nothing more denied). Shown once per message.
        if (context.allowed_tools or context.denied_tools or context.approval) and (
                problem := unknown_tool_names(context, self.gateway.registry)):
            warnings.warn(problem, UnknownToolNames, stacklevel=2)
        return [self._schema(meta) for meta in self.gateway.tools(session)]

    def _schema(self, meta: ToolMeta) -> dict[str, Any]:
        cached = self._schemas.get(id(meta))
        if cached is None or cached[0] is not meta:
            cached = self._schemas[id(meta)] = (meta, meta.openai_schema())
        return cached[1]

    def _derive(self, key: tuple[Any, ...], keep: Any, build: Any) -> Runnable:
        cached = self._derived.get(key)
        if cached is None:
            cached = self._derived[key] = (keep, build())
        return cached[1]

    def with_tools(self, context: Context, schemas: list[dict[str, Any]]) -> Runnable:
        """The model with these tools bound (the model itself when there are none)."""
        model = self.model(context)
        if not schemas:
            return model
        return self._derive(("tools", id(model), *map(id, schemas)), (model, schemas),
                            lambda: model.bind_tools(schemas))

    def structured(self, context: Context, schema: type) -> Runnable:
        """The model's structured output as `schema`, raw reply included (`{"raw", "parsed", "parsing_error"}`).
        Plans, reflections, lessons and summaries are short: their replies get a share of max_output_tokens. In
        the text protocol the model is asked for JSON in its text (it may offer no tool calling or JSON schema)."""
        model = self._bounded(context, max(16, context.max_output_tokens // STRUCTURED_SHARE))
        plain = context.protocol == "text"
        return self._derive(("structured", id(model), schema, plain), model,
                            lambda: structured_runnable(_unstreamed(model), schema, plain_json=plain)
                            .with_config(tags=[TAG_NOSTREAM]))  # nor is the whole reply a `messages` event


    def structured_response(self, context: Context, response_format: ResponseFormat) -> Runnable:
        """The model's structured output in a caller's `response_format` (raw reply included), unstreamed; a
        whole reply's tokens, as the answer it restates had. The text protocol with the automatic strategy asks
        for JSON in the text, as for the project's own structured calls."""
        model = self.model(context)
        plain = context.protocol == "text" and response_format.strategy == "auto"
        return self._derive(("response", id(model), id(response_format), plain), (model, response_format),
                            lambda: (structured_runnable(_unstreamed(model), response_format.json_schema,
                                                         plain_json=True) if plain
                                     else response_format.runnable(_unstreamed(model)))
                            .with_config(tags=[TAG_NOSTREAM]))


def _unstreamed(model: BaseChatModel) -> BaseChatModel:
    """The model with token streaming off, for structured output: its tokens are JSON, not text to show, and
    langchain-openai's streamed structured path (`beta.chat.completions.stream`) model_dump()s each event, which
    makes pydantic warn on stderr (PydanticSerializationUnexpectedValue, field `parsed`). Unstreamed, the
    reply is parsed once, warning-free, and the verdict is shown as its note (reactgraph/cli/console_view.py)."""
    return model.model_copy(update={"disable_streaming": True}) if isinstance(model, BaseChatModel) else model
