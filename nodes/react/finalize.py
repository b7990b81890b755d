"""`finalize`: settle the turn's answer — the model's own, or one composed from what was observed."""

from __future__ import annotations

import time
from typing import cast

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from reactgraph.nodes import prompts
from reactgraph.nodes.budget import exhausted
from reactgraph.nodes.closing import (
    budget_close,
    close_turn,
    finish_turn,
    observations_digest,
    settle_answer,
)
from reactgraph.nodes.context import Context
from reactgraph.nodes.conversation import pending_calls, tokens_of
from reactgraph.nodes.driver import AgentServices, Node, Steps, dual_node
from reactgraph.nodes.state import (
    AgentState,
    FinalizeReason,
    budget_stopped,
    final_answer_of,
    has_failed,
    iteration_of,
    stop_reason_of,
    usage_of,
    verdict_of,
)
from reactgraph.nodes.text_protocol import answer_without_markup, without_repetition


def stop_reason(state: AgentState, context: Context) -> FinalizeReason:
    """Why the loop stopped without the model's own answer: budget, format errors, limit, repeated call, or enough
    information."""
    if budget_stopped(state):
        return "budget"
    if stop_reason_of(state) == "format":
        return "format"
    if iteration_of(state) >= context.max_iterations:
        return "limit"
    if (verdict := verdict_of(state)) and verdict["repeated_call"]:
        return "repeated"
    return "enough"


def model_answer(state: AgentState) -> str | None:
    """The model's own answer: its last reply when that calls no tool, its loops cut, without ReAct markup
    (`Thought: … Final Answer: …`, a wrapper fence), which is not part of the answer a user reads; None when there
    is none."""
    reply = state["messages"][-1]
    if isinstance(reply, AIMessage) and not pending_calls(reply):
        return answer_without_markup(without_repetition(reply.text)) or None
    return None


def make_finalize(services: AgentServices) -> Node:
    """The finalize node: the model's answer as it is, else one closing call over what was observed."""

    def finalize(state: AgentState, runtime: Runtime[Context], config: RunnableConfig) -> Steps:
        started = time.perf_counter()
        if has_failed(state):
            return finish_turn(state, "finalize", final_answer_of(state) or "The run failed.", reason="failure",
                               started=started, status="failed")
        if (answer := model_answer(state)) is not None:
            reply = cast(AIMessage, state["messages"][-1])  # model_answer found the model's own reply there
            # The model's tokens are counted where its answer is recorded, as observe does for a tool round.
            return (yield from settle_answer(services, state, runtime, answer, node="finalize",
                                             reason="model answered", started=started, reply=reply,
                                             tokens=tokens_of(reply)))
        if exhausted(usage_of(state), runtime.context) is not None:
            return (yield from budget_close(services, state, runtime, config, node="finalize", started=started,
                                            system=prompts.FINALIZE_PROMPT.format(
                                                reason=prompts.FINALIZE_REASONS["budget"]),
                                            gathered=observations_digest(state)))
        reason = stop_reason(state, runtime.context)
        system = prompts.FINALIZE_PROMPT.format(
            reason=prompts.FINALIZE_REASONS[reason].format(max_iterations=runtime.context.max_iterations))
        return (yield from close_turn(services, state, runtime, config, node="finalize", system=system,
                                      reason=reason, started=started))

    return dual_node(finalize, name="finalize", models=services.models)
