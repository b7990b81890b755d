"""Reflexion's vocabulary: the state of a run of trials, the evaluator's and self-reflection's schemas."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, NotRequired

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from reactgraph.memory.session_id import store_label
from reactgraph.nodes.state import AGENT_TURN, AgentState

# Lessons shown to a trial: the newest few, so the prompt stays bounded when a question is retried often.
MAX_LESSONS = 5


class Evaluation(BaseModel):
    """A judgement of one attempt at the user's question."""

    passed: bool = Field(description="True only if the answer fully and correctly answers every part of the "
                                     "question from the tool results.")
    reason: str = Field(default="", description="One sentence saying why.")


class Lesson(BaseModel):
    """What the next attempt should do differently."""

    lesson: str = Field(description="One or two concrete sentences: what went wrong and what to do instead.")


class ReflexionInput(TypedDict):
    """A question, and optionally how to check its answer (else the model judges)."""

    messages: Annotated[list[AnyMessage], add_messages]
    # Text(s) the answer must contain (case-insensitive; "127,750" matches "127750").
    expected: NotRequired[str | list[str] | None]
    # Name of a checker registered in nodes.evaluate.CHECKERS, and its keyword arguments.
    checker: NotRequired[str | None]
    checker_params: NotRequired[dict[str, Any] | None]


# Who judged a trial: the task's checker or expected text, the model, the rules, or the trial's failed status.
JudgedBy = Literal["checker", "expected", "model", "rules", "status"]


class EvaluationRecord(TypedDict):
    """The judgement of the last trial as the state holds it (the `evaluation` field)."""

    passed: bool
    reason: str
    by: JudgedBy


class Criteria(TypedDict):
    """How this question's answer is checked, captured from the input (see `ReflexionInput`)."""

    expected: str | list[str] | None
    checker: str | None
    params: dict[str, Any]


class ReflexionState(AgentState):
    """The session, plus this question's trials. `iteration` and `steps` add up over the trials."""

    expected: NotRequired[str | list[str] | None]
    checker: NotRequired[str | None]
    checker_params: NotRequired[dict[str, Any] | None]
    # The input's checking criteria, captured for this turn (the input fields are cleared so the next
    # question on the thread is not checked against them).
    criteria: NotRequired[Criteria]
    trial: NotRequired[int]  # trials run so far for this question
    evaluation: NotRequired[EvaluationRecord | None]  # the last trial's judgement
    trajectory: NotRequired[list[AnyMessage]]  # the last trial's messages, from the question on


# Reflexion's per-turn fields (begin_turn): every run of the graph starts its trials afresh. The input's criteria
# are cleared so that the next question on this thread is not checked against this one's.
REFLEXION_TURN: Mapping[str, Any] = {**AGENT_TURN, "trial": 0, "evaluation": None, "trajectory": [],
                                     "expected": None, "checker": None, "checker_params": None}


# Reading Reflexion's own fields, each with its default (the agent state's fields: nodes/state.py).

def trial_of(state: Mapping[str, Any]) -> int:
    """Trials run so far for this question."""
    return state.get("trial") or 0


def evaluation_of(state: Mapping[str, Any]) -> EvaluationRecord | None:
    """The last trial's judgement, or None (no trial judged yet)."""
    return state.get("evaluation") or None


def failed_because(state: Mapping[str, Any], default: str) -> str:
    """Why the last trial did not pass, as its judgement said (`default` when it said nothing)."""
    evaluation = evaluation_of(state)
    return (evaluation["reason"] if evaluation else "") or default


def trajectory_of(state: Mapping[str, Any]) -> list[AnyMessage]:
    """The last trial's messages, from the question on."""
    return state.get("trajectory") or []


def criteria_of(state: Mapping[str, Any]) -> Criteria:
    """The checking criteria captured for this question (none: the model judges)."""
    return state.get("criteria") or Criteria(expected=None, checker=None, params={})


def input_criteria(state: Mapping[str, Any]) -> Criteria:
    """The checking criteria the input brought (`expected`, `checker`, `checker_params`)."""
    return Criteria(expected=state.get("expected"), checker=state.get("checker"),
                    params=state.get("checker_params") or {})


def lessons_namespace(session: str) -> tuple[str, ...]:
    """Where a session's lessons live in the long-term store (episodic memory; the id encoded as a label)."""
    return ("lessons", store_label(session))


def answer_id(turn_id: str | None) -> str:
    """The id of this turn's answer message: each trial replaces the previous trial's answer."""
    return f"{turn_id or 'turn'}:answer"
