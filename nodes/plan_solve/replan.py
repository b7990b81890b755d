"""`replan`: after a failed or surprising step, the model revises the remaining steps (Context.replan)."""

from __future__ import annotations

import time
from typing import Any, cast

from langchain_core.messages import AnyMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from reactgraph.models.gateway import ModelCall, ModelReply
from reactgraph.nodes import prompts, text_protocol
from reactgraph.nodes.context import Context
from reactgraph.nodes.conversation import question_text, tokens_of
from reactgraph.nodes.driver import AgentServices, Node, Steps, dual_node, log_fallback
from reactgraph.nodes.plan_solve.plan import summary_notes, tool_list
from reactgraph.nodes.plan_solve_state import (
    PlanSolveState,
    PlanStepRecord,
    Replan,
    avoid_tools_of,
    cursor_of,
    parse_plan,
    plan_of,
    remaining,
    render_plan,
    render_results,
    replans_of,
    step_results_of,
)
from reactgraph.nodes.prompts import for_model, with_notes
from reactgraph.nodes.state import iteration_of, make_step
from reactgraph.nodes.text_protocol import corrections_left, read_reply


def _revised(state: PlanSolveState, replan: Replan, tokens: int, started: float) -> dict[str, Any]:
    done = plan_of(state)[:cursor_of(state)]
    steps = [cast(PlanStepRecord, s.model_dump()) for s in replan.steps if s.goal.strip()]
    avoid = sorted({*avoid_tools_of(state), *(t for t in replan.avoid_tools if t)})
    note = replan.reason or f"{len(steps)} step(s) remain"
    if avoid:
        note += f" (avoiding: {', '.join(avoid)})"
    record = make_step(step=iteration_of(state), node="replan", status="replan", thought=note,
                       observation=render_plan([*done, *steps], start=len(done)), tokens=tokens,
                       latency_ms=(time.perf_counter() - started) * 1000)
    return {"plan": [*done, *steps], "avoid_tools": avoid, "replans": replans_of(state) + 1,
            "steps": [record]}


def _kept(state: PlanSolveState, why: str, tokens: int, started: float) -> dict[str, Any]:
    # Replanning is advisory: when it cannot be had, the plan goes on as it was.
    record = make_step(step=iteration_of(state), node="replan", status="replan_failed",
                       thought=f"{why}; the plan is unchanged", observation=render_plan(remaining(state)),
                       tokens=tokens, latency_ms=(time.perf_counter() - started) * 1000)
    return {"replans": replans_of(state) + 1, "steps": [record]}


def _from_output(state: PlanSolveState, output: ModelReply, started: float) -> dict[str, Any]:
    tokens = tokens_of(output.message)
    if isinstance(parsed := output.parsed, Replan):
        return _revised(state, parsed, tokens, started)
    return _kept(state, f"revision unusable ({str(output.parsing_error or 'no structured output')[:200]})",
                 tokens, started)


def _text_replan(state: PlanSolveState, context: Context, request: list[AnyMessage], tools: str,
                 started: float) -> Steps:
    """Text protocol: the revision as a numbered list (text_plan), within what is left of the format-error budget;
    when it runs out the plan is kept and the run goes on to solve (the `format` stop)."""
    request = [SystemMessage(f"{request[0].text}\n\n{prompts.TEXT_REPLAN_FORMAT.format(tools=tools)}"),
               *text_protocol.as_text_messages(request[1:])]
    attempts = yield from read_reply(ModelCall("replan", request), parse_plan,
                                     lambda problem: prompts.TEXT_PLAN_CORRECTION.format(problem=problem, tools=tools),
                                     node="replan", allowed=corrections_left(state, context.max_format_errors))
    errors = attempts.records("replan", lambda i: iteration_of(state))
    if (parsed := attempts.parsed) is None:
        update = _kept(state, f"revision unusable ({attempts.errors[-1].problem}; format-error budget spent)", 0,
                       started)
        return {**update, "steps": [*errors, *update["steps"]], "stop_reason": "format"}
    revision = Replan(steps=parsed.steps, avoid_tools=parsed.avoid_tools, reason=parsed.reason)
    update = _revised(state, revision, tokens_of(attempts.reply), started)
    return {**update, "steps": [*errors, *update["steps"]]}


def make_replan(services: AgentServices) -> Node:
    """The replan node: one structured call (a numbered list in the text protocol) revising the remaining steps;
    advisory, so a failure keeps the plan."""

    def replan(state: PlanSolveState, runtime: Runtime[Context], config: RunnableConfig) -> Steps:
        started = time.perf_counter()
        context = runtime.context
        try:
            tools = tool_list(services.schemas(context, config))
            system = prompts.REPLAN_PROMPT.format(question=question_text(state["messages"]), tools=tools)
            # The plan and its results are model-written after reading tool output: notes, not the system prompt.
            notes = [*summary_notes(state),
                     prompts.STEP_RESULTS_SECTION.format(results=render_results(step_results_of(state))),
                     prompts.REMAINING_SECTION.format(
                         remaining=render_plan(plan_of(state), start=cursor_of(state)))]
            history = with_notes(state["messages"], notes)
            if context.protocol == "text":  # never json_schema: a text-only model writes the revision as a list
                return (yield from _text_replan(state, context, [SystemMessage(system), *history], tools, started))
            output = yield from ModelCall("replan", [SystemMessage(system), *for_model(history)], schema=Replan)
        except Exception as exc:  # noqa: BLE001 - replanning is advisory: the plan is kept as it is
            log_fallback("replan", "plan_kept", exc)
            return _kept(state, f"replanning failed ({type(exc).__name__})", 0, started)
        return _from_output(state, output, started)

    return dual_node(replan, name="replan", models=services.models)
