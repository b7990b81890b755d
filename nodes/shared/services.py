"""What the nodes of one compiled graph share: the tool gateway and the chat models they resolve."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig

from reactgraph.nodes.shared.context import Context
from reactgraph.models.loader import load_chat_model
from reactgraph.tools import ToolGateway, ToolSession


class AgentServices:
    """The gateway plus a model per (spec, temperature), built once per graph and reused across runs."""

    def __init__(self, gateway: ToolGateway, model: BaseChatModel | None = None) -> None:
        self.gateway = gateway
        # An explicit model (tests' scripted models, a user's configured client) overrides Context.model.
        self.fixed_model = model
        self._models: dict[tuple[str, float], BaseChatModel] = {}

    def model(self, context: Context) -> BaseChatModel:
        if self.fixed_model is not None:
            return self.fixed_model
        key = (context.model, context.temperature)
        if key not in self._models:
            self._models[key] = load_chat_model(*key)
        return self._models[key]

    def model_name(self, context: Context) -> str:
        model = self.model(context)
        return getattr(model, "model_name", None) or getattr(model, "model", None) or type(model).__name__

    @staticmethod
    def session(context: Context, config: RunnableConfig | None) -> ToolSession:
        thread_id = ((config or {}).get("configurable") or {}).get("thread_id") or "default"
        return ToolSession.of(id=str(thread_id), allow=context.allowed_tools or None, deny=context.denied_tools)

    def schemas(self, context: Context, config: RunnableConfig | None) -> list[dict[str, Any]]:
        return self.gateway.schemas(self.session(context, config))
