"""`execute_step`: one model round for the current plan step, with the gateway's tools bound.

A reply with tool calls goes to `act` (the same gateway, the same records as ReAct); a reply without them
closes the step, its text being the step's result.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from reactgraph.models.gateway import ModelCall, failure_line
from reactgraph.nodes import prompts, text_protocol
from reactgraph.nodes.context import Context
from reactgraph.nodes.conversation import last_human_index, pending_calls, tokens_of
from reactgraph.nodes.driver import AgentServices, Node, Steps, dual_node, log_fallback
from reactgraph.nodes.plan_solve.plan import summary_notes
from reactgraph.nodes.plan_solve_state import (
    PlanSolveState,
    StepOutcome,
    avoid_tools_of,
    cursor_of,
    render_plan,
    settle,
    step_records,
    step_results_of,
    step_rounds_of,
)
from reactgraph.nodes.prompts import for_model, with_notes
from reactgraph.nodes.state import iteration_of, make_step
from reactgraph.nodes.text_protocol import Attempts, ReactReply, corrections_left, read_reply, reply_without_repetition


def plan_notes(state: PlanSolveState) -> list[str]:
    """The summary and the plan with its current step, as notes sections: the plan's goals were written after
    reading tool output (by replan, or by plan from a summary), so they are data, never the system prompt."""
    plan, cursor = state["plan"], cursor_of(state)
    step = plan[cursor]
    return [*summary_notes(state), prompts.PLAN_SECTION.format(
        plan=render_plan(plan, step_results_of(state)), number=cursor + 1, total=len(plan),
        goal=step["goal"], hint=prompts.STEP_TOOL_HINT.format(tool=step["tool"]) if step.get("tool") else "")]


def step_request(state: PlanSolveState, context: Context, schemas: list[dict[str, Any]]) -> list[AnyMessage]:
    """System prompt (instructions only), the conversation up to the question with the plan in its notes, and
    this turn's tool rounds (what earlier steps found)."""
    messages = state["messages"]
    i = last_human_index(messages)
    system = prompts.EXECUTE_STEP_PROMPT.format(now=datetime.now(UTC).strftime("%Y-%m-%d %H:%M"))
    rounds = [m for m in messages[i + 1:] if isinstance(m, ToolMessage) or (isinstance(m, AIMessage) and m.tool_calls)]
    history: list[AnyMessage] = with_notes([*messages[:i + 1], *rounds], plan_notes(state))
    if context.protocol == "text":
        system += "\n\n" + text_protocol.instructions(schemas)
        history = text_protocol.as_text_messages(history)
    else:
        history = for_model(history)
    return [SystemMessage(system), *history]


def _iteration(state: PlanSolveState) -> int:
    # A step begun is one iteration, however many tool rounds it takes (see STEP_TOOL_ROUNDS).
    return iteration_of(state) + (1 if step_rounds_of(state) == 0 else 0)


def _settled(state: PlanSolveState, reply: AIMessage, started: float, usable: bool = True) -> dict[str, Any]:
    """A reply with tool calls goes to act; one without closes the step, its text being the step's result."""
    iteration = _iteration(state)
    if pending_calls(reply):
        return {"messages": [reply], "iteration": iteration, "step_rounds": step_rounds_of(state) + 1}
    current: PlanSolveState = {**state, "iteration": iteration}
    result = reply.text.strip()
    records = step_records(current)
    status: StepOutcome | None = "failed" if not usable or not (result or records) else None
    return {**settle(current, result=result or "(the model returned an empty reply)", records=records,
                     tokens=tokens_of(reply), started=started, status=status), "iteration": iteration}


def _text_settled(state: PlanSolveState, attempts: Attempts[ReactReply], schemas: list[dict[str, Any]],
                  started: float) -> dict[str, Any]:
    """A text-protocol step: the usable reply as an ordinary message (tool calls or the step's result); when the
    format-error budget ran out first, the step fails and the run goes on to solve (the `format` stop)."""
    errors = attempts.records("execute_step", lambda i: _iteration(state))
    if attempts.parsed is None:
        log_fallback("execute_step", "unusable_reply", attempts.errors[-1].problem)
        update = _settled(state, AIMessage(f"(unusable reply: {attempts.errors[-1].problem})"), started, False)
        return {**update, "steps": [*errors, *update["steps"]], "stop_reason": "format"}
    update = _settled(state, text_protocol.to_ai_message(attempts.parsed, attempts.text, schemas, attempts.reply),
                      started)
    return {**update, "steps": [*errors, *update.get("steps", [])]} if errors else update


def _failed(state: PlanSolveState, reason: str, started: float) -> dict[str, Any]:
    iteration = _iteration(state)
    record = make_step(step=iteration, node="execute_step", status="model_error", observation=reason,
                       thought=state["plan"][cursor_of(state)]["goal"],
                       latency_ms=(time.perf_counter() - started) * 1000)
    return {"iteration": iteration, "status": "failed", "final_answer": reason, "steps": [record], "step_rounds": 0}


def make_execute_step(services: AgentServices) -> Node:
    """The execute_step node: one model round with the step's tools (those replan avoids left out)."""

    def execute_step(state: PlanSolveState, runtime: Runtime[Context], config: RunnableConfig) -> Steps:
        started = time.perf_counter()
        context = runtime.context
        avoid = set(avoid_tools_of(state))
        schemas = [s for s in services.schemas(context, config) if s["function"]["name"] not in avoid]
        request = step_request(state, context, schemas)
        try:
            if context.protocol == "text":  # a malformed reply gets the format-error budget ReAct's think gets
                attempts = yield from read_reply(
                    ModelCall("step", request, stop=tuple(text_protocol.STOP)), text_protocol.parse_reply,
                    lambda problem: text_protocol.format_correction(problem, schemas), node="execute_step",
                    allowed=corrections_left(state, context.max_format_errors))
                return _text_settled(state, attempts, schemas, started)
            reply = reply_without_repetition((yield from ModelCall("step", request, tools=schemas)).message
                                             or AIMessage(""))
        except Exception as exc:  # noqa: BLE001 - after the retries (see model_retry): one line, status failed
            log_fallback("execute_step", "model_error_failed_step", exc)
            return _failed(state, failure_line(exc, runtime), started)
        return _settled(state, reply, started)

    return dual_node(execute_step, name="execute_step", models=services.models)
