"""`observe` for Plan-and-Solve: ReAct's observe, then the step is settled once its tool rounds are used up."""

from __future__ import annotations

import time
from typing import Any

from langgraph.runtime import Runtime

from reactgraph.nodes.context import Context
from reactgraph.nodes.plan_solve_state import (
    STEP_TOOL_ROUNDS,
    PlanSolveState,
    observed,
    settle,
    step_records,
    step_rounds_of,
)
from reactgraph.nodes.tool_round import observe


def observe_step(state: PlanSolveState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Record this round's tool results; at the step's round limit, close it with what it observed."""
    started = time.perf_counter()
    update = observe(state, runtime)
    if step_rounds_of(state) < STEP_TOOL_ROUNDS:
        return update  # the model gets another round to finish the step (or to try a fallback)
    records = [*step_records(state), *update["steps"]]
    closing = settle(state, result=observed(records), records=records, started=started)
    return {**update, **closing, "steps": [*update["steps"], *closing["steps"]]}
