"""The session's memory around a turn: the nodes that open and close it.

`load_memory`, the first node of ReAct and Plan-and-Solve, begins the question's turn and keeps the prompt
bounded by folding messages older than the window into a running summary (a model call the turn counts, held to
its budgets). `save_memory`, the last, appends the finished turn's question and answer to the session's log in
the long-term store. Reflexion begins its turn in `load_lessons` (reflexion.py), and each trial's actor in its
own `load_memory`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.runtime import Runtime

from reactgraph.memory.session_id import store_label
from reactgraph.memory.session_memory import ConversationSummary, SessionMemory
from reactgraph.models.gateway import ModelCall
from reactgraph.nodes.context import Context
from reactgraph.nodes.conversation import current_question, turn_question
from reactgraph.nodes.driver import AgentServices, Node, Steps, dual_node, log_fallback
from reactgraph.nodes.state import AgentState, begin_turn, final_answer_of, in_turn, iteration_of, status_of, summary_of

# --- load_memory ------------------------------------------------------------------------------------------------------

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



# --- save_memory ------------------------------------------------------------------------------------------------------

def qa_namespace(session: str) -> tuple[str, ...]:
    """Where a session's Q&A log lives in the store (the id encoded: store labels may not contain ".")."""
    return ("sessions", store_label(session), "qa")


def save_memory(state: AgentState, runtime: Runtime[Any]) -> dict[str, Any]:
    """One store item per turn (keyed by the question's message id, so a resumed turn writes it once)."""
    store = runtime.store
    question = current_question(state["messages"])
    if store is None or question is None:
        return {}
    session = str((get_config().get("configurable") or {}).get("thread_id") or "default")
    store.put(qa_namespace(session), str(question.id), {
        "question": str(question.text), "answer": final_answer_of(state), "status": status_of(state),
        "iterations": iteration_of(state), "time": datetime.now(UTC).isoformat(timespec="seconds"),
    })
    return {}
