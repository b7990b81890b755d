"""Structured output of the scripted offline model: one responder per request purpose, filled from its own reading.

Each purpose of models/purpose.py has a responder built on how the model itself reads the question. A plan lists
the sub-tasks as ordered steps with tool hints: independent parts one step each, a chain one step per sentence in
order, every goal checked against how the model would read it and falling back to the question's own sentence when
it would be misread; a replan keeps the steps still open, without the tools that failed this turn. A closing check
names the parts of the decomposition and those the observations leave unanswered; a reflection verdict reads tool
errors, repeated calls and whether the information is enough from this turn's observations; an evaluation passes
when every sub-task was completed from the tool results (or a fact was recalled), and a lesson says which sub-tasks
stayed open and what to try instead; a summary is the deterministic fallback summary. Any other structured request,
a caller's response format or a direct `with_structured_output`, is filled from the model's own final answer by each
field's type: text gets the answer, numbers its numbers in order, a list of text its sentences, a nested object the
same way, and anything else the simplest value its schema allows. No meaning is read into field names: it is a
script, not a language model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage

from reactgraph.memory.session_memory import fallback_summary, read_summary_prompt
from reactgraph.models.response_format import read_request
from reactgraph.models.schema_test_model import MAX_DEPTH, example_value

from .answer import describe_call, join, label, missing_reason
from .conversation import (
    Turn,
    as_tool_messages,
    declined_line,
    read_turn,
    recall_coverage,
    recall_reply,
    unframed,
)
from .failures import failure_kind, tools_to_avoid
from .planner import BUILTIN_TOOLS, DOCUMENT_PREFIX, Plan, make_plan
from .question import Question, Task, decompose, split_clauses
from .words import normalize

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:[.,]\d+)?(?![\w])")
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+")


def answer_responder(parameters: dict[str, Any]) -> Callable[[Sequence[BaseMessage]], dict[str, Any]]:
    """A responder filling `parameters` (the schema's JSON schema) from the answer the request shows."""

    def respond(messages: Sequence[BaseMessage]) -> dict[str, Any]:
        asked = read_request(list(messages))
        answer = asked[1] if asked else next((m.text for m in reversed(messages) if m.text), "")
        numbers = iter(_numbers(answer))
        value = _fill(parameters, answer, numbers, 0)
        return value if isinstance(value, dict) else {}

    return respond


def _numbers(answer: str) -> list[float]:
    """The answer's numbers in order, a calculation's result (what follows its last "=") first."""
    before, _, after = answer.rpartition("=")
    found = _NUMBER.findall(after) + _NUMBER.findall(before) if before else _NUMBER.findall(answer)
    return [float(n.replace(",", ".")) for n in found]


def _fill(schema: Any, answer: str, numbers: Iterator[float], depth: int) -> Any:
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return None
    if isinstance(options := schema.get("anyOf") or schema.get("oneOf"), list) and options:
        chosen = next((o for o in options if isinstance(o, dict) and o.get("type") != "null"), options[0])
        return _fill(chosen, answer, numbers, depth + 1)
    kind = schema.get("type", "object" if "properties" in schema else None)
    if isinstance(enum := schema.get("enum"), list) and enum:
        return next((v for v in enum if isinstance(v, str) and v.lower() in answer.lower()), enum[0])
    if kind == "object" and isinstance(properties := schema.get("properties"), dict):
        return {name: _fill(sub, answer, numbers, depth + 1) for name, sub in properties.items()}
    if kind == "string":
        limit = schema.get("maxLength")
        return answer[:limit] if isinstance(limit, int) and limit > 0 else answer
    if kind in ("number", "integer"):
        number = next(numbers, None)
        if number is None:
            return example_value(schema)
        return round(number) if kind == "integer" else number
    if kind == "array" and isinstance(items := schema.get("items"), dict) and items.get("type") == "string":
        return [part for part in _SENTENCE.split(answer) if part.strip()] or [answer]
    return example_value(schema, depth)


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


def _came_up_empty(turn: Turn, plan: Plan) -> bool:
    latest = {o.call for o in turn.latest_round()}
    return any(call in latest for s in plan.states.values() for call, _ in s.failures)


def verdict(turn: Turn) -> dict[str, Any]:
    """Arguments of a ReflectionVerdict: tool_error, repeated_call, enough_information, need_other_tool, note."""
    plan = make_plan(turn, BUILTIN_TOOLS)
    lang = plan.question.lang
    zh = lang == "zh"
    latest = turn.latest_round()
    tool_error = any(not o.ok for o in latest)
    repeated = turn.repeated()
    parts, missing = plan_coverage(plan)
    # Nothing left to call is not enough information when every sub-task came up empty.
    found = any(s.status == "done" for s in plan.states.values())
    enough = not plan.calls and (found or not plan.question.tasks)
    need_other = (tool_error or _came_up_empty(turn, plan)) and bool(plan.calls)
    if repeated:
        note = ("最近一次调用与之前的调用完全重复，没有得到新信息；请停止重复调用，直接根据已有信息回答。" if zh
                else "The latest call repeated an earlier one without new information; stop repeating and answer "
                     "with what you have.")
    elif enough and plan.question.tasks:
        note = "信息已足够，可以直接回答。" if zh else "The information is sufficient; answer now."
    elif not plan.calls and plan.question.tasks:
        note = ("工具都没有找到答案；请如实说明缺少哪些信息。" if zh
                else "The tools found nothing; say plainly what is missing.")
    elif enough:
        note = ("这个问题没有可用工具能处理，应如实说明无法离线回答。" if zh
                else "No available tool can handle this question; say honestly that it cannot be answered offline.")
    else:
        steps = []
        for state in plan.states.values():
            if state.next_call in plan.calls and state.next_call is not None:
                steps.append(describe_call(state.next_call, state.task, lang))
        steps = list(dict.fromkeys(steps))
        if need_other:
            note = (f"上一步工具失败或没有结果，换个方式：{'；'.join(steps)}。" if zh
                    else f"The last step failed or found nothing; try another way: {'; '.join(steps)}.")
        else:
            note = f"继续下一步：{'；'.join(steps)}。" if zh else f"Continue with the next step: {'; '.join(steps)}."
    return {"enough_information": enough, "tool_error": tool_error, "need_other_tool": need_other,
            "repeated_call": repeated, "note": note, "parts": parts, "missing": missing}


def reflection_args(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    return verdict(read_turn(messages))


def _attempt(messages: Sequence[BaseMessage]) -> Plan:
    turn = read_turn(messages)
    return make_plan(turn, BUILTIN_TOOLS)


def _open(plan: Plan) -> list[str]:
    lang = plan.question.lang
    return [f"{label(s, plan, lang)}（{missing_reason(s, lang)}）" if lang == "zh"
            else f"{label(s, plan, lang)} ({missing_reason(s, lang)})"
            for s in plan.states.values() if s.status != "done" and (s.task.shown or s.failures)]


def evaluation_args(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    """Passed when every sub-task of the question was completed from the tool results (or a fact was recalled)."""
    if recall_reply(messages) is not None:
        return {"passed": True, "reason": "answered from what the user said earlier"}
    plan = _attempt(messages)
    zh = plan.question.lang == "zh"
    if not plan.question.tasks:
        return {"passed": False, "reason": "这个问题超出了离线工具的能力，答案没有回答它。" if zh
                else "The question is beyond the offline tools; the answer does not answer it."}
    missing = _open(plan)
    if not missing:
        return {"passed": True, "reason": "问题的每个部分都已根据工具结果回答。" if zh
                else "Every part of the question was answered from the tool results."}
    return {"passed": False, "reason": ("还缺少：" + "；".join(missing) + "。") if zh
            else ("Missing: " + "; ".join(missing) + ".")}


def lesson_args(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    """A Lesson: why the attempt failed (its own evaluation of it), which sub-tasks stayed open, and what to try
    first next time."""
    evaluation = evaluation_args(messages)
    reason = "" if evaluation["passed"] else str(evaluation["reason"])
    plan = _attempt(messages)
    lang = plan.question.lang or "en"
    zh = lang == "zh"
    if not plan.question.tasks:
        lang = decompose(reason).lang if reason else lang
    tries = [describe_call(s.next_call, s.task, lang) for s in plan.states.values() if s.next_call is not None]
    failed = sorted({call.name for s in plan.states.values() for call, _ in s.failures if call.name})
    parts = [f"上一次的回答没有通过检查：{reason.rstrip('。.')}。" if zh else f"The last answer did not pass: "
             f"{reason.rstrip('。.')}."] if reason else []
    if failed:
        parts.append(f"失败过的工具：{'、'.join(failed)}，不要原样重试。" if zh
                     else f"Tools that failed: {', '.join(failed)}; do not retry them unchanged.")
    if tries:
        parts.append(f"下次先{'；'.join(tries)}。" if zh else f"Next time, first {'; '.join(tries)}.")
    turn = read_turn(messages)  # the calls a person rejected stay rejected in the next trial (decisions.py)
    rejected = [o.call for o in turn.observations if not o.ok and failure_kind(o.content, o.status) == "rejected"]
    if declined := declined_line([*turn.declined, *rejected], lang):
        parts.append(declined)
    parts.append("回答前逐项核对问题的每个部分都有工具结果支持。" if zh
                 else "Before answering, check that every part of the question is backed by a tool result.")
    return {"lesson": ("" if zh else " ").join(parts)}


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
    if p.get("part"):  # one part of a question about the documents: that part, still about the documents
        return f"{DOCUMENT_PREFIX[lang]}{p['documents']}"
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


def _independent(step: Step, question: Question) -> bool:
    tasks = [question.task(key) for key in step.keys]
    return bool(tasks) and all(t is not None and t.kind not in CHAIN_KINDS and not t.needs for t in tasks)


def fit_steps(steps: list[Step], question: Question, limit: int | None) -> list[Step]:
    """At most `limit` steps, as a planner told the limit writes them: independent look-ups with the same tool
    share a step (the last ones first), so that every part still has a step; a plan that cannot be fitted so
    (a chain longer than the limit) stays as it is."""
    steps = list(steps)
    while limit and len(steps) > limit:
        pairs = [i for i in range(len(steps) - 2, -1, -1)
                 if _independent(steps[i], question) and _independent(steps[i + 1], question)
                 and _tools_of(steps[i], question) == _tools_of(steps[i + 1], question)]
        if not pairs:
            break
        i = pairs[0]
        glue = "" if question.lang == "zh" else " "
        steps[i:i + 2] = [Step(f"{steps[i].goal}{glue}{steps[i + 1].goal}", (*steps[i].keys, *steps[i + 1].keys))]
    return steps


def _tools_of(step: Step, question: Question) -> set[str | None]:
    return {TOOL_OF.get(t.kind) for t in map(question.task, step.keys) if t is not None}


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


def plan_args(messages: Sequence[BaseMessage], limit: int | None = None) -> dict[str, Any]:
    """A Plan: no steps for what needs no tool (a recalled fact, small talk), else one step per sub-task group,
    within the request's step limit."""
    if recall_reply(messages) is not None:
        return {"steps": []}
    turn = read_turn(messages)
    first = reading(turn.question, turn.history)
    steps = fit_steps(plan_steps(first, turn.history), first.question, limit)
    return {"steps": [s.as_args(first.question, _hint(first, s)) for s in steps]}


def replan_args(messages: Sequence[BaseMessage], limit: int | None = None) -> dict[str, Any]:
    """A Replan: the steps whose sub-tasks are still open, without the tools that failed this turn."""
    turn = read_turn(messages)
    failing = [name for name in tools_to_avoid(turn) if name in BUILTIN_TOOLS]
    plan = make_plan(turn, BUILTIN_TOOLS - set(failing))
    question = plan.question
    lang, zh = question.lang, question.lang == "zh"
    open_keys = {k for k, s in plan.states.items() if s.status in ("pending", "waiting")}
    steps = plan_steps(reading(turn.question, turn.history), turn.history)
    kept = fit_steps([s for s in steps if open_keys & set(s.keys)], question, limit)
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


def responder_for(purpose: str | None, parameters: dict[str, Any] | None, limit: int | None = None) -> Responder:
    """The scripted responder of a request's purpose (a plan within its step `limit`), else one that fills
    `parameters` from the answer."""
    if purpose in ("plan", "replan"):
        return lambda messages: (plan_args if purpose == "plan" else replan_args)(messages, limit)
    return RESPONDERS.get(purpose or "") or answer_responder(parameters or {})
