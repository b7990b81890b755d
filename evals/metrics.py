"""What one run cost and how it failed, and the aggregates per graph and per tag.

Model calls and tokens are counted by a callback on every chat-model call the graph makes (think, reflect,
plan, finalize…), from the `usage_metadata` of the replies, else the one estimate (evals/spend.py). Tool calls
are the step records that name a tool. Success rates, failure modes and the paired tests count the runs the
checkers judge; the runs left out (infrastructure outcomes, cut runs: evals/outcomes.py) are counted beside
them; the costs (calls, tokens, time) count every run, for every run spent them.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from reactgraph.evals.outcomes import judged, pair_left_out, plumbing
from reactgraph.evals.stats import compare_pairs, detectable_difference, success_interval
from reactgraph.nodes.closing import RUN_STATUSES

FAILURE_MODES = ("error", "timed_out", "tool_hallucination", "invalid_args", "loop", "limit", "budget", "tool_error",
                 "early_stop")
TOOL_FAILURES = ("error", "timeout", "circuit_open", "rate_limited")


def tool_steps(steps: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of tool calls (whatever node of whatever graph made them; an approval decision is not one)."""
    return [s for s in steps if s.get("action") and s.get("node") != "approve"]


def _repeats_a_success(steps: list[dict[str, Any]]) -> bool:
    seen: set[tuple[str, str, str]] = set()
    for s in steps:
        if s.get("status") != "ok":
            continue
        key = (s["action"], json.dumps(s.get("action_input"), sort_keys=True, default=str), s.get("observation", ""))
        if key in seen:
            return True
        seen.add(key)
    return False


def failure_mode(success: bool, status: str | None, steps: list[dict[str, Any]], error: str | None) -> str | None:
    """Why a task failed, by the first cause that applies; None when it succeeded.

    error (the run raised or ended `failed`) → tool_hallucination (a call to a tool that does not exist) →
    invalid_args → loop (the same successful call repeated, or the loop guard stopped calls that did not fail) →
    limit (the iteration limit) → budget (a budget ran out) → tool_error (tools failed: errors, timeouts, open
    breakers) → early_stop (the graph answered, but not correctly, with no fault to blame).
    """
    if success:
        return None
    tools = tool_steps(steps)
    statuses = {s.get("status") for s in tools}
    if error or status == "failed":
        return "error"
    if "unknown_tool" in statuses:
        return "tool_hallucination"
    if "invalid_args" in statuses:
        return "invalid_args"
    # The guard stopping a retried *failing* call is the tools' failure (tool_error below), not a loop.
    stopped_for_repeat = any(s.get("node") == "finalize" and s.get("thought") == "repeated" for s in steps)
    if (stopped_for_repeat and not statuses & set(TOOL_FAILURES)) or _repeats_a_success(tools):
        return "loop"
    if status in ("limit_reached", "budget_exhausted"):
        return "limit"
    if status == "budget_exhausted":
        return "budget"
    if statuses & set(TOOL_FAILURES):
        return "tool_error"
    return "early_stop"


def step_counts(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Tool calls, their outcomes, and the tokens the step records carry."""
    tools = tool_steps(steps)
    outcomes = Counter(str(s.get("status")) for s in tools)
    # A call a budget did not allow ("not_run") was answered without running: it is no tool call.
    kinds = Counter(str(s.get("status")) for s in steps)
    return {"tool_calls": len(tools) - outcomes["not_run"], "tool_failures": sum(outcomes[k] for k in TOOL_FAILURES),
            "unknown_tool_calls": outcomes["unknown_tool"], "invalid_args_calls": outcomes["invalid_args"],
            "tool_statuses": dict(sorted(outcomes.items())),
            "step_tokens": sum(int(s.get("tokens") or 0) for s in steps),
            # plans made by the fallback (the whole question as one step), unusable text-protocol replies
            "fallback_plans": kinds["plan_fallback"], "format_errors": kinds["format_error"]}


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def aggregate(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Success rate (with its 95 % interval) of the judged runs, mean costs of all, and what was left out."""
    n = len(records)
    kept = judged(records)
    modes = Counter(r["failure_mode"] for r in kept if r["failure_mode"])
    interval = success_interval(kept)
    return {
        "runs": n,
        "tasks": len({r["task"] for r in records}),
        "success_rate": sum(r["success"] for r in kept) / len(kept) if kept else 0.0,
        "success_low": interval["low"],
        "success_high": interval["high"],
        "interval": interval["method"],
        "model_calls": _mean([r["model_calls"] for r in records]),
        "tool_calls": _mean([r["tool_calls"] for r in records]),
        "tool_failures": _mean([r["tool_failures"] for r in records]),
        "tokens_in": _mean([r["tokens_in"] for r in records]),
        "tokens_out": _mean([r["tokens_out"] for r in records]),
        "tokens": _mean([r["tokens"] for r in records]),
        "wall_s": _mean([r["wall_s"] for r in records]),
        "p95_wall_s": sorted(r["wall_s"] for r in records)[max(0, round(0.95 * n) - 1)] if n else 0.0,
        "iterations": _mean([r["iterations"] for r in records]),
        "failure_modes": dict(modes.most_common()),
        # How the runs ended, as the graphs report it (answered, partial, no_answer, limit_reached, …).
        "statuses": status_counts(records),
        # Of the answered runs, those no model's check backs (coverage "unchecked": docs/statuses.md).
        "answered_unchecked": sum(r.get("status") == "answered" and r.get("coverage_by") == "unchecked"
                                  for r in records),
        # judged, left_out, infra (by kind), cut, fallback_plans, unchecked, format_errors, format_stops
        **plumbing(records),
    }


def status_counts(records: list[dict[str, Any]]) -> dict[str, int]:
    """Runs per final status, in the order the statuses are defined (a run that raised counts as failed)."""
    counts = Counter(str(r.get("status") or "failed") for r in records)
    return {s: counts[s] for s in (*RUN_STATUSES, *sorted(set(counts) - set(RUN_STATUSES))) if counts[s]}


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per graph (in first-seen order) and per tag × graph aggregates, the paired test of every two graphs,
    and the models and seeds the records came from."""
    by_graph: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_tag: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for record in records:
        by_graph[record["graph"]].append(record)
        for tag in record["tags"] or ["untagged"]:
            by_tag[tag][record["graph"]].append(record)
    return {
        "models": sorted({r["model"] for r in records}),
        "seeds": sorted({int(r.get("seed") or 0) for r in records}),
        "graphs": {g: aggregate(rs) for g, rs in by_graph.items()},
        "pairs": _pairs(by_graph),
        "tags": {t: {g: aggregate(rs) for g, rs in graphs.items()} for t, graphs in sorted(by_tag.items())},
    }


def _pairs(by_graph: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The paired tests on the judged runs, each with the runs it left out and the smallest difference its size
    could detect."""
    pairs = compare_pairs({g: judged(rs) for g, rs in by_graph.items()})
    for pair in pairs:
        pair["left_out"] = pair_left_out(by_graph[pair["a"]], by_graph[pair["b"]])
        pair["detectable"] = detectable_difference(pair["runs"])
    return pairs
