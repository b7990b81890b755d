"""Where the Reflexion graph goes: evaluate a trial, reflect on a failed one, or try again."""

from __future__ import annotations

from langgraph.graph import END
from langgraph.runtime import Runtime

from reactgraph.nodes.reflexion.state import ReflexionState
from reactgraph.nodes.runtime import budget
from reactgraph.nodes.state.context import Context, context_of


def after_trial(state: ReflexionState) -> str:
    """A trial that ran out of budget ends the run (END: evaluating it would call the model); else evaluate."""
    return END if state.get("stop_reason") == "budget" else "evaluate"


def after_evaluate(state: ReflexionState, runtime: Runtime[Context]) -> str:
    """A passed trial ends the run (END), as does a budget spent by the evaluation; a failed one is reflected on."""
    if (state.get("evaluation") or {}).get("passed") or budget.exhausted(state.get("usage"), context_of(runtime)):
        return END
    return "self_reflect"


def after_self_reflect(state: ReflexionState, max_trials: int) -> str:
    """Another trial with the new lesson, unless `max_trials` have been run or the lesson used up a budget (END)."""
    return "trial" if state.get("trial", 0) < max_trials and state.get("stop_reason") != "budget" else END
