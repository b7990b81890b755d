"""Plan-and-Solve's vocabulary: the plan schemas, the state, how a carried-out step is settled, and a plan
written as text.

A text-only model is never asked for `json_schema`: it writes `Parts:`, `Plan:` and `1. <goal> (tool: <name>)`
lines (prompts.TEXT_PLAN_FORMAT), as it writes Thought/Action for ReAct. `parse_plan` reads them leniently, and a
reply it cannot use costs the same format-error budget as any text-protocol reply (text_protocol.read_reply).
The nodes that use all this are plan_solve.py's.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired

from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from reactgraph.nodes import text_protocol
from reactgraph.nodes.state import (
    AGENT_TURN,
    AgentState,
    ExecutionStep,
    Verdict,
    begin_turn,
    iteration_of,
    make_step,
    parts_verdict,
    steps_of,
)
from reactgraph.nodes.tool_round import found_nothing, tool_steps

# --- the plan and the state ---------------------------------------------------------------------------------

# Tool rounds one step may use before it is settled from what it observed: enough for a fallback or two,
# few enough that one broken step cannot eat the whole budget.
STEP_TOOL_ROUNDS = 3

StepOutcome = Literal["done", "recovered", "failed"]
# A step that failed, or only succeeded after a tool failed, is the "failed or surprising" step replan revisits.
REPLAN_AFTER: frozenset[str] = frozenset({"failed", "recovered"})


class PlanStep(BaseModel):
    """One step of a plan: what it must find out, and the tool it will probably need."""

    goal: str = Field(description="What this step must find out or compute: one self-contained sub-question "
                                  "or instruction, naming the things it is about.")
    tool: str | None = Field(default=None, description="The tool this step will most likely need (a hint, not "
                                                       "a constraint), or null when it needs none.")
    part: str | None = Field(default=None, description="The part of the question (copied from the plan's `parts`) "
                                                       "this step helps answer, or null.")


class Plan(BaseModel):
    """An ordered plan for the user's question; empty when no tool can help."""

    steps: list[PlanStep] = Field(default_factory=list, description="The steps, in the order to carry them out.")
    parts: list[str] = Field(default_factory=list, description=(
        "Every distinct thing the question asks for, one short phrase each (a compound question has several)."))


class Replan(BaseModel):
    """The revised rest of a plan after a failed or surprising step."""

    steps: list[PlanStep] = Field(default_factory=list, description=(
        "The revised remaining steps, replacing the old remaining ones; empty to stop and answer now."))
    avoid_tools: list[str] = Field(default_factory=list, description=(
        "Tools that failed and should not be offered to the remaining steps."))
    reason: str = Field(default="", description="One sentence: what changed and why.")


class PlanStepRecord(TypedDict):
    """A `PlanStep` as the state holds it (the plan's fallback step names no part)."""

    goal: str
    tool: str | None
    part: NotRequired[str | None]


class StepResult(TypedDict):
    """A settled plan step: what it was for, how it went, and what it found."""

    index: int  # position in the plan (0-based)
    goal: str
    tool: str | None
    status: StepOutcome
    result: str


class PlanSolveState(AgentState):
    """ReAct's state plus the plan being carried out. `iteration` counts plan steps begun (see README)."""

    plan: NotRequired[list[PlanStepRecord]]  # the steps carried out, then the remaining ones
    cursor: NotRequired[int]  # index in `plan` of the step being carried out, or of the next one
    step_rounds: NotRequired[int]  # tool rounds of the current step so far; 0 when no step is under way
    step_results: NotRequired[list[StepResult]]
    avoid_tools: NotRequired[list[str]]  # from replan: tools no longer offered to the model
    replans: NotRequired[int]
    plan_parts: NotRequired[list[str]]  # the question's parts as the plan named them (empty: the rules judge)


# Plan-and-Solve's per-turn fields (begin_turn): every run of the graph plans its question from scratch.
PLAN_SOLVE_TURN: Mapping[str, Any] = {**AGENT_TURN, "plan": [], "cursor": 0, "step_rounds": 0, "step_results": [],
                                      "avoid_tools": [], "replans": 0, "plan_parts": []}


def plan_solve_turn(state: Mapping[str, Any]) -> dict[str, Any]:
    """Plan-and-Solve's turn start, always afresh (load_memory's `start`)."""
    return begin_turn(state, PLAN_SOLVE_TURN)


# Reading Plan-and-Solve's own fields, each with its default (the agent state's fields: nodes/state.py).

def plan_of(state: Mapping[str, Any]) -> list[PlanStepRecord]:
    return list(state.get("plan") or [])


def cursor_of(state: Mapping[str, Any]) -> int:
    return state.get("cursor") or 0


