"""Deterministic checks on the step records: repeated calls, failures, empty findings."""

from __future__ import annotations

import json
from collections.abc import Sequence

from reactgraph.nodes.state import ExecutionStep, ReflectionVerdict


def _call_key(step: ExecutionStep) -> str:
    return f"{step['action']}:{json.dumps(step['action_input'], sort_keys=True, ensure_ascii=False, default=str)}"


def tool_steps(steps: Sequence[ExecutionStep], iteration: int | None = None) -> list[ExecutionStep]:
    return [s for s in steps if s["node"] == "act" and (iteration is None or s["step"] == iteration)]


def repeated_calls(steps: Sequence[ExecutionStep], iteration: int) -> list[str]:
    """Calls of this round that repeat an earlier round's call (same tool, same arguments, same result)."""
    earlier = {(_call_key(s), s["observation"]) for s in tool_steps(steps) if s["step"] < iteration}
    return [s["action"] or "" for s in tool_steps(steps, iteration) if (_call_key(s), s["observation"]) in earlier]


def found_nothing(step: ExecutionStep) -> bool:
    """A successful call whose result says it found nothing (the built-in tools answer `"found": false`)."""
    try:
        data = json.loads(step["observation"])
    except (TypeError, ValueError):
        return False
    return isinstance(data, dict) and data.get("found") is False


def rules_verdict(steps: Sequence[ExecutionStep], iteration: int) -> ReflectionVerdict:
    """A verdict from the records alone: no model call, fully predictable."""
    latest = tool_steps(steps, iteration)
    failed = [s["action"] or "" for s in latest if s["status"] != "ok"]
    empty = [s["action"] or "" for s in latest if s["status"] == "ok" and found_nothing(s)]
    repeated = repeated_calls(steps, iteration)
    notes = []
    if repeated:
        notes.append(f"Repeated call to {', '.join(sorted(set(repeated)))} with no new information: stop repeating.")
    if failed:
        notes.append(f"{', '.join(failed)} failed: use another tool or different arguments.")
    if empty:
        notes.append(f"{', '.join(empty)} found nothing: rephrase the query or try another tool.")
    return ReflectionVerdict(enough_information=False, tool_error=bool(failed),
                             need_other_tool=bool(failed or empty), repeated_call=bool(repeated),
                             note=" ".join(notes))
