"""What the nodes of one compiled graph share: the tool gateway and the model gateway (whose retry policy is the
model-calling nodes'), and the tool schemas derived from them once rather than on every step."""

from __future__ import annotations

import warnings
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.types import RetryPolicy

from reactgraph.models.gateway import ModelGateway
from reactgraph.nodes.context import Context, UnknownToolNames, unknown_tool_names
from reactgraph.tools import ToolGateway, ToolMeta, ToolSession


class AgentServices:
    """The tool gateway and the model gateway, built once per graph and reused across runs."""

    def __init__(self, gateway: ToolGateway, model: BaseChatModel | None = None,
                 retry: RetryPolicy | None = None) -> None:
        self.gateway = gateway
        # An explicit model (tests' scripted models, a user's configured client) overrides Context.model.
        self.models = ModelGateway(model, retry)
        # Keyed by object ids; the objects are kept alongside, so an id is never reused while it is a key.
        self._schemas: dict[int, tuple[ToolMeta, dict[str, Any]]] = {}

    @property
    def retry(self) -> RetryPolicy:
        """The model-calling nodes' retry policy (the model gateway's)."""
        return self.models.retry

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
