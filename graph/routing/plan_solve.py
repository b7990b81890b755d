"""Where the Plan-and-Solve graph goes: the next plan step, a replan, a step's tool round, or solve."""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime
from langgraph.types import Send

from reactgraph.graph.routing.tool_round import ApprovalCheck, act_tasks
from reactgraph.nodes.conversation.transcript import pending_calls
from reactgraph.nodes.plan_solve.state import REPLAN_AFTER, PlanSolveState, remaining
from reactgraph.nodes.runtime import budget
from reactgraph.nodes.state.context import Context, context_of

Onward = Literal["execute_step", "replan", "solve"]


def next_step(state: PlanSolveState, runtime: Runtime[Context]) -> Literal["execute_step", "solve"]:
    """The next plan step, unless the plan is done, the run failed, or the step limit is reached."""
    return _next_step(state, context_of(runtime))


def _next_step(state: PlanSolveState, context: Context) -> Literal["execute_step", "solve"]:
    if state.get("status") == "failed" or not remaining(state) or budget.exhausted(state.get("usage"), context):
        return "solve"
    return "execute_step" if state.get("iteration", 0) < context.max_iterations else "solve"


def after_settled(state: PlanSolveState, context: Context) -> Onward:
    """A step was just closed: replan after a failed or surprising one (when enabled), else carry on."""
    results = state.get("step_results") or []
    if context.replan and state.get("status") != "failed" and results and results[-1]["status"] in REPLAN_AFTER:
        return "replan"
    return _next_step(state, context)


def after_execute(state: PlanSolveState, runtime: Runtime[Context],
                  approval: ApprovalCheck | None = None) -> list[Send] | Onward | Literal["approve"]:
    """Each tool call of the step's round to its own act task (by way of approve when a person must approve one
    first); a closed step onwards."""
    if state.get("status") == "failed":
        return "solve"
    reply = state["messages"][-1] if state["messages"] else None
    if state.get("step_rounds", 0) > 0 and isinstance(reply, AIMessage):
        if approval is not None and pending_calls(reply) and approval(state, context_of(runtime)):
            return "approve"
        return act_tasks(state, context_of(runtime), pending_calls(reply))
    return after_settled(state, context_of(runtime))


def after_observe(state: PlanSolveState, runtime: Runtime[Context]) -> Onward:
    """Back to the step under way for another round, or onwards once observe has closed it; to solve once a
    budget ran out (the step under way is left unfinished)."""
    context = context_of(runtime)
    if budget.exhausted(state.get("usage"), context):
        return "solve"
    if state.get("step_rounds", 0) > 0:
        return "execute_step"
    return after_settled(state, context)
