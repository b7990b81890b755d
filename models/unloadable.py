"""A model that could not be loaded (its spec or environment is unusable), standing in as a model whose every
call fails with that one line. Used where fallbacks are configured (Context.fallback_models): a model that cannot
be loaded then fails like one that cannot be reached, and the next fallback, or the node's own handling of a
failed call, takes over."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.outputs import ChatResult


class UnloadableModel(BaseChatModel):
    """Every call raises `error` (the loader's ModelConfigError)."""

    model_name: str  # the spec it was loaded from
    error: Exception

    @property
    def _llm_type(self) -> str:
        return "unloadable"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        raise self.error
