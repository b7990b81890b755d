"""Where each graph goes next (ReAct, Plan-and-Solve, Reflexion): pure functions of state and context,
one per conditional edge."""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import AIMessage
from langgraph.graph import END
from langgraph.runtime import Runtime
from langgraph.types import Send

from reactgraph.nodes.plan_solve.state import REPLAN_AFTER, PlanSolveState, remaining
from reactgraph.nodes.reflexion.state import ReflexionState
from reactgraph.nodes.shared.act import ToolCallTask
from reactgraph.nodes.shared.context import Context, context_of
from reactgraph.nodes.shared.state import AgentState
from reactgraph.nodes.shared.transcript import pending_calls


def after_think(state: AgentState) -> list[Send] | Literal["finalize"]:
    """Each tool call goes to its own act task (run concurrently); a final answer or failure goes to finalize."""
    if state.get("status") == "failed":
        return "finalize"
    reply = state["messages"][-1]
    calls = pending_calls(reply) if isinstance(reply, AIMessage) else []
    return [Send("act", ToolCallTask(call=call)) for call in calls] or "finalize"


def after_reflect(state: AgentState, runtime: Runtime[Context]) -> Literal["think", "finalize"]:
    """Back to think, unless the iteration limit is reached, a call repeated itself, or the verdict says done."""
    context = context_of(runtime)
    verdict = state.get("reflection") or {}
    if state.get("iteration", 0) >= context.max_iterations:
        return "finalize"
    if verdict.get("repeated_call") or verdict.get("enough_information"):
        return "finalize"
    return "think"


# --- Plan-and-Solve ------------------------------------------------------------------------------------

Onward = Literal["execute_step", "replan", "solve"]


def next_step(state: PlanSolveState, runtime: Runtime[Context]) -> Literal["execute_step", "solve"]:
    """The next plan step, unless the plan is done, the run failed, or the step limit is reached."""
    return _next_step(state, context_of(runtime))


def _next_step(state: PlanSolveState, context: Context) -> Literal["execute_step", "solve"]:
    if state.get("status") == "failed" or not remaining(state):
        return "solve"
    return "execute_step" if state.get("iteration", 0) < context.max_iterations else "solve"


def after_settled(state: PlanSolveState, context: Context) -> Onward:
    """A step was just closed: replan after a failed or surprising one (when enabled), else carry on."""
    results = state.get("step_results") or []
    if context.replan and state.get("status") != "failed" and results and results[-1]["status"] in REPLAN_AFTER:
        return "replan"
    return _next_step(state, context)


def after_execute(state: PlanSolveState, runtime: Runtime[Context]) -> list[Send] | Onward:
    """Each tool call of the step's round to its own act task; a closed step onwards."""
    if state.get("status") == "failed":
        return "solve"
    reply = state["messages"][-1] if state["messages"] else None
    if state.get("step_rounds", 0) > 0 and isinstance(reply, AIMessage):
        return [Send("act", ToolCallTask(call=call)) for call in pending_calls(reply)]
    return after_settled(state, context_of(runtime))


def after_observe(state: PlanSolveState, runtime: Runtime[Context]) -> Onward:
    """Back to the step under way for another round, or onwards once observe has closed it."""
    if state.get("step_rounds", 0) > 0:
        return "execute_step"
    return after_settled(state, context_of(runtime))


# --- Reflexion ----------------------------------------------------------------------------------------

def after_evaluate(state: ReflexionState) -> str:
    """A passed trial ends the run (END); a failed one is reflected on."""
    return END if (state.get("evaluation") or {}).get("passed") else "self_reflect"


def after_self_reflect(state: ReflexionState, max_trials: int) -> str:
    """Another trial with the new lesson, unless `max_trials` have been run (END)."""
    return "trial" if state.get("trial", 0) < max_trials else END
