"""`load_lessons`: start a question's trials — capture how to check it, recall lessons from earlier runs."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore

from reactgraph.nodes.conversation import question_text, turn_question
from reactgraph.nodes.reflexion.evaluate import CHECKERS
from reactgraph.nodes.reflexion.state import (
    MAX_LESSONS,
    REFLEXION_TURN,
    ReflexionState,
    input_criteria,
    lessons_namespace,
)
from reactgraph.nodes.state import begin_turn


def session_of(config: RunnableConfig | None) -> str:
    return str(((config or {}).get("configurable") or {}).get("thread_id") or "default")


def recalled_lessons(store: BaseStore | None, question: str, session: str) -> list[str]:
    """Lessons the store holds for this very question in this session (episodic memory), oldest first."""
    if store is None or not question:
        return []
    items = [i for i in store.search(lessons_namespace(session), limit=1000) if i.value.get("question") == question]
    items.sort(key=lambda item: (item.value.get("time", ""), item.value.get("trial", 0)))
    return [str(item.value["lesson"]) for item in items if item.value.get("lesson")][-MAX_LESSONS:]


def load_lessons(state: ReflexionState, runtime: Runtime[Any]) -> dict[str, Any]:
    """Reset the per-question fields; every run of the graph starts its trials afresh."""
    criteria = input_criteria(state)
    # a bad input is refused before any model or tool is called
    if (checker := criteria["checker"]) and checker not in CHECKERS:
        raise ValueError(f"unknown checker {checker!r}; registered: {', '.join(sorted(CHECKERS)) or 'none'}")
    turn_question(state["messages"])  # an empty question (a bare invoke, Studio) runs no trial
    lessons = recalled_lessons(runtime.store, question_text(state["messages"]), session_of(get_config()))
    return {**begin_turn(state, REFLEXION_TURN), "lessons": lessons, "criteria": criteria}
