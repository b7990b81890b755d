"""`solve`: integrate the plan's step results and observations into the final answer."""

from __future__ import annotations

import time
from typing import Any

from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda

from reactgraph.nodes.shared import prompts, text_protocol
from reactgraph.nodes.shared.closing import from_failure, from_reply, settle
from reactgraph.nodes.shared.context import Context, current_context
from reactgraph.models.loader import without_tool_use
from reactgraph.nodes.plan_solve.plan import with_summary
from reactgraph.nodes.plan_solve.state import PlanSolveState, remaining, render_results
from reactgraph.nodes.shared.services import AgentServices


def solve_reason(state: PlanSolveState) -> str:
    """Why solving now: the plan is done, it was empty, or the limit stopped it (steps not begun remain)."""
    if remaining(state):
        return "limit"
    return "done" if state.get("plan") else "empty"


def make_solve(services: AgentServices) -> RunnableLambda:
    """The solve node (sync and async)."""

    def prepare(state: PlanSolveState, config: RunnableConfig):
        context: Context = current_context()
        reason = solve_reason(state)
        system = prompts.SOLVE_PROMPT.format(
            results=render_results(state.get("step_results", [])),
            reason=prompts.SOLVE_REASONS[reason].format(max_iterations=context.max_iterations))
        history = state["messages"]
        model = services.model(context)
        if context.protocol == "text":
            history = text_protocol.as_text_messages(history)
        else:
            model = without_tool_use(model, services.schemas(context, config))
        return model, [SystemMessage(with_summary(system, state)), *history], reason

    def composed(state, reply: AIMessage, reason: str, started: float) -> dict[str, Any]:
        return from_reply(state, "solve", reply, reason, started)

    def failed(state, exc: Exception, reason: str, started: float) -> dict[str, Any]:
        return from_failure(state, "solve", exc, reason, started)

    def run_failed(state: PlanSolveState, started: float) -> dict[str, Any]:
        return settle(state, "solve", state.get("final_answer") or "The run failed.", "failed", "failure", started)

    def solve(state: PlanSolveState, config: RunnableConfig) -> dict[str, Any]:
        started = time.perf_counter()
        if state.get("status") == "failed":
            return run_failed(state, started)
        model, messages, reason = prepare(state, config)
        try:
            reply = model.invoke(messages)
        except Exception as exc:  # noqa: BLE001 - the turn still ends with an answer built from the records
            return failed(state, exc, reason, started)
        return composed(state, reply, reason, started)

    async def asolve(state: PlanSolveState, config: RunnableConfig) -> dict[str, Any]:
        started = time.perf_counter()
        if state.get("status") == "failed":
            return run_failed(state, started)
        model, messages, reason = prepare(state, config)
        try:
            reply = await model.ainvoke(messages)
        except Exception as exc:  # noqa: BLE001
            return failed(state, exc, reason, started)
        return composed(state, reply, reason, started)

    return RunnableLambda(solve, asolve, name="solve")
