"""Plan-and-Solve's nodes: `plan`, `execute_step`, `observe_step`, `replan` and `solve` (their state and the
plan's text form are plan_solve_state.py's).

`plan` is one model call that breaks the question into ordered steps, each with a tool hint: structured output,
or a numbered list in the text protocol; a plan that cannot be made is the whole question as one step.
`execute_step` is one model round for the current plan step, with the gateway's tools bound: a reply with tool
calls goes to `act` (the same gateway, the same records as ReAct); a reply without them closes the step, its text
being the step's result. `observe_step` is the tool round's `observe`, then the step is settled once its tool
rounds are used up. `replan`, after a failed or surprising step, has the model revise the remaining steps
(Context.replan). `solve` integrates the plan's step results and observations into the final answer.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, cast

from langchain_core.messages import AIMessage, AnyMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from reactgraph.models.gateway import ModelCall, ModelReply, failure_line
from reactgraph.nodes import prompts, text_protocol
from reactgraph.nodes.budget import exhausted
from reactgraph.nodes.closing import budget_close, close_turn, finish_turn, observations_digest
from reactgraph.nodes.context import Context
from reactgraph.nodes.conversation import (
    current_question,
    last_human_index,
    latest_tool_messages,
    pending_calls,
    question_text,
    tokens_of,
)
from reactgraph.nodes.driver import AgentServices, Node, Steps, dual_node, log_fallback
from reactgraph.nodes.plan_solve_state import (
    STEP_TOOL_ROUNDS,
    Plan,
    PlanSolveState,
    PlanStepRecord,
    Replan,
    StepOutcome,
    avoid_tools_of,
    cursor_of,
    observed,
    parse_plan,
    plan_of,
    plan_verdict,
    remaining,
    render_plan,
    render_results,
    replans_of,
    settle,
    step_records,
    step_results_of,
    step_rounds_of,
)
from reactgraph.nodes.prompts import for_model, summary_section, with_notes
from reactgraph.nodes.state import (
    ExecutionStep,
    SolveReason,
    budget_stopped,
    final_answer_of,
    has_failed,
    iteration_of,
    make_step,
    stop_reason_of,
    summary_of,
    usage_of,
)
from reactgraph.nodes.text_protocol import Attempts, ReactReply, corrections_left, read_reply, reply_without_repetition
from reactgraph.nodes.tool_commands import tool_goto
from reactgraph.nodes.tool_round import observe_round

# --- plan ---------------------------------------------------------------------------------------------------

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


def _plan_from_output(state: PlanSolveState, output: ModelReply, started: float) -> dict[str, Any]:
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
    """Text protocol: the plan as a numbered list (parse_plan), within the format-error budget; when the budget
    runs out first the plan falls back to the whole question and the run goes on to solve (the `format` stop)."""
    history = text_protocol.as_text_messages(with_notes(state["messages"], summary_notes(state)))
    request = [SystemMessage(f"{system}\n\n{prompts.TEXT_PLAN_FORMAT.format(tools=tools)}"), *history]
    # The first model call of the turn: no earlier format error counts against it.
    attempts = yield from read_reply(ModelCall("plan", request, max_steps=context.max_iterations), parse_plan,
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
                                                now=prompts.prompt_date())
            if context.protocol == "text":  # never json_schema: a text-only model writes its plan as a list
                return (yield from _text_plan(state, context, system, tools, started))
            history = for_model(with_notes(state["messages"], summary_notes(state)))
            output = yield from ModelCall("plan", [SystemMessage(system), *history], schema=Plan,
                                          max_steps=context.max_iterations)
        except Exception as exc:  # noqa: BLE001 - a plan that cannot be made falls back to one whole-question step
            return _fallback(state, f"planning failed ({type(exc).__name__}: {exc})"[:300], 0, started)
        return _plan_from_output(state, output, started)

    return dual_node(plan, name="plan", models=services.models)



# --- execute_step -------------------------------------------------------------------------------------------

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
    system = prompts.EXECUTE_STEP_PROMPT.format(now=prompts.prompt_date())
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
        goals = tuple(step["goal"] for step in state["plan"][:cursor_of(state) + 1])  # the plan so far, as data
        try:
            if context.protocol == "text":  # a malformed reply gets the format-error budget ReAct's think gets
                attempts = yield from read_reply(
                    ModelCall("step", request, stop=tuple(text_protocol.STOP), plan_steps=goals),
                    text_protocol.parse_reply,
                    lambda problem: text_protocol.format_correction(problem, schemas), node="execute_step",
                    allowed=corrections_left(state, context.max_format_errors))
                return _text_settled(state, attempts, schemas, started)
            reply = reply_without_repetition(
                (yield from ModelCall("step", request, tools=schemas, plan_steps=goals)).message or AIMessage(""))
        except Exception as exc:  # noqa: BLE001 - after the retries (see model_retry): one line, status failed
            log_fallback("execute_step", "model_error_failed_step", exc)
            return _failed(state, failure_line(exc, runtime), started)
        return _settled(state, reply, started)

    return dual_node(execute_step, name="execute_step", models=services.models)



# --- observe_step -------------------------------------------------------------------------------------------

def observe_step(state: PlanSolveState, runtime: Runtime[Context]) -> dict[str, Any] | list[Any]:
    """Record this round's tool results (and apply its tools' Command updates, as ReAct's observe does); at the
    step's round limit, close it with what it observed."""
    started = time.perf_counter()
    update, writes, goto = observe_round(state, runtime)
    if step_rounds_of(state) >= STEP_TOOL_ROUNDS or "solve" in goto:  # a tool's Command may say: solve now
        records = [*step_records(state), *update["steps"]]
        closing = settle(state, result=observed(records), records=records, started=started)
        update = {**update, **closing, "steps": [*update["steps"], *closing["steps"]]}
    # below the limit the model gets another round to finish the step (or to try a fallback)
    return [update, *writes] if writes else update



