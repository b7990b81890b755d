"""`observe`: tool results become bounded observations and `ExecutionStep` records."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.runtime import Runtime

from reactgraph.nodes.context import Context, context_of
from reactgraph.nodes.conversation import last_ai, latest_tool_messages, pending_calls, tokens_of
from reactgraph.nodes.state import AgentState, ExecutionStep, iteration_of, make_step
from reactgraph.nodes.tool_round.gateway_facts import facts_of


def truncate(text: str, budget: int) -> str:
    """Cut an observation to the budget, saying how much was left out so the model knows it is partial."""
    if len(text) <= budget:
        return text
    return f"{text[:budget]}\n…[truncated: showing {budget} of {len(text)} characters]"


def _as_input(args: Any) -> dict[str, Any] | None:
    if args is None or isinstance(args, dict):
        return args
    return {"raw": str(args)[:500]}


def observe(state: AgentState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Record one step per tool call of this round; over-budget results are replaced by truncated copies."""
    budget = context_of(runtime).observation_budget
    messages = state["messages"]
    reply = last_ai(messages)
    calls = {c["id"]: c for c in pending_calls(reply)}
    iteration = iteration_of(state)
    thought = reply.text.strip() if reply is not None else ""
    steps: list[ExecutionStep] = []
    shortened: list[ToolMessage] = []
    for position, message in enumerate(latest_tool_messages(messages)):
        text = str(message.text)  # a plain str: the record is checkpointed
        shown = truncate(text, budget)
        if shown != text:
            shortened.append(message.model_copy(update={"content": shown}))  # same id: add_messages replaces it
        facts = facts_of(message)
        steps.append(make_step(
            step=iteration, node="act", thought=thought, action=message.name,
            action_input=_as_input(calls.get(message.tool_call_id, {}).get("args")), observation=shown,
            status=facts.get("status") or ("ok" if message.status == "success" else "error"),
            latency_ms=facts.get("latency_ms", 0.0),
            tokens=tokens_of(reply) if position == 0 else 0,  # the model's tokens belong to the round, once
        ))
    return {"steps": steps, "messages": shortened} if shortened else {"steps": steps}
