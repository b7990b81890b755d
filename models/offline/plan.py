"""Plan and Replan of the scripted model: the question's sub-tasks as ordered plan steps with tool hints.

Independent sub-tasks (each city's weather, a sum, a look-up) become one step each, with a goal written so
that it names its subject. A chain (who → when → how long → how much) becomes one step per sentence of the
question, in order. Plan-and-Solve's notes show the executing model the plan and its current step, and the
scripted model works on the goals up to it (see data_blocks), so a later chain step ("到 2026 年它已经诞生了多少年？")
still knows its subject. Every goal is checked against how the
model itself reads it (`reading`: the same sub-task, starting with the same call); a goal that would be
misread falls back to the question's own sentence, then to the whole question.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage

from .conversation import Turn, read_turn
from .describe import join, label
from .lexicon import normalize
from .planner import BUILTIN_TOOLS, Plan, make_plan
from .question import Question, Task, split_clauses
from .recall import recall_reply

CHAIN_KINDS = frozenset({"who", "origin", "now", "elapsed", "accumulate"})
TOOL_OF = {"weather": "get_weather", "time": "get_time", "now": "get_time", "calc": "calculator",
           "elapsed": "calculator", "accumulate": "calculator", "fact": "search", "who": "search",
           "origin": "search", "http": "http_get", "diff": "calculator"}


@dataclass
class Step:
    """A plan step and the sub-tasks it covers (the keys are for replanning, not shown to anyone)."""

    goal: str
    keys: tuple[str, ...]

    def as_args(self, question: Question, tool: str | None = None) -> dict[str, Any]:
        task = question.task(self.keys[0]) if self.keys else None
        return {"goal": self.goal, "tool": tool or (TOOL_OF.get(task.kind) if task else None)}


def _template(task: Task, lang: str) -> str:
    zh, p = lang == "zh", task.params
    if task.kind == "weather":
        return f"{p['city']}的天气怎么样？" if zh else f"What is the weather in {p['city']}?"
    if task.kind == "time":
        if p.get("city"):
            return f"{p['city']}现在几点？" if zh else f"What time is it in {p['city']}?"
        return "现在几点？" if zh else "What time is it now?"
    if task.kind == "calc":
        return f"计算 {p['expression']}" if zh else f"Calculate {p['expression']}"
    if task.kind == "http":
        return f"获取 {p['url']} 的内容" if zh else f"Fetch {p['url']}"
    return p.get("clause") or p.get("query", "")


def reading(text: str, history: Sequence[str] = (), tools: Collection[str] = BUILTIN_TOOLS) -> Plan:
    """How the scripted model itself reads a text before any tool has run: its sub-tasks and first calls."""
    return make_plan(Turn(question=text, history=tuple(history)), tools)


def _keys(text: str, history: Sequence[str]) -> set[str]:
    return {t.key for t in reading(text, history).question.tasks}


def _sentences(text: str) -> list[str]:
    """The question's sentences as the user wrote them (with their question marks), when they can be matched
    one to one with the normalised sentences the chain indexes; else the normalised ones."""
    normalised = split_clauses(normalize(text))
    written = split_clauses(text)
    if len(written) != len(normalised):
        return normalised
    sentences = []
    for clause in written:
        end = text.find(clause) + len(clause)
        mark = text[end] if 0 < end < len(text) and text[end] in "?？" else ""
        sentences.append(clause + mark)
    return sentences


def _chain_steps(question: Question, history: Sequence[str]) -> list[Step]:
    """One step per sentence of the chain; each is read together with the sentences before it."""
    clauses = _sentences(question.text)
    chain_keys = [t.key for t in question.tasks if t.kind in CHAIN_KINDS]
    steps: list[Step] = []
    seen: set[str] = set()
    for index in question.chain.clauses if question.chain else []:
        goal = clauses[index]
        prefix = "\n".join([*(s.goal for s in steps), goal])
        new = tuple(k for k in chain_keys if k in _keys(prefix, history) and k not in seen)
        if not new and steps:  # a sentence that adds nothing of its own belongs to the step before
            steps[-1] = Step(f"{steps[-1].goal}，{goal}" if question.lang == "zh" else f"{steps[-1].goal}, {goal}",
                             steps[-1].keys)
            continue
        seen.update(new)
        steps.append(Step(goal, new))
    missing = tuple(k for k in chain_keys if k not in seen)
    if missing:  # the sentences do not reproduce the chain on their own: one step that is the whole question
        return [Step(question.text, tuple(chain_keys))]
    return steps


def _read_alike(goal: str | None, key: str, first: Plan, history: Sequence[str]) -> bool:
    """Whether the model reads `goal` as the same sub-task, starting with the same call."""
    if not goal:
        return False
    alone = reading(goal, history).states.get(key)
    return alone is not None and alone.next_call == first.states[key].next_call


def plan_steps(first: Plan, history: Sequence[str] = ()) -> list[Step]:
    """The question's sub-tasks (as `reading` gives them) as ordered steps, the chain where its first task stands."""
    question = first.question
    steps: list[Step] = []
    chain_done = False
    for task in question.tasks:
        if task.kind in CHAIN_KINDS:
            if not chain_done:
                steps.extend(_chain_steps(question, history))
                chain_done = True
            continue
        if task.kind == "weather" and not task.params["city"]:
            continue  # no city named: the answer asks which one, no tool can help
        candidates = [c for c in (_template(task, question.lang), task.params.get("clause")) if c]
        goal: str = next((c for c in candidates if _read_alike(c, task.key, first, history)), question.text)
        steps.append(Step(goal, (task.key,)))
    return steps


