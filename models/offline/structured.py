"""Structured output of the scripted model: one responder per request purpose (reflect, summarize, plan,
replan, evaluate, lesson, check: models/purpose.py); any other structured request (a caller's response format,
a direct `with_structured_output`) is answered from the schema's fields by type (response.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from reactgraph.memory.session_memory import fallback_summary, read_summary_prompt

from .coverage import coverage_args
from .judge import evaluation_args, lesson_args
from .plan import plan_args, replan_args
from .reflection import reflection_args
from .response import answer_responder

Responder = Callable[[Sequence[BaseMessage]], dict[str, Any]]


def summary_args(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    """A ConversationSummary of a session_memory.summary_prompt: the deterministic fallback summary."""
    return {"summary": fallback_summary(*read_summary_prompt(messages))}


def closing_check_args(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    """A ClosingCheck: the parts of its own decomposition, and those this turn's observations leave unanswered
    (it knows nothing beyond its tools, so a part never looked up is missing too)."""
    parts, missing = coverage_args(messages)
    return {"parts": parts, "missing": missing}


RESPONDERS: dict[str, Responder] = {
    "reflect": reflection_args,
    "summarize": summary_args,
    "plan": plan_args,
    "replan": replan_args,
    "evaluate": evaluation_args,
    "lesson": lesson_args,
    "check": closing_check_args,
}


def responder_for(purpose: str | None, parameters: dict[str, Any] | None) -> Responder:
    """The scripted responder of a request's purpose, else one that fills `parameters` from the answer."""
    return RESPONDERS.get(purpose or "") or answer_responder(parameters or {})