def step_rounds_of(state: Mapping[str, Any]) -> int:
    return state.get("step_rounds") or 0


def step_results_of(state: Mapping[str, Any]) -> list[StepResult]:
    return state.get("step_results") or []


def avoid_tools_of(state: Mapping[str, Any]) -> list[str]:
    return state.get("avoid_tools") or []


def replans_of(state: Mapping[str, Any]) -> int:
    return state.get("replans") or 0


def plan_parts_of(state: Mapping[str, Any]) -> list[str]:
    return state.get("plan_parts") or []


def remaining(state: PlanSolveState) -> list[PlanStepRecord]:
    """The plan's steps not yet begun (or the one under way)."""
    return plan_of(state)[cursor_of(state):]


def render_plan(plan: Sequence[Mapping[str, Any]], results: Sequence[StepResult] = (), start: int = 0) -> str:
    """A numbered listing; settled steps show their outcome."""
    outcome = {r["index"]: r["status"] for r in results}
    lines = []
    for i, step in enumerate(plan[start:], start):
        mark = f"[{outcome[i]}] " if i in outcome else ""
        hint = f" (tool: {step['tool']})" if step.get("tool") else ""
        lines.append(f"{i + 1}. {mark}{step['goal']}{hint}")
    return "\n".join(lines) or "(no steps)"


def render_results(results: Sequence[StepResult]) -> str:
    lines = [f"{r['index'] + 1}. {r['goal']} → [{r['status']}] {r['result']}" for r in results]
    return "\n".join(lines) or "(no step was carried out)"


def _usable(record: ExecutionStep) -> bool:
    # A call a person answered at the approval step has its answer: the person's, as good as the tool's.
    return record["status"] in ("ok", "responded") and not found_nothing(record)


def outcome(records: Sequence[ExecutionStep]) -> StepOutcome:
    """done: every call worked (or none was needed); recovered: some failed, others worked; failed: none worked."""
    usable = [r for r in records if _usable(r)]
    if len(usable) == len(records):
        return "done"
    return "recovered" if usable else "failed"


def observed(records: Sequence[ExecutionStep], budget: int = 600) -> str:
    """The step's result when the model did not write one: what its calls returned."""
    lines = [f"{r['action']} ({r['status']}): {r['observation'][:budget]}" for r in records]
    return "\n".join(lines) or "(nothing observed)"


def settle(state: PlanSolveState, *, result: str, records: Sequence[ExecutionStep], started: float,
           tokens: int = 0, status: StepOutcome | None = None) -> dict[str, Any]:
    """The update that closes the current step: its result, an `execute_step` record, and the cursor moved on.

    `records` are all of this step's tool records (earlier rounds' and, if just observed, this round's).
    """
    cursor = cursor_of(state)
    step = state["plan"][cursor]
    status = status or outcome(records)
    settled = StepResult(index=cursor, goal=step["goal"], tool=step.get("tool"), status=status, result=result)
    record = make_step(step=iteration_of(state), node="execute_step", status=status, thought=step["goal"],
                       observation=result, tokens=tokens, latency_ms=(time.perf_counter() - started) * 1000)
    return {"step_results": [*step_results_of(state), settled], "cursor": cursor + 1, "step_rounds": 0,
            "steps": [record]}


def step_records(state: PlanSolveState) -> list[ExecutionStep]:
    """Tool records of the step under way (records carry the plan step's number as `step`)."""
    return tool_steps(steps_of(state), iteration_of(state))


def _key(text: object) -> str:
    return " ".join(str(text or "").split()).casefold()


def plan_verdict(state: PlanSolveState) -> Verdict | None:
    """The plan's account of the question's parts, in the reflection verdict's terms (`parts`, `missing`), for
    `closing.verdict_coverage`; None when the plan named no parts (the closing self-check asks the model then).

    A part is missing when the steps for it were all carried out without a usable result (failed, found nothing)
    or never carried out (a limit or budget stopped the plan); a part no step names is the model's own knowledge.
    When no step names a part, a plan all of whose steps failed leaves every part missing."""
    parts = [str(p).strip() for p in plan_parts_of(state) if str(p).strip()]
    if not parts:
        return None
    plan, results = plan_of(state), step_results_of(state)
    worked = {r["index"] for r in results if r["status"] != "failed"}
    if not any(step.get("part") for step in plan):
        return parts_verdict(parts=parts, missing=parts if results and not worked else [])
    missing = []
    for part in parts:
        mine = [i for i, step in enumerate(plan) if _key(step.get("part")) == _key(part)]
        if mine and not worked.intersection(mine):
            missing.append(part)
    return parts_verdict(parts=parts, missing=missing)



# --- a plan written as text ---------------------------------------------------------------------------------

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
