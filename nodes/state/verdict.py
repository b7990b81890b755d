"""The reflection verdict: a structured self-check after every round of tool calls."""

from __future__ import annotations

from pydantic import BaseModel, Field


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
