"""Plans in the text protocol: a numbered list written by the model (prompts.TEXT_PLAN_FORMAT), read leniently.

A text-only model is never asked for `json_schema`: it writes `Parts:`, `Plan:` and `1. <goal> (tool: <name>)`
lines, as it writes Thought/Action for ReAct, and a reply the reader cannot use costs the same format-error
budget (nodes/text_protocol.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from reactgraph.nodes import text_protocol
from reactgraph.nodes.plan_solve.state import PlanStep

_LABEL = re.compile(r"^[ \t>#*_-]*(?P<label>parts|plan|reason|avoid[ \t_-]*tools)[ \t*_]*[:：][ \t*_]*(?P<value>.*)$",
                    re.I)
_ITEM = re.compile(r"^[ \t>]*(?:(?:step[ \t]*)?\d{1,2}[ \t]*[.)）:：、]|[-*•])[ \t]+(?P<item>\S.*)$", re.I)
_TOOL = re.compile(r"[ \t]*[(\[（][ \t]*(?:suggested[ \t]+)?tool[ \t]*[:：=][ \t]*(?P<tool>[^)\]）]*)[)\]）][ \t.。]*$"
                   r"|[ \t]+[—–-]+[ \t]*tool[ \t]*[:：][ \t]*(?P<dash>\S+)[ \t.。]*$", re.I)
_NONE = {"", "none", "no", "n/a", "na", "null", "-", "无", "没有", "(none)", "(no steps)", "no steps", "nothing"}


@dataclass(frozen=True)
class TextPlan:
    """A plan (or a revision) read from text; `problem` says why a reply is no plan at all."""

    steps: list[PlanStep] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)
    avoid_tools: list[str] = field(default_factory=list)
    reason: str = ""
    problem: str | None = None


def _clean(text: str) -> str:
    return text.strip().strip("*_`").strip()


def _step(item: str) -> PlanStep | None:
    tool = None
    if hint := _TOOL.search(item):
        tool = _clean(hint.group("tool") if hint.group("tool") is not None else hint.group("dash"))
        item = item[:hint.start()]
    goal = _clean(re.sub(r"^(?:goal|step)[ \t]*[:：][ \t]*", "", _clean(item), flags=re.I))
    if not goal:
        return None
    return PlanStep(goal=goal, tool=None if tool.lower() in _NONE else tool) if tool else PlanStep(goal=goal)


def _listed(value: str, separators: str) -> list[str]:
    items = [_clean(item) for item in re.split(separators, value)]
    return [item for item in items if item.lower() not in _NONE]


def parse_plan(text: str) -> TextPlan:
    """The plan in a reply: its numbered (or bulleted) steps with their tool hints, the `Parts:`, `Reason:` and
    `Avoid tools:` lines; "Plan: none" is a plan of no steps; a reply with neither is a format problem."""
    lines = text_protocol.unwrap(text_protocol.normalized(text)).splitlines()
    steps: list[PlanStep] = []
    parts: list[str] = []
    avoid: list[str] = []
    reason, declared_empty = "", False
    for line in lines:
        if labelled := _LABEL.match(line):
            label, value = re.sub(r"[ \t_-]+", " ", labelled.group("label").lower()), labelled.group("value").strip()
            if label == "parts":
                parts = _listed(value, r"[;；]")
            elif label == "avoid tools":
                avoid = _listed(value, r"[,，;；]")
            elif label == "reason":
                reason = _clean(value)
            elif _clean(value).lower() in _NONE - {""}:
                declared_empty = True
            elif (inline := _ITEM.match(value)) and (step := _step(inline.group("item"))):
                steps.append(step)  # "Plan: 1. …" on the label's own line
        elif (item := _ITEM.match(line)) and (step := _step(item.group("item"))):
            steps.append(step)
    if not steps and not declared_empty:
        return TextPlan(problem="the reply has no numbered plan ('1. <goal> (tool: <name>)') and no 'Plan: none'")
    return TextPlan(steps=_distinct(steps), parts=parts, avoid_tools=avoid, reason=reason)


def _distinct(steps: list[PlanStep]) -> list[PlanStep]:
    """The steps with a repeat of an earlier one dropped: a looping model numbers the same step again and again,
    which the line-level loop cut cannot see (each copy has its own number)."""
    seen: set[tuple[str, str | None]] = set()
    kept = []
    for step in steps:
        key = (" ".join(step.goal.split()).casefold(), step.tool)
        if key not in seen:
            seen.add(key)
            kept.append(step)
    return kept
