"""`load_memory`: keep the prompt bounded — fold messages older than the window into a running summary."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableLambda

from reactgraph.memory.session_memory import ConversationSummary, Fold, SessionMemory
from reactgraph.nodes.shared.context import current_context
from reactgraph.nodes.shared.services import AgentServices
from reactgraph.nodes.shared.state import AgentState


def _update(fold: Fold, summary: str) -> dict[str, Any]:
    return {"messages": fold.remove, "summary": summary}


def make_load_memory(services: AgentServices) -> RunnableLambda:
    """The load_memory node (sync and async); a no-op until the session outgrows its window."""

    def prepare(state: AgentState):
        context = current_context()
        fold = SessionMemory(keep_last=context.memory_window).fold(state["messages"], state.get("summary", ""))
        if fold is None:
            return None, None
        return fold, services.model(context).with_structured_output(ConversationSummary)

    def load_memory(state: AgentState) -> dict[str, Any]:
        fold, summarizer = prepare(state)
        if fold is None:
            return {}
        try:
            return _update(fold, summarizer.invoke(fold.prompt()).summary)
        except Exception:  # noqa: BLE001 - a failed summary must not lose the facts: fall back deterministically
            return _update(fold, fold.fallback())

    async def aload_memory(state: AgentState) -> dict[str, Any]:
        fold, summarizer = prepare(state)
        if fold is None:
            return {}
        try:
            return _update(fold, (await summarizer.ainvoke(fold.prompt())).summary)
        except Exception:  # noqa: BLE001
            return _update(fold, fold.fallback())

    return RunnableLambda(load_memory, aload_memory, name="load_memory")
