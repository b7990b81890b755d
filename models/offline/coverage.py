"""Which parts of the question the scripted model's decomposition found, and which are still unanswered."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from .conversation import read_turn
from .data_blocks import unframed
from .describe import label
from .planner import BUILTIN_TOOLS, Plan, make_plan
from .recall import recall_coverage
from .textproto import as_tool_messages


def plan_coverage(plan: Plan) -> tuple[list[str], list[str]]:
    """(parts, missing): a label per reported sub-task and per clause no tool can answer; missing ⊆ parts.

    A part not done is missing, looked up or not: the scripted model knows nothing beyond its tools."""
    lang = plan.question.lang
    parts: list[str] = []
    missing: list[str] = []
    for state in plan.states.values():
        if not state.task.shown:
            continue
        name = label(state, plan, lang)
        parts.append(name)
        if state.status != "done":
            missing.append(name)
    for clause in plan.question.unhandled:
        parts.append(clause)
        missing.append(clause)
    return parts, missing


def coverage_args(messages: Sequence[BaseMessage]) -> tuple[list[str], list[str]]:
    """The (parts, missing) of the current turn's question, judged against this turn's observations."""
    normalized = as_tool_messages(unframed(list(messages)))
    recalled = recall_coverage(normalized)
    if recalled is not None:  # a question about what the user said earlier: answered from memory, or not
        return recalled
    turn = read_turn(normalized)
    return plan_coverage(make_plan(turn, BUILTIN_TOOLS))
