"""`finalize`: settle the turn's answer — the model's own, or one composed from what was observed."""

from __future__ import annotations

import time
from typing import Any

from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda

from reactgraph.nodes.shared import prompts, text_protocol
from reactgraph.nodes.shared.closing import from_failure, from_reply, settle
from reactgraph.nodes.shared.context import Context, current_context
from reactgraph.models.loader import without_tool_use
from reactgraph.nodes.shared.services import AgentServices
from reactgraph.nodes.shared.state import AgentState
from reactgraph.nodes.shared.transcript import pending_calls, text_of


def stop_reason(state: AgentState, context: Context) -> str:
    """Why the loop stopped without the model's own answer: limit, repeated call, or enough information."""
    if state.get("iteration", 0) >= context.max_iterations:
        return "limit"
    if (state.get("reflection") or {}).get("repeated_call"):
        return "repeated"
    return "enough"


def make_finalize(services: AgentServices) -> RunnableLambda:
    """The finalize node (sync and async)."""

    def settled(state: AgentState, started: float) -> dict[str, Any] | None:
        """The turn's outcome when no model call is needed (the model answered, or the run failed)."""
        if state.get("status") == "failed":
            answer = state.get("final_answer") or "The run failed."
            return settle(state, "finalize", answer, "failed", "failure", started)
        reply = state["messages"][-1]
        if isinstance(reply, AIMessage) and not pending_calls(reply) and text_of(reply).strip():
            return settle(state, "finalize", text_of(reply).strip(), "answered", "model answered", started)
        return None

    def prepare(state: AgentState, config: RunnableConfig):
        context: Context = current_context()
        reason = stop_reason(state, context)
        instruction = prompts.FINALIZE_PROMPT.format(
            reason=prompts.FINALIZE_REASONS[reason].format(max_iterations=context.max_iterations))
        history = state["messages"]
        model = services.model(context)
        if context.protocol == "text":  # a text-only model reads tool rounds as Thought/Action/Observation
            history = text_protocol.as_text_messages(history)
        else:  # no tools to call; Anthropic still needs them defined when the history holds tool calls
            model = without_tool_use(model, services.schemas(context, config))
        return model, [SystemMessage(instruction), *history], reason

    def composed(state, reply: AIMessage, reason: str, started: float) -> dict[str, Any]:
        return from_reply(state, "finalize", reply, reason, started)

    def failed(state, exc: Exception, reason: str, started: float) -> dict[str, Any]:
        return from_failure(state, "finalize", exc, reason, started)

    def finalize(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        started = time.perf_counter()
        if (done := settled(state, started)) is not None:
            return done
        model, messages, reason = prepare(state, config)
        try:
            reply = model.invoke(messages)
        except Exception as exc:  # noqa: BLE001 - the turn still ends with an answer built from the records
            return failed(state, exc, reason, started)
        return composed(state, reply, reason, started)

    async def afinalize(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        started = time.perf_counter()
        if (done := settled(state, started)) is not None:
            return done
        model, messages, reason = prepare(state, config)
        try:
            reply = await model.ainvoke(messages)
        except Exception as exc:  # noqa: BLE001
            return failed(state, exc, reason, started)
        return composed(state, reply, reason, started)

    return RunnableLambda(finalize, afinalize, name="finalize")
