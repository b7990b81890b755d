"""`save_memory`: append the finished turn's question and answer to the session's log in the long-term store."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from langgraph.config import get_config
from langgraph.runtime import Runtime

from reactgraph.memory.session_id import store_label
from reactgraph.nodes.conversation.transcript import current_question
from reactgraph.nodes.state.agent import AgentState
from reactgraph.nodes.state.fields import final_answer_of, iteration_of, status_of


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
