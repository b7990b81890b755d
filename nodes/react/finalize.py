"""`finalize`: settle the turn's answer — the model's own, or one composed from what was observed."""

from __future__ import annotations

import time
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from reactgraph.nodes.closing.closing import budget_close, close_turn, conclude, observations_digest, settle
from reactgraph.nodes.conversation.transcript import pending_calls
from reactgraph.nodes.prompting import prompts
from reactgraph.nodes.prompting.react_markup import answer_without_markup
from reactgraph.nodes.runtime.budget import exhausted
from reactgraph.nodes.runtime.node_driver import Node, Steps, dual_node
from reactgraph.nodes.runtime.services import AgentServices
from reactgraph.nodes.state.agent import AgentState
from reactgraph.nodes.state.context import Context
from reactgraph.nodes.state.fields import (
    budget_stopped,
    final_answer_of,
    has_failed,
    iteration_of,
    usage_of,
    verdict_of,
)
from reactgraph.nodes.state.records import FinalizeReason


def stop_reason(state: AgentState, context: Context) -> FinalizeReason:
    """Why the loop stopped without the model's own answer: budget, limit, repeated call, or enough information."""
    if budget_stopped(state):
        return "budget"
    if iteration_of(state) >= context.max_iterations:
        return "limit"
    if (verdict := verdict_of(state)) and verdict["repeated_call"]:
        return "repeated"
    return "enough"


def settled(state: AgentState, started: float, scripted: bool) -> dict[str, Any] | None:
    """The turn's outcome when no model call is needed (the model answered, or the run failed)."""
    if has_failed(state):
        answer = final_answer_of(state) or "The run failed."
        return settle(state, "finalize", answer, "failed", "failure", started)
    reply = state["messages"][-1]
    # ReAct markup (`Thought: … Final Answer: …`, a wrapper fence) is not part of the answer a user reads.
    if isinstance(reply, AIMessage) and not pending_calls(reply) and (answer := answer_without_markup(reply.text)):
        return conclude(state, "finalize", answer, "model answered", started, scripted=scripted)
    return None


def make_finalize(services: AgentServices) -> Node:
    """The finalize node: the model's answer as it is, else one closing call over what was observed."""

    def finalize(state: AgentState, runtime: Runtime[Context], config: RunnableConfig) -> Steps:
        started = time.perf_counter()
        if (done := settled(state, started, services.scripted(runtime.context))) is not None:
            return done
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

    return dual_node(finalize, name="finalize", retry=services.retry)
