"""`solve`: integrate the plan's step results and observations into the final answer."""

from __future__ import annotations

import time

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from reactgraph.nodes import prompts
from reactgraph.nodes.budget import exhausted
from reactgraph.nodes.closing import budget_close, close_turn, finish_turn, observations_digest
from reactgraph.nodes.context import Context
from reactgraph.nodes.driver import AgentServices, Node, Steps, dual_node
from reactgraph.nodes.plan_solve.plan import summary_notes
from reactgraph.nodes.plan_solve_state import (
    PlanSolveState,
    plan_of,
    plan_verdict,
    remaining,
    render_results,
    step_results_of,
)
from reactgraph.nodes.state import SolveReason, budget_stopped, final_answer_of, has_failed, stop_reason_of, usage_of


def solve_reason(state: PlanSolveState) -> SolveReason:
    """Why solving now: the plan is done, it was empty, or a budget, the format-error budget or the limit stopped it."""
    if budget_stopped(state):
        return "budget"
    if stop_reason_of(state) == "format":
        return "format"
    if remaining(state):
        return "limit"
    return "done" if plan_of(state) else "empty"


def make_solve(services: AgentServices) -> Node:
    """The solve node: one closing call over the step results (a failed run is settled without one)."""

    def solve(state: PlanSolveState, runtime: Runtime[Context], config: RunnableConfig) -> Steps:
        started = time.perf_counter()
        if (verdict := plan_verdict(state)) is not None:  # the plan named the parts: coverage by the model
            state = {**state, "reflection": verdict}
        if has_failed(state):
            return finish_turn(state, "solve", final_answer_of(state) or "The run failed.", reason="failure",
                               started=started, status="failed")
        reason = solve_reason(state)
        system = prompts.SOLVE_PROMPT.format(
            reason=prompts.SOLVE_REASONS[reason].format(max_iterations=runtime.context.max_iterations))
        notes = [*summary_notes(state),
                 prompts.STEP_RESULTS_SECTION.format(results=render_results(step_results_of(state)))]
        if exhausted(usage_of(state), runtime.context) is not None:
            gathered = (f"{render_results(step_results_of(state))}\n{observations_digest(state)}"
                        f"\nSteps not finished: {'; '.join(s['goal'] for s in remaining(state)) or '(none)'}")
            return (yield from budget_close(services, state, runtime, config, node="solve", started=started,
                                            system=prompts.SOLVE_PROMPT.format(reason=prompts.SOLVE_REASONS["budget"]),
                                            gathered=gathered, notes=notes))
        return (yield from close_turn(services, state, runtime, config, node="solve", system=system,
                                      reason=reason, started=started, notes=notes))

    return dual_node(solve, name="solve", models=services.models)
