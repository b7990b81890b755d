"""Where each graph goes next (ReAct, Plan-and-Solve, Reflexion): pure functions of state and context,
one per conditional edge."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from langchain_core.messages import AIMessage
from langgraph.graph import END
from langgraph.runtime import Runtime
from langgraph.types import Send

from reactgraph.nodes.plan_solve.state import REPLAN_AFTER, PlanSolveState, remaining
from reactgraph.nodes.reflexion.state import ReflexionState
from reactgraph.nodes.shared import budget
from reactgraph.nodes.shared.act import ToolCallTask
from reactgraph.nodes.shared.approve import approvals_for
from reactgraph.nodes.shared.context import Context, context_of
from reactgraph.nodes.shared.state import AgentState
from reactgraph.nodes.shared.transcript import last_ai, latest_tool_messages, pending_calls

# Whether a reply's calls need a person's approval before they run (nodes/shared/approve.py `approval_check`).
ApprovalCheck = Callable[[AgentState, Context], bool]


def act_tasks(state: AgentState, context: Context, calls: list[dict]) -> list[Send]:
    """One act task per tool call; the calls beyond what the budgets allow go as "not run" tasks (each call
    still gets its answer, so the conversation stays well-formed), the ones that fit run as usual. Calls the
    approve step answered (rejected) get no task; the ones it let through carry its approval."""
    answered = {m.tool_call_id for m in latest_tool_messages(state["messages"])}
    decided = approvals_for(state, last_ai(state["messages"]))
    approved, notes = set(decided["approved"]), decided["notes"]
    tasks = []
    for call, cut in zip(calls, budget.calls_cut(state.get("usage"), context, len(calls)), strict=True):
        if call["id"] in answered and call["id"]:
            continue
        task = ToolCallTask(call=call, not_run=budget.not_run_text(cut)) if cut else ToolCallTask(call=call)
        if call["id"] in approved:
            task["approved"] = True
            if note := notes.get(call["id"]):
                task["note"] = note
        tasks.append(Send("act", task))
    return tasks


def after_think(state: AgentState, runtime: Runtime[Context],
                approval: ApprovalCheck | None = None) -> list[Send] | Literal["approve", "finalize"]:
    """Each tool call goes to its own act task (run concurrently), by way of approve when a person must approve
    one of them first; a final answer or failure goes to finalize."""
    if state.get("status") == "failed":
        return "finalize"
    reply = state["messages"][-1]
    calls = pending_calls(reply) if isinstance(reply, AIMessage) else []
    context = context_of(runtime)
    if calls and approval is not None and approval(state, context):
        return "approve"
    return act_tasks(state, context, calls) or "finalize"


def after_approve(state: AgentState, runtime: Runtime[Context]) -> list[Send] | Literal["observe"]:
    """The calls a person let through (and those needing no approval) to act; straight to observe when every
    call was rejected, so the rejections are recorded and reflected on like any result."""
    reply = last_ai(state["messages"])
    return act_tasks(state, context_of(runtime), pending_calls(reply)) or "observe"


def after_round(state: AgentState, runtime: Runtime[Context]) -> Literal["reflect", "finalize"]:
    """A round's results to reflect on, unless a budget ran out (reflecting may call the model)."""
    return "finalize" if budget.exhausted(state.get("usage"), context_of(runtime)) else "reflect"


def after_reflect(state: AgentState, runtime: Runtime[Context]) -> Literal["think", "finalize"]:
    """Back to think, unless the iteration limit is reached, a budget ran out, a call repeated itself, or the
    verdict says done."""
    context = context_of(runtime)
    verdict = state.get("reflection") or {}
    if state.get("iteration", 0) >= context.max_iterations or budget.exhausted(state.get("usage"), context):
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


# --- Reflexion ----------------------------------------------------------------------------------------

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
