"""`execute_step`: one model round for the current plan step, with the gateway's tools bound.

A reply with tool calls goes to `act` (the same gateway, the same records as ReAct); a reply without them
closes the step, its text being the step's result.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

from reactgraph.nodes.shared import prompts, text_protocol
from reactgraph.nodes.shared.context import Context, current_context
from reactgraph.models.loader import describe_model_error
from reactgraph.nodes.plan_solve.plan import with_summary
from reactgraph.nodes.plan_solve.state import PlanSolveState, render_plan, settle, step_records
from reactgraph.nodes.shared.services import AgentServices
from reactgraph.nodes.shared.state import make_step
from reactgraph.nodes.shared.transcript import last_human_index, pending_calls, text_of, tokens_of


def step_request(state: PlanSolveState, context: Context, schemas: list[dict[str, Any]]) -> list[AnyMessage]:
    """System prompt (question, plan, current step), earlier turns, the goals so far, and this turn's tool rounds.

    The user message lists the goals up to the current one, so a step like "how many years since then?"
    keeps the subject its earlier steps named; the tool rounds after it are what earlier steps found.
    """
    messages = state["messages"]
    i = last_human_index(messages)
    plan, cursor = state["plan"], state.get("cursor", 0)
    step = plan[cursor]
    system = prompts.EXECUTE_STEP_PROMPT.format(
        question=text_of(messages[i]).strip() if i >= 0 else "", goal=step["goal"],
        plan=render_plan(plan, state.get("step_results", [])), number=cursor + 1, total=len(plan),
        hint=prompts.STEP_TOOL_HINT.format(tool=step["tool"]) if step.get("tool") else "",
        now=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M"))
    rounds = [m for m in messages[i + 1:] if isinstance(m, ToolMessage) or (isinstance(m, AIMessage) and m.tool_calls)]
    goals = HumanMessage("\n".join(s["goal"] for s in plan[:cursor + 1]))
    history: list[AnyMessage] = [*messages[:max(i, 0)], goals, *rounds]
    if context.protocol == "text":
        system += "\n\n" + text_protocol.instructions(schemas)
        history = text_protocol.as_text_messages(history)
    return [SystemMessage(with_summary(system, state)), *history]


def _text_reply(reply: AIMessage, schemas: list[dict[str, Any]]) -> tuple[AIMessage, bool]:
    """A text-protocol reply as an ordinary message (tool calls or the step's result); False if unusable."""
    raw = text_of(reply)
    parsed = text_protocol.parse_reply(raw)
    if parsed.problem is not None:  # no correction round here: the step fails and replan (if on) revisits it
        return AIMessage(f"(unusable reply: {parsed.problem}) {raw[:500]}".strip()), False
    return text_protocol.to_ai_message(parsed, raw, schemas, reply), True


def _iteration(state: PlanSolveState) -> int:
    # A step begun is one iteration, however many tool rounds it takes (see STEP_TOOL_ROUNDS).
    return state.get("iteration", 0) + (1 if state.get("step_rounds", 0) == 0 else 0)


def make_execute_step(services: AgentServices) -> RunnableLambda:
    """The execute_step node (sync and async)."""

    def prepare(state: PlanSolveState, config: RunnableConfig) -> tuple[Runnable, BaseChatModel, list, list]:
        context: Context = current_context()
        avoid = set(state.get("avoid_tools") or ())
        schemas = [s for s in services.schemas(context, config) if s["function"]["name"] not in avoid]
        model = services.model(context)
        request = step_request(state, context, schemas)
        if context.protocol == "text":
            return model.bind(stop=text_protocol.STOP), model, schemas, request
        return (model.bind_tools(schemas) if schemas else model), model, schemas, request

    def settled(state: PlanSolveState, reply: AIMessage, schemas: list, started: float) -> dict[str, Any]:
        iteration = _iteration(state)
        usable = True
        if current_context().protocol == "text":
            reply, usable = _text_reply(reply, schemas)
        if pending_calls(reply):
            return {"messages": [reply], "iteration": iteration, "step_rounds": state.get("step_rounds", 0) + 1}
        current = {**state, "iteration": iteration}
        result = text_of(reply).strip()
        records = step_records(current)
        status = "failed" if not usable or not (result or records) else None
        return {**settle(current, result=result or "(the model returned an empty reply)", records=records,
                         tokens=tokens_of(reply), started=started, status=status), "iteration": iteration}

    def failed(state: PlanSolveState, exc: Exception, model: BaseChatModel, started: float) -> dict[str, Any]:
        reason = describe_model_error(exc, model)
        iteration = _iteration(state)
        record = make_step(step=iteration, node="execute_step", status="model_error", observation=reason,
                           thought=state["plan"][state.get("cursor", 0)]["goal"],
                           latency_ms=(time.perf_counter() - started) * 1000)
        return {"iteration": iteration, "status": "failed", "final_answer": reason, "steps": [record],
                "step_rounds": 0}

    def execute_step(state: PlanSolveState, config: RunnableConfig) -> dict[str, Any]:
        started = time.perf_counter()
        bound, model, schemas, request = prepare(state, config)
        try:
            reply = bound.invoke(request)
        except Exception as exc:  # noqa: BLE001 - a failing model ends the run with a reason, never a crash
            return failed(state, exc, model, started)
        return settled(state, reply, schemas, started)

    async def aexecute_step(state: PlanSolveState, config: RunnableConfig) -> dict[str, Any]:
        started = time.perf_counter()
        bound, model, schemas, request = prepare(state, config)
        try:
            reply = await bound.ainvoke(request)
        except Exception as exc:  # noqa: BLE001
            return failed(state, exc, model, started)
        return settled(state, reply, schemas, started)

    return RunnableLambda(execute_step, aexecute_step, name="execute_step")
