"""`load_memory`: keep the prompt bounded — fold messages older than the window into a running summary."""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from reactgraph.memory.session_memory import ConversationSummary, SessionMemory
from reactgraph.nodes.conversation.question import turn_question
from reactgraph.nodes.runtime.fallback_log import log_fallback
from reactgraph.nodes.runtime.node_driver import Call, Node, Steps, dual_node
from reactgraph.nodes.runtime.services import AgentServices
from reactgraph.nodes.state.agent import AgentState
from reactgraph.nodes.state.context import Context
from reactgraph.nodes.state.fields import summary_of


def make_load_memory(services: AgentServices) -> Node:
    """The load_memory node; a no-op until the session outgrows its window."""

    def load_memory(state: AgentState, runtime: Runtime[Context], config: RunnableConfig) -> Steps:
        # The first node of ReAct and Plan-and-Solve: an empty question (a bare invoke, Studio) is refused here,
        # before the summary's or any other model call.
        turn_question(state["messages"])
        fold = SessionMemory(keep_last=runtime.context.memory_window).fold(state["messages"],
                                                                           summary_of(state))
        if fold is None:
            return {}
        try:
            output = yield from Call(services.structured(runtime.context, ConversationSummary), fold.prompt())
            parsed = output.get("parsed")
            if isinstance(parsed, ConversationSummary):
                summary = parsed.summary
            else:
                log_fallback("load_memory", "summary_rules", output.get("parsing_error") or "no structured output")
                summary = fold.fallback()
        except Exception as exc:  # noqa: BLE001 - a failed summary must not lose the facts: fall back deterministically
            log_fallback("load_memory", "summary_rules", exc)
            summary = fold.fallback()
        return {"messages": fold.remove, "summary": summary}

    return dual_node(load_memory, name="load_memory", retry=services.retry)
