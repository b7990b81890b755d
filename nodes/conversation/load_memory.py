"""`load_memory`: the first node of ReAct and Plan-and-Solve — begin the question's turn, and keep the prompt bounded
by folding messages older than the window into a running summary (a model call the turn counts)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from reactgraph.memory.session_memory import ConversationSummary, SessionMemory
from reactgraph.models.gateway import ModelCall
from reactgraph.nodes.conversation.question import turn_question
from reactgraph.nodes.runtime.fallback_log import log_fallback
from reactgraph.nodes.runtime.node_driver import Node, Steps, dual_node
from reactgraph.nodes.runtime.services import AgentServices
from reactgraph.nodes.state.agent import AgentState, begin_turn, in_turn
from reactgraph.nodes.state.context import Context
from reactgraph.nodes.state.fields import summary_of

TurnStart = Callable[[Mapping[str, Any]], dict[str, Any]]


def react_turn(state: Mapping[str, Any]) -> dict[str, Any]:
    """ReAct's turn start: afresh for a new question; nothing when the run re-enters the question's turn."""
    return {} if in_turn(state) else begin_turn(state)


def make_load_memory(services: AgentServices, start: TurnStart = react_turn) -> Node:
    """The load_memory node: `start` begins the turn (its per-turn fields, `usage` included, afresh), then the
    summary, once the session outgrows its window."""

    def load_memory(state: AgentState, runtime: Runtime[Context], config: RunnableConfig) -> Steps:
        # The first node: an empty question (a bare invoke, Studio) is refused here, before any model call.
        turn_question(state["messages"])
        turn = start(state)
        fold = SessionMemory(keep_last=runtime.context.memory_window).fold(state["messages"],
                                                                           summary_of(state))
        if fold is None:
            return turn
        try:
            reply = yield from ModelCall("summarize", fold.prompt(), schema=ConversationSummary)
            if isinstance(reply.parsed, ConversationSummary):
                summary = reply.parsed.summary
            else:
                log_fallback("load_memory", "summary_rules", reply.parsing_error or "no structured output")
                summary = fold.fallback()
        except Exception as exc:  # noqa: BLE001 - a failed summary must not lose the facts: fall back deterministically
            log_fallback("load_memory", "summary_rules", exc)
            summary = fold.fallback()
        return {**turn, "messages": fold.remove, "summary": summary}

    return dual_node(load_memory, name="load_memory", models=services.models)
