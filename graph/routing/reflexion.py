"""Where the Reflexion graph goes: evaluate a trial, reflect on a failed one, or try again."""

from __future__ import annotations

from langgraph.graph import END
from langgraph.runtime import Runtime

from reactgraph.nodes import budget
from reactgraph.nodes.context import Context, context_of
from reactgraph.nodes.reflexion import ReflexionState, evaluation_of, trial_of
from reactgraph.nodes.state import budget_stopped, stop_reason_of, usage_of


def after_trial(state: ReflexionState) -> str:
    """A trial that ran out of budget or of the format-error budget ends the run (END: evaluating it would call the
    model); else evaluate."""
    return END if budget_stopped(state) or stop_reason_of(state) == "format" else "evaluate"


def after_evaluate(state: ReflexionState, runtime: Runtime[Context]) -> str:
    """A passed trial ends the run (END), as does a budget spent by the evaluation; a failed one is reflected on."""
    evaluation = evaluation_of(state)
    if (evaluation is not None and evaluation["passed"]) or budget.exhausted(usage_of(state), context_of(runtime)):
        return END
    return "self_reflect"


def after_self_reflect(state: ReflexionState, max_trials: int) -> str:
    """Another trial with the new lesson, unless `max_trials` have been run or the lesson used up a budget (END)."""
    return "trial" if trial_of(state) < max_trials and not budget_stopped(state) else END
