"""Structured output of the scripted model: one responder per schema name (ReflectionVerdict,
ConversationSummary, Plan and Replan, Evaluation and Lesson, ClosingCheck)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from reactgraph.memory.session_memory import fallback_summary, read_summary_prompt

from .coverage import coverage_args
from .judge import evaluation_args, lesson_args
from .plan import plan_args, replan_args
from .reflection import reflection_args

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
    "ReflectionVerdict": reflection_args,
    "ConversationSummary": summary_args,
    "Plan": plan_args,
    "Replan": replan_args,
    "Evaluation": evaluation_args,
    "Lesson": lesson_args,
    "ClosingCheck": closing_check_args,
}


def schema_name(schema: Any) -> str:
    """The tool name a schema is bound under (a pydantic model's class name / title)."""
    if isinstance(schema, str):
        return schema
    if isinstance(schema, dict) and "function" in schema:
        return schema["function"]["name"]
    return convert_to_openai_tool(schema)["function"]["name"]


def responder_for(name: str) -> Responder:
    """The scripted responder for a schema, or NotImplementedError naming it."""
    try:
        return RESPONDERS[name]
    except KeyError:
        supported = ", ".join(sorted(RESPONDERS))
        raise NotImplementedError(
            f"The scripted offline model has no structured output for schema {name!r} "
            f"(supported: {supported}). Register a responder in reactgraph.models.offline.structured.RESPONDERS "
            f"or use a real model.") from None
