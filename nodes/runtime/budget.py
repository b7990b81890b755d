"""Run budgets: what a turn has used (tool calls, model tokens, cost) and whether a `Context` budget ran out.

Usage is counted once, where every call passes: the node driver adds up each model reply and tool result of a
node into the node's update (`usage`, added up by `add_usage`). The routers read it (`exhausted`) next to the
iteration limit; the closing node words the wrap-up (`wrap_up_note`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from reactgraph.errors import ReactGraphError
from reactgraph.models.token_estimate import usage_for
from reactgraph.nodes.state.context import Context
from reactgraph.nodes.state.records import Budget, BudgetKind, Usage
from reactgraph.tools import ToolResult

PRICES_ENV = "REACTGRAPH_PRICES"  # a JSON file {"<provider>:<model>": {"input": usd_per_m, "output": usd_per_m}}
MAX_PRICES_BYTES = 1_000_000


def add_usage(left: Mapping[str, Any] | None, right: Mapping[str, Any] | None) -> Usage:
    """The reducer of the `usage` channel: the sum of two usages, key by key."""
    total: dict[str, Any] = dict(left or {})
    for key, value in (right or {}).items():
        total[key] = round(total.get(key, 0) + value, 9) if isinstance(value, float) else total.get(key, 0) + value
    return Usage(**total)  # type: ignore[typeddict-item]


# USD per million (input, output) tokens, as published by the providers (2025); the offline model is free.
# Extend with `register_price` or a JSON file named by $REACTGRAPH_PRICES (its entries win).
PRICES: dict[str, tuple[float, float]] = {
    "offline": (0.0, 0.0),
    "openai:gpt-4o": (2.50, 10.00),
    "openai:gpt-4o-mini": (0.15, 0.60),
    "openai:gpt-4.1": (2.00, 8.00),
    "openai:gpt-4.1-mini": (0.40, 1.60),
    "openai:gpt-4.1-nano": (0.10, 0.40),
    "openai:o4-mini": (1.10, 4.40),
    "anthropic:claude-3-5-haiku-latest": (0.80, 4.00),
    "anthropic:claude-sonnet-4-0": (3.00, 15.00),
    "anthropic:claude-opus-4-0": (15.00, 75.00),
}


class InvalidPrices(ReactGraphError, ValueError):
    """The price file named by $REACTGRAPH_PRICES cannot be read or holds an entry that is not a price."""


def register_price(model: str, input_usd_per_m: float, output_usd_per_m: float) -> None:
    """Add or replace a model's price (USD per million input / output tokens), e.g. for a local server's model."""
    PRICES[model] = _price(model, {"input": input_usd_per_m, "output": output_usd_per_m})


def _price(model: str, entry: Any) -> tuple[float, float]:
    ok = isinstance(entry, Mapping) and all(
        isinstance(entry.get(k), int | float) and not isinstance(entry.get(k), bool) and 0 <= entry[k] <= 10_000
        for k in ("input", "output"))
    if not ok:
        raise InvalidPrices(f"price of {model[:100]!r} must be {{\"input\": usd_per_m, \"output\": usd_per_m}}, "
                            "each a number from 0 to 10000")
    return float(entry["input"]), float(entry["output"])


def _file_prices() -> dict[str, tuple[float, float]]:
    path = os.environ.get(PRICES_ENV, "").strip()
    if not path:
        return {}
    try:
        stat = Path(path).stat()
    except OSError:
        stat = None
    # read once per version of the file, not on every model call
    return _read_prices(path, (stat.st_mtime_ns, stat.st_size) if stat else None)


@lru_cache(maxsize=8)
def _read_prices(path: str, version: tuple[int, int] | None) -> dict[str, tuple[float, float]]:
    try:
        with Path(path).open("rb") as handle:  # bounded: a price list is small
            raw = handle.read(MAX_PRICES_BYTES + 1)
        if len(raw) > MAX_PRICES_BYTES:
            raise InvalidPrices(f"{PRICES_ENV}={path}: larger than {MAX_PRICES_BYTES:,} bytes")
        table = json.loads(raw)
    except (OSError, ValueError) as exc:
        if isinstance(exc, InvalidPrices):
            raise
        raise InvalidPrices(f"{PRICES_ENV}={path}: cannot be read as JSON ({type(exc).__name__})") from None
    if not isinstance(table, dict):
        raise InvalidPrices(f"{PRICES_ENV}={path}: expected a JSON object of model → price")
    return {str(model): _price(str(model), entry) for model, entry in table.items()}


def price_of(model: str) -> tuple[float, float] | None:
    """A model spec's (input, output) USD per million tokens; None when no table knows it."""
    table = {**PRICES, **_file_prices()}
    return table.get(model) or table.get(model.split(":", 1)[-1]) if model else None


def _reply_of(result: Any) -> AIMessage | None:
    """The model reply in a call's result: a chat reply, or the raw reply of a structured-output call."""
    if isinstance(result, AIMessage):
        return result
    raw = result.get("raw") if isinstance(result, dict) else None
    return raw if isinstance(raw, AIMessage) else None


def _reported(reply: AIMessage, request_input: Any) -> dict[str, Any]:
    """The reply's token usage: the provider's where it reported one, else the one estimate over prompt and reply,
    written onto the reply so that its step records it too (a reply's `usage_metadata` is what steps count)."""
    metadata: dict[str, Any] = dict(reply.usage_metadata or {})
    if metadata.get("total_tokens"):
        return metadata
    prompt = [m for m in request_input if isinstance(m, BaseMessage)] if isinstance(request_input, list) else []
    reply.usage_metadata = usage_for(prompt, reply)
    return dict(reply.usage_metadata)


def call_usage(request_input: Any, result: Any, model: str) -> Usage:
    """The usage of one call a node made: a tool call, or a model call's tokens (its reply's `usage_metadata`,
    else the project's estimate over prompt and reply) and their cost. A subgraph's result counts nothing here:
    its own nodes counted it."""
    if isinstance(result, ToolResult):
        return Usage(tool_calls=1)
    reply = _reply_of(result)
    if reply is None:
        return Usage()
    metadata = _reported(reply, request_input)
    tokens_in, tokens_out = int(metadata.get("input_tokens") or 0), int(metadata.get("output_tokens") or 0)
    tokens_in = tokens_in or max(int(metadata.get("total_tokens") or 0) - tokens_out, 0)
    price = price_of(model) or (0.0, 0.0)
    cost = (tokens_in * price[0] + tokens_out * price[1]) / 1_000_000
    return Usage(input_tokens=tokens_in, output_tokens=tokens_out, cost_usd=round(cost, 9))


def tokens_used(usage: Mapping[str, Any] | None) -> int:
    usage = usage or {}
    return int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))


def exhausted(usage: Mapping[str, Any] | None, context: Context) -> Budget | None:
    """The budget of `context` that `usage` has used up, or None (no budget set, or all have room).

    Tokens and cost are used up once reached (a further model call would go beyond). The tool-call budget is used
    up once a call had to be refused: a run whose calls fit exactly may still answer without another call."""
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
