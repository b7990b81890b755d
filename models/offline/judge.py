"""Evaluation and Lesson of the scripted model: judge an attempt by its sub-tasks, and say what to change."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from .conversation import read_turn
from .describe import describe_call, label, missing_reason
from .planner import BUILTIN_TOOLS, Plan, make_plan
from .question import decompose
from .recall import recall_reply


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
    parts.append("回答前逐项核对问题的每个部分都有工具结果支持。" if zh
                 else "Before answering, check that every part of the question is backed by a tool result.")
    return {"lesson": ("" if zh else " ").join(parts)}
