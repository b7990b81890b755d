"""`think`: one model call that decides between tool calls and a final answer."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, SystemMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.runtime import get_runtime
from langgraph.types import Overwrite

from nodes import prompts
from nodes.context import Context
from nodes.services import AgentServices
from nodes.state import AgentState, make_step
from nodes.transcript import last_human_index, pending_calls, text_of, tokens_of


def start_of_turn(state: AgentState) -> dict[str, Any]:
    """Per-turn fields to reset when a new question has arrived (empty dict inside a running turn)."""
    messages = state["messages"]
    i = last_human_index(messages)
    question_id = messages[i].id if i >= 0 else None
    if question_id is not None and question_id == state.get("turn_id"):
        return {}
    return {"turn_id": question_id, "iteration": 0, "steps": Overwrite([]), "reflection": None,
            "final_answer": None, "status": None}


def prompt_messages(state: AgentState, context: Context, reflection: dict | None) -> list[AnyMessage]:
    """System prompt (with the last reflection's note, if any) followed by the conversation."""
    system = context.system_prompt.format(now=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M"))
    note = (reflection or {}).get("note")
    if note:
        system += "\n" + prompts.REFLECTION_NOTE.format(note=note)
    return [SystemMessage(system), *state["messages"]]


def _with_steps(update: dict[str, Any], steps: list) -> dict[str, Any]:
    # On the first think of a turn the steps channel is being reset; new records must replace, not append.
    update["steps"] = Overwrite(steps) if "steps" in update else steps
    return update


def _is_empty(reply: AIMessage) -> bool:
    return not pending_calls(reply) and not text_of(reply).strip()


def _outcome(reply: AIMessage, iteration: int, reset: dict, started: float) -> dict[str, Any]:
    update: dict[str, Any] = {**reset, "iteration": iteration, "messages": [reply]}
    if _is_empty(reply):
        update["status"] = "failed"
        update["final_answer"] = "The model returned an empty reply twice; no answer could be produced."
        _with_steps(update, [make_step(step=iteration, node="think", status="empty_reply",
                                       observation=update["final_answer"], tokens=tokens_of(reply),
                                       latency_ms=(time.perf_counter() - started) * 1000)])
    return update


def _model_failure(exc: Exception, iteration: int, reset: dict, started: float) -> dict[str, Any]:
    reason = f"The model call failed: {type(exc).__name__}: {str(exc).strip()[:300]}"
    update = {**reset, "iteration": iteration, "status": "failed", "final_answer": reason}
    return _with_steps(update, [make_step(step=iteration, node="think", status="model_error", observation=reason,
                                          latency_ms=(time.perf_counter() - started) * 1000)])


def make_think(services: AgentServices) -> RunnableLambda:
    """The think node (sync and async), bound to the graph's services."""

    def prepare(state: AgentState, config: RunnableConfig):
        context: Context = get_runtime(Context).context
        reset = start_of_turn(state)
        reflection = None if reset else state.get("reflection")
        iteration = (0 if reset else state.get("iteration", 0)) + 1
        model = services.model(context)
        schemas = services.schemas(context, config)
        bound = model.bind_tools(schemas) if schemas else model
        return bound, prompt_messages(state, context, reflection), iteration, reset

    def think(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        started = time.perf_counter()
        bound, messages, iteration, reset = prepare(state, config)
        try:
            reply = bound.invoke(messages)
            if _is_empty(reply):  # one nudge before giving up: some models occasionally return nothing
                reply = bound.invoke([*messages, SystemMessage(prompts.EMPTY_REPLY_NUDGE)])
        except Exception as exc:  # noqa: BLE001 - a failing model ends the run with a reason, never a crash
            return _model_failure(exc, iteration, reset, started)
        return _outcome(reply, iteration, reset, started)

    async def athink(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        started = time.perf_counter()
        bound, messages, iteration, reset = prepare(state, config)
        try:
            reply = await bound.ainvoke(messages)
            if _is_empty(reply):
                reply = await bound.ainvoke([*messages, SystemMessage(prompts.EMPTY_REPLY_NUDGE)])
        except Exception as exc:  # noqa: BLE001
            return _model_failure(exc, iteration, reset, started)
        return _outcome(reply, iteration, reset, started)

    return RunnableLambda(think, athink, name="think")
