"""The reflection verdict: a structured self-check after every round of tool calls.

`ReflectionVerdict` is what the model fills in (structured output); `Verdict` is the same verdict as the state
holds it (the `reflection` field), a plain dict so that it checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from pydantic import BaseModel, Field
from typing_extensions import TypedDict


class Verdict(TypedDict):
    """The reflection verdict as the state holds it; the fields of `ReflectionVerdict`."""

    enough_information: bool
    tool_error: bool
    need_other_tool: bool
    repeated_call: bool
    note: str
    parts: list[str]
    missing: list[str]


class ReflectionVerdict(BaseModel):
    """Self-check after observing tool results; decides whether the loop should go on."""

    enough_information: bool = Field(
        description="True if the observations so far are sufficient to answer the question.")
    tool_error: bool = Field(description="True if the latest tool call(s) failed or returned an error.")
    need_other_tool: bool = Field(
        description="True if a different tool (or different arguments) is needed to make progress.")
    repeated_call: bool = Field(
        description="True if the latest call repeats an earlier one (same tool, same arguments) "
                    "without yielding new information.")
    note: str = Field(default="", description="One or two sentences of advice for the next step.")
    parts: list[str] = Field(default_factory=list, description=(
        "Every distinct thing the question asks for, one short phrase each (a compound question has several)."))
    missing: list[str] = Field(default_factory=list, description=(
        "The parts (copied from `parts`) that the observations so far do not answer."))

    def record(self) -> Verdict:
        """The verdict as the state holds it."""
        return cast(Verdict, self.model_dump())


class ClosingCheck(BaseModel):
    """Closing self-check: the question's parts, and those the final answer leaves unanswered."""

    parts: list[str] = Field(description=(
        "Every distinct thing the question asks for, one short phrase each (a compound question has several)."))
    missing: list[str] = Field(default_factory=list, description=(
        "The parts (copied from `parts`) that the final answer does not answer from the observations or from "
        "what the user said."))


def parts_verdict(*, parts: list[str] | None = None, missing: list[str] | None = None) -> Verdict:
    """A verdict that only names the question's parts (e.g. the plan's account of them); every flag False."""
    return Verdict(enough_information=False, tool_error=False, need_other_tool=False, repeated_call=False,
                   note="", parts=list(parts or []), missing=list(missing or []))


def as_verdict(raw: Mapping[str, Any] | None) -> Verdict | None:
    """A stored verdict as the record, a field it lacks (a checkpoint from an older version) at its default."""
    if raw is None:
        return None
    return cast(Verdict, {**parts_verdict(), **{key: value for key, value in raw.items() if value is not None}})
