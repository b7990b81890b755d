"""Where the Plan-and-Solve graph goes: the next plan step, a replan, a step's tool round, or solve."""

from __future__ import annotations

from typing import Literal

from langgraph.runtime import Runtime
from langgraph.types import Send

from reactgraph.graph.routing.tool_round import ApprovalCheck, ReadsState, act_tasks
from reactgraph.nodes import budget
from reactgraph.nodes.context import Context, context_of
from reactgraph.nodes.conversation import last_ai, latest_tool_messages, pending_calls
from reactgraph.nodes.plan_solve_state import REPLAN_AFTER, PlanSolveState, remaining, step_results_of, step_rounds_of
from reactgraph.nodes.state import has_failed, iteration_of, stop_reason_of, usage_of
from reactgraph.nodes.tool_commands import tool_goto

Onward = Literal["execute_step", "replan", "solve"]


def next_step(state: PlanSolveState, runtime: Runtime[Context]) -> Literal["execute_step", "solve"]:
    """The next plan step, unless the plan is done, the run failed, or the step limit, a budget or the format-error
    budget is reached."""
    return _next_step(state, context_of(runtime))


def _next_step(state: PlanSolveState, context: Context) -> Literal["execute_step", "solve"]:
    if has_failed(state) or not remaining(state) or budget.exhausted(usage_of(state), context):
        return "solve"
    if stop_reason_of(state) == "format":  # the format-error budget is spent: answer from what was gathered
        return "solve"
    return "execute_step" if iteration_of(state) < context.max_iterations else "solve"


def after_settled(state: PlanSolveState, context: Context) -> Onward:
    """A step was just closed: replan after a failed or surprising one (when enabled), else carry on."""
    results = step_results_of(state)
    stopped = has_failed(state) or stop_reason_of(state) == "format"  # no replan call after the budget ran out
    if context.replan and not stopped and results and results[-1]["status"] in REPLAN_AFTER:
        return "replan"
    return _next_step(state, context)


def after_execute(state: PlanSolveState, runtime: Runtime[Context], approval: ApprovalCheck | None = None,
                  reads_state: ReadsState | None = None) -> list[Send] | Onward | Literal["approve", "observe"]:
    """Each tool call of the step's round to its own act task (by way of approve when a person must approve one
    first); a closed step onwards. Calls a middleware's `after_model` answered itself get no task; when it
    answered them all, their answers are observed as the round's results (graph/middleware.py)."""
    if has_failed(state):
        return "solve"
    reply = last_ai(state["messages"])
    if step_rounds_of(state) > 0 and reply is not None:
        calls = pending_calls(reply)
        if approval is not None and calls and approval(state, context_of(runtime)):
            return "approve"
        tasks = act_tasks(state, context_of(runtime), calls, reads_state)
        return "observe" if not tasks and calls and state["messages"][-1] is not reply else tasks
    return after_settled(state, context_of(runtime))


def after_observe(state: PlanSolveState, runtime: Runtime[Context]) -> Onward:
    """Back to the step under way for another round, or onwards once observe has closed it; to solve once a
    budget ran out (the step under way is left unfinished)."""
    context = context_of(runtime)
    if budget.exhausted(usage_of(state), context) or "solve" in tool_goto(latest_tool_messages(state["messages"])):
        return "solve"  # a tool's Command may end the plan early (tool_commands.py); "execute_step" is the way on
    if step_rounds_of(state) > 0:
        return "execute_step"
    return after_settled(state, context)
