"""Where the loop goes next: pure functions of state and context, one per conditional edge."""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import AIMessage
from langgraph.types import Send

from nodes.act import ToolCallTask
from nodes.context import Context, current_context
from nodes.state import AgentState
from nodes.transcript import pending_calls


def after_think(state: AgentState) -> list[Send] | Literal["finalize"]:
    """Each tool call goes to its own act task (run concurrently); a final answer or failure goes to finalize."""
    if state.get("status") == "failed":
        return "finalize"
    reply = state["messages"][-1]
    calls = pending_calls(reply) if isinstance(reply, AIMessage) else []
    return [Send("act", ToolCallTask(call=call)) for call in calls] or "finalize"


def after_reflect(state: AgentState, context: Context | None = None) -> Literal["think", "finalize"]:
    """Back to think, unless the iteration limit is reached, a call repeated itself, or the verdict says done."""
    context = context or current_context()
    verdict = state.get("reflection") or {}
    if state.get("iteration", 0) >= context.max_iterations:
        return "finalize"
    if verdict.get("repeated_call") or verdict.get("enough_information"):
        return "finalize"
    return "think"
