"""`plan`: one model call that breaks the question into ordered steps, each with a tool hint: structured output,
or a numbered list in the text protocol."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from reactgraph.models.gateway import ModelCall, ModelReply
from reactgraph.nodes import prompts, text_protocol
from reactgraph.nodes.context import Context
from reactgraph.nodes.conversation import current_question, tokens_of
from reactgraph.nodes.driver import AgentServices, Node, Steps, dual_node, log_fallback
from reactgraph.nodes.plan_solve_state import Plan, PlanSolveState, parse_plan, render_plan
from reactgraph.nodes.prompts import for_model, summary_section, with_notes
from reactgraph.nodes.state import ExecutionStep, make_step, summary_of
from reactgraph.nodes.text_protocol import read_reply


def tool_list(schemas: list[dict[str, Any]]) -> str:
    return ", ".join(s["function"]["name"] for s in schemas) or "(none)"


def summary_notes(state: PlanSolveState) -> list[str]:
    """The session summary as a notes section (it goes into the data message, never the system prompt)."""
    return summary_section(summary_of(state))


def _settle(state: PlanSolveState, steps: list[dict[str, Any]], status: str, note: str, tokens: int,
            started: float, parts: list[str] | None = None,
            errors: Sequence[ExecutionStep] = ()) -> dict[str, Any]:
    record = make_step(step=0, node="plan", status=status, thought=note, observation=render_plan(steps),
                       tokens=tokens, latency_ms=(time.perf_counter() - started) * 1000)
    return {"plan": steps, "plan_parts": parts or [], "steps": [*errors, record]}


def _from_output(state: PlanSolveState, output: ModelReply, started: float) -> dict[str, Any]:
    parsed = output.parsed
    tokens = tokens_of(output.message)
    if isinstance(parsed, Plan):
        steps = [s.model_dump() for s in parsed.steps if s.goal.strip()]
        parts = [p.strip() for p in parsed.parts if p.strip()]
        return _settle(state, steps, "plan", f"{len(steps)} step(s)", tokens, started, parts)
    reason = str(output.parsing_error or "no structured output")[:200]
    return _fallback(state, f"plan unusable ({reason})", tokens, started)


def _fallback(state: PlanSolveState, why: str, tokens: int, started: float,
              errors: Sequence[ExecutionStep] = ()) -> dict[str, Any]:
    # One step that is the whole question: Plan-and-Solve degrades to a single tool-using round, not a crash.
    log_fallback("plan", "plan_one_step", why)
    question = current_question(state["messages"])
    steps = [{"goal": question.text.strip(), "tool": None}] if question is not None else []
    return _settle(state, steps, "plan_fallback", f"{why}; planned the whole question as one step", tokens, started,
                   errors=errors)


def _text_plan(state: PlanSolveState, context: Context, system: str, tools: str, started: float) -> Steps:
    """Text protocol: the plan as a numbered list (text_plan), within the format-error budget; when the budget
    runs out first the plan falls back to the whole question and the run goes on to solve (the `format` stop)."""
    history = text_protocol.as_text_messages(with_notes(state["messages"], summary_notes(state)))
    request = [SystemMessage(f"{system}\n\n{prompts.TEXT_PLAN_FORMAT.format(tools=tools)}"), *history]
    # The first model call of the turn: no earlier format error counts against it.
    attempts = yield from read_reply(ModelCall("plan", request), parse_plan,
                                     lambda problem: prompts.TEXT_PLAN_CORRECTION.format(problem=problem, tools=tools),
                                     node="plan", allowed=context.max_format_errors)
    errors = attempts.records("plan", lambda i: 0)
    if attempts.parsed is None:
        why = f"plan unusable ({attempts.errors[-1].problem}; format-error budget spent)"
        return {**_fallback(state, why, 0, started, errors), "stop_reason": "format"}
    steps = [s.model_dump() for s in attempts.parsed.steps]
    return _settle(state, steps, "plan", f"{len(steps)} step(s)", tokens_of(attempts.reply), started,
                   attempts.parsed.parts, errors)


def make_plan(services: AgentServices) -> Node:
    """The plan node: one structured call (a numbered list in the text protocol); a plan that cannot be made is the
    whole question as one step."""

    def plan(state: PlanSolveState, runtime: Runtime[Context], config: RunnableConfig) -> Steps:
        started = time.perf_counter()
        context = runtime.context
        try:
            tools = tool_list(services.schemas(context, config))
            system = prompts.PLAN_PROMPT.format(tools=tools, max_steps=context.max_iterations,
                                                now=datetime.now(UTC).strftime("%Y-%m-%d %H:%M"))
            if context.protocol == "text":  # never json_schema: a text-only model writes its plan as a list
                return (yield from _text_plan(state, context, system, tools, started))
            history = for_model(with_notes(state["messages"], summary_notes(state)))
            output = yield from ModelCall("plan", [SystemMessage(system), *history], schema=Plan)
        except Exception as exc:  # noqa: BLE001 - a plan that cannot be made falls back to one whole-question step
            return _fallback(state, f"planning failed ({type(exc).__name__}: {exc})"[:300], 0, started)
        return _from_output(state, output, started)

    return dual_node(plan, name="plan", models=services.models)
