"""Where the loop goes next: pure functions of state and context, one per conditional edge."""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import AIMessage
from langgraph.runtime import get_runtime

from nodes.context import Context
from nodes.state import AgentState
from nodes.transcript import pending_calls


def after_think(state: AgentState) -> Literal["act", "finalize"]:
    """Tool calls go to act; a final answer (or a failed model call) goes to finalize."""
    if state.get("status") == "failed":
        return "finalize"
    reply = state["messages"][-1]
    return "act" if isinstance(reply, AIMessage) and pending_calls(reply) else "finalize"


def after_reflect(state: AgentState, context: Context | None = None) -> Literal["think", "finalize"]:
    """Back to think, unless the iteration limit is reached, a call repeated itself, or the verdict says done."""
    context = context or get_runtime(Context).context
    verdict = state.get("reflection") or {}
    if state.get("iteration", 0) >= context.max_iterations:
        return "finalize"
    if verdict.get("repeated_call") or verdict.get("enough_information"):
        return "finalize"
    return "think"
