"""The `trajectory` checker: the tool calls a run made against a reference trajectory, judged by LangChain's
`agentevals` (`create_trajectory_match_evaluator`), not by code of ours.

    {"id": "rag-…", "question": "…", "pattern": "…",
     "checker": "trajectory", "params": {"calls": [{"name": "rag_search"}], "mode": "superset"}}

- `calls`: the reference calls, in order: `{"name": …, "args": {…}}` (args may be left out when `args` is "ignore");
- `mode` (agentevals' `trajectory_match_mode`): `strict` — the same calls in the same order; `unordered` — the same
  calls in any order; `subset` — no call outside the reference; `superset` (default) — at least the reference
  calls, others allowed;
- `args` (agentevals' `tool_args_match_mode`): `ignore` (default: only the tool names count, so a model that
  writes "Beijing" for "北京" is not penalised), `exact`, `subset`, `superset`.

The run's calls are its tool step records (any node, refused calls too), one assistant message each.
agentevals is in the `evals` extra; a suite that uses this checker without it is refused at load time, in one line.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

from langchain_core.messages import AIMessage

from reactgraph.evals.metrics import tool_steps

MODES = ("strict", "unordered", "subset", "superset")
ARGS_MODES = ("ignore", "exact", "subset", "superset")
MAX_CALLS = 50  # a reference trajectory is a handful of calls


def validate(params: dict[str, Any]) -> None:
    """ValueError (one line) for params the checker cannot use, or when agentevals is not installed."""
    calls = params.get("calls")
    if not isinstance(calls, list) or not 0 < len(calls) <= MAX_CALLS or not all(
            isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("args", {}), dict)
            for c in calls):
        raise ValueError(f"trajectory: 'calls' must be 1–{MAX_CALLS} objects with a 'name' (and 'args')")
    if params.get("mode", "superset") not in MODES:
        raise ValueError(f"trajectory: 'mode' must be one of {', '.join(MODES)}")
    if params.get("args", "ignore") not in ARGS_MODES:
        raise ValueError(f"trajectory: 'args' must be one of {', '.join(ARGS_MODES)}")
    if unknown := set(params) - {"calls", "mode", "args"}:
        raise ValueError(f"trajectory: unknown parameter(s) {', '.join(sorted(unknown))}")
    if importlib.util.find_spec("agentevals") is None:
        raise ValueError("the trajectory checker needs agentevals: pip install 'react-graph[evals]'")


@functools.cache
def _evaluator(mode: str, args: str) -> Any:
    from agentevals.trajectory.match import create_trajectory_match_evaluator

    return create_trajectory_match_evaluator(trajectory_match_mode=mode, tool_args_match_mode=args)


def as_messages(calls: list[tuple[str, dict[str, Any]]]) -> list[AIMessage]:
    """One assistant message per call: strict mode then compares them in order."""
    return [AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call-{i}"}])
            for i, (name, args) in enumerate(calls)]


def matches(made: list[tuple[str, dict[str, Any]]], reference: list[tuple[str, dict[str, Any]]],
            mode: str = "superset", args: str = "ignore") -> bool:
    """Whether the calls `made` match the `reference` calls under agentevals' `mode` and `args` matching."""
    result = _evaluator(mode, args)(outputs=as_messages(made), reference_outputs=as_messages(reference))
    return bool(result["score"])


def trajectory(answer: str, steps: list[dict[str, Any]], calls: list[dict[str, Any]], mode: str = "superset",
               args: str = "ignore") -> bool:
    """The checker: the run's tool calls match the reference `calls` (see the module's docstring)."""
    made = [(str(s["action"]), dict(s.get("action_input") or {})) for s in tool_steps(steps)]
    return matches(made, [(c["name"], dict(c.get("args") or {})) for c in calls], mode, args)
