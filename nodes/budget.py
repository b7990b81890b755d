"""Run budgets: what a turn has used (tool calls, model tokens, cost) and whether a `Context` budget ran out.

Usage is counted once, where every call passes: the model gateway counts each model call (tokens, cost from its
price table, seconds; models/gateway.py), the node driver each tool result, into the node's update (`usage`,
added up by `add_usage`). The routers read it (`exhausted`) next to the iteration limit; the closing node words
the wrap-up (`wrap_up_note`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from reactgraph.nodes.context import Context
from reactgraph.nodes.state import Budget, BudgetKind


def tokens_used(usage: Mapping[str, Any] | None) -> int:
    usage = usage or {}
    return int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))


def exhausted(usage: Mapping[str, Any] | None, context: Context) -> Budget | None:
    """The budget of `context` that `usage` has used up, or None (no budget set, or all have room).

    Tokens and cost are used up once reached (a further model call would go beyond). The tool-call budget is used
    up once a call had to be refused: a run whose calls fit exactly may still answer without another call."""
    if (context.max_model_tokens is None and context.max_cost_usd is None and context.max_tool_calls is None
            and context.max_model_seconds is None):  # the usual case, checked several times an iteration
        return None
    usage = usage or {}
    used: dict[BudgetKind, float] = {"max_model_tokens": tokens_used(usage),
                                     "max_cost_usd": round(float(usage.get("cost_usd", 0.0)), 6),
                                     "max_tool_calls": int(usage.get("tool_calls", 0)),
                                     "max_model_seconds": round(float(usage.get("model_seconds", 0.0)), 3)}
    for kind, spent in used.items():
        limit = getattr(context, kind)
        if limit is None or spent < limit:
            continue
        if kind != "max_tool_calls" or usage.get("tool_calls_refused"):
            return Budget(kind=kind, limit=limit, used=spent)
    return None


def tool_calls_left(usage: Mapping[str, Any] | None, context: Context) -> int | None:
    """How many more tool calls the tool-call budget allows (None: no such budget)."""
    if context.max_tool_calls is None:
        return None
    return max(context.max_tool_calls - int((usage or {}).get("tool_calls", 0)), 0)


def calls_cut(usage: Mapping[str, Any] | None, context: Context, count: int) -> list[Budget | None]:
    """For each of a reply's `count` tool calls, in order: the budget that does not let it run, or None."""
    spent, left = exhausted(usage, context), tool_calls_left(usage, context)
    over = Budget(kind="max_tool_calls", limit=context.max_tool_calls or 0, used=context.max_tool_calls or 0)
    return [spent or (over if left is not None and position >= left else None) for position in range(count)]


def remaining_context(usage: Mapping[str, Any] | None, context: Context) -> Context:
    """`context` with each budget reduced by what `usage` has spent (for a subgraph run, e.g. a Reflexion
    trial; only called while every budget still has room)."""
    usage = usage or {}
    changes: dict[str, Any] = {}
    if context.max_tool_calls is not None:
        changes["max_tool_calls"] = max(context.max_tool_calls - int(usage.get("tool_calls", 0)), 0)
    if context.max_model_tokens is not None:
        changes["max_model_tokens"] = max(context.max_model_tokens - tokens_used(usage), 1)
    if context.max_cost_usd is not None:
        changes["max_cost_usd"] = max(context.max_cost_usd - float(usage.get("cost_usd", 0.0)), 1e-9)
    if context.max_model_seconds is not None:
        changes["max_model_seconds"] = max(context.max_model_seconds - float(usage.get("model_seconds", 0.0)), 1e-3)
    return replace(context, **changes) if changes else context


_WHAT = {"max_tool_calls": "tool-call budget of {limit:g}", "max_model_tokens": "model-token budget of {limit:g}",
         "max_cost_usd": "cost budget of ${limit:g}", "max_model_seconds": "model-time budget of {limit:g}s"}
_WHAT_ZH = {"max_tool_calls": "工具调用预算（{limit:g} 次）", "max_model_tokens": "模型 token 预算（{limit:g}）",
            "max_cost_usd": "费用预算（${limit:g}）", "max_model_seconds": "模型时间预算（{limit:g} 秒）"}


def describe(budget: Mapping[str, Any], lang_zh: bool = False) -> str:
    """The budget in words: "tool-call budget of 3" (or "工具调用预算（3 次）")."""
    words, fallback = (_WHAT_ZH, "预算（{limit:g}）") if lang_zh else (_WHAT, "budget of {limit:g}")
    return words.get(str(budget.get("kind")), fallback).format(limit=budget.get("limit", 0))


def not_run_text(budget: Mapping[str, Any]) -> str:
    """The observation of a tool call the budget did not allow."""
    return f"not run: {describe(budget)} used up"


def wrap_up_note(budget: Mapping[str, Any], lang_zh: bool = False) -> str:
    """The final answer's closing line, in the question's language (zh/en): which budget stopped the run and
    that what it had not found is missing."""
    used = budget.get("used", 0)
    if lang_zh:
        return (f"（提前结束：{describe(budget, True)}已用完，已用 {used:g}。这个回答只依据此前收集到的信息；"
                "上面没有回答的部分都还缺少：来不及查询。）")
    return (f"(Stopped early: the {describe(budget)} is used up ({used:g} used). This answer uses only what was "
            "gathered by then; any part of the question not answered above is missing: it could not be looked up.)")
