"""The scripted reflection: a ReflectionVerdict derived from this turn's observations and the planner."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from .conversation import Turn, read_turn
from .coverage import plan_coverage
from .describe import describe_call
from .planner import BUILTIN_TOOLS, Plan, make_plan


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