# --- replan -------------------------------------------------------------------------------------------------

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


def _replan_from_output(state: PlanSolveState, output: ModelReply, started: float) -> dict[str, Any]:
    tokens = tokens_of(output.message)
    if isinstance(parsed := output.parsed, Replan):
        return _revised(state, parsed, tokens, started)
    return _kept(state, f"revision unusable ({str(output.parsing_error or 'no structured output')[:200]})",
                 tokens, started)


def _text_replan(state: PlanSolveState, context: Context, request: list[AnyMessage], tools: str,
                 started: float) -> Steps:
    """Text protocol: the revision as a numbered list (parse_plan), within what is left of the format-error budget;
    when it runs out the plan is kept and the run goes on to solve (the `format` stop)."""
    request = [SystemMessage(f"{request[0].text}\n\n{prompts.TEXT_REPLAN_FORMAT.format(tools=tools)}"),
               *text_protocol.as_text_messages(request[1:])]
    attempts = yield from read_reply(ModelCall("replan", request, max_steps=_steps_left(state, context)), parse_plan,
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


def _steps_left(state: PlanSolveState, context: Context) -> int:
    """The steps a revision may still have: the limit bounds the steps carried out, revised or not."""
    return max(1, context.max_iterations - cursor_of(state))


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
            output = yield from ModelCall("replan", [SystemMessage(system), *for_model(history)], schema=Replan,
                                          max_steps=_steps_left(state, context))
        except Exception as exc:  # noqa: BLE001 - replanning is advisory: the plan is kept as it is
            log_fallback("replan", "plan_kept", exc)
            return _kept(state, f"replanning failed ({type(exc).__name__})", 0, started)
        return _replan_from_output(state, output, started)

    return dual_node(replan, name="replan", models=services.models)



# --- solve --------------------------------------------------------------------------------------------------

def solve_reason(state: PlanSolveState) -> SolveReason:
    """Why solving now: the plan is done, it was empty, or a budget, the format-error budget or the limit stopped it."""
    if budget_stopped(state):
        return "budget"
    if stop_reason_of(state) == "format":
        return "format"
    if "solve" in tool_goto(latest_tool_messages(state["messages"])):
        return "tool"
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