def _hint(plan: Plan, step: Step) -> str | None:
    """The tool of the step's first call as the model would make it now (None while it waits on others)."""
    for key in step.keys:
        call = plan.states[key].next_call if key in plan.states else None
        if call is not None:
            return call.name
    return None


def plan_args(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    """A Plan: no steps for what needs no tool (a recalled fact, small talk), else one step per sub-task group."""
    if recall_reply(messages) is not None:
        return {"steps": []}
    turn = read_turn(messages)
    first = reading(turn.question, turn.history)
    return {"steps": [s.as_args(first.question, _hint(first, s)) for s in plan_steps(first, turn.history)]}


def replan_args(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    """A Replan: the steps whose sub-tasks are still open, without the tools that failed this turn."""
    turn = read_turn(messages)
    failing = sorted({o.call.name for o in turn.observations if not o.ok and o.call.name in BUILTIN_TOOLS})
    plan = make_plan(turn, BUILTIN_TOOLS - set(failing))
    question = plan.question
    lang, zh = question.lang, question.lang == "zh"
    open_keys = {k for k, s in plan.states.items() if s.status in ("pending", "waiting")}
    steps = plan_steps(reading(turn.question, turn.history), turn.history)
    kept = [s for s in steps if open_keys & set(s.keys)]
    lost = [label(plan.states[k], plan, lang) for s in steps for k in s.keys
            if plan.states.get(k) is not None and plan.states[k].status == "failed"]
    parts = []
    if failing:
        parts.append(f"{join(failing, lang)} 失败，后续步骤改用其他工具" if zh
                     else f"{join(failing, lang)} failed; the remaining steps use other tools")
    if lost:
        parts.append(f"无法完成：{join(lost, lang)}" if zh else f"cannot be done: {join(lost, lang)}")
    parts.append(f"还剩 {len(kept)} 步" if zh else f"{len(kept)} step(s) remain")
    # The hint is the tool the step's next attempt will use, now that the failing ones are avoided.
    return {"steps": [s.as_args(question, _hint(plan, s)) for s in kept], "avoid_tools": failing,
            "reason": ("；" if zh else "; ").join(parts) + ("。" if zh else ".")}
