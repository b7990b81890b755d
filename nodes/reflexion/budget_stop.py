"""Ending a Reflexion run whose evaluation or lesson used up a budget, as a trial that ran out of one does."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from reactgraph.models.gateway import ModelReply
from reactgraph.nodes.budget import exhausted, wrap_up_note
from reactgraph.nodes.context import Context
from reactgraph.nodes.conversation import question_text
from reactgraph.nodes.reflexion.state import ReflexionState, answer_id
from reactgraph.nodes.state import final_answer_of, turn_id_of


def _in_chinese(state: ReflexionState) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in question_text(state["messages"]))


def stopped_by_budget(state: ReflexionState, runtime: Runtime[Context], update: dict[str, Any],
                      reply: ModelReply) -> dict[str, Any]:
    """`update` of an evaluate / self_reflect node whose model call (`reply`) used up a budget:
    the run ends (no further trial or lesson) with the last trial's answer plus the wrap-up note, status
    `budget_exhausted`, `stop_reason`/`budget` set. Unchanged when every budget still has room.

    The node driver adds this call's usage to the update afterwards; the reply's `turn_usage` decides here."""
    spent = exhausted(reply.turn_usage, runtime.context)
    if spent is None:
        return update
    answer = f"{final_answer_of(state)}\n\n{wrap_up_note(spent, _in_chinese(state))}".strip()
    steps = [{**step, "observation": f"{step['observation']}\n{wrap_up_note(spent, _in_chinese(state))}"}
             for step in update.get("steps", [])]
    return {**update, "steps": steps, "final_answer": answer, "status": "budget_exhausted", "stop_reason": "budget",
            "budget": spent, "messages": [AIMessage(answer, id=answer_id(turn_id_of(state)))]}
