"""Settling a turn's answer from a closing model call (finalize, solve): the reply, or what the tools found."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage

from reactgraph.nodes.shared import text_protocol
from reactgraph.nodes.shared.context import current_context
from reactgraph.nodes.shared.loop_guard import tool_steps
from reactgraph.models.loader import describe_model_error
from reactgraph.nodes.shared.state import answer_update
from reactgraph.nodes.shared.transcript import text_of, tokens_of


def observations_digest(state: dict[str, Any]) -> str:
    """A plain listing of what the tools returned: the last resort when no model can write the answer."""
    lines = [f"- {s['action']} ({s['status']}): {s['observation'][:300]}" for s in tool_steps(state.get("steps", []))]
    return "\n".join(lines) or "- (no tool results)"


def settle(state: dict[str, Any], node: str, answer: str, status: str, reason: str, started: float,
           tokens: int = 0, message: AIMessage | None = None) -> dict[str, Any]:
    return answer_update(node=node, iteration=state.get("iteration", 0), answer=answer, status=status,
                         reason=reason, tokens=tokens, started=started, message=message)


def from_reply(state: dict[str, Any], node: str, reply: AIMessage, reason: str, started: float) -> dict[str, Any]:
    """The closing reply as the answer (`limit_reached` when the loop hit its limit); empty counts as failed."""
    answer = text_of(reply).strip()
    if current_context().protocol == "text":  # the model may still write "Final Answer: …"
        answer = text_protocol.answer_text(answer)
    if not answer:
        return from_failure(state, node, ValueError("empty reply"), reason, started)
    status = "limit_reached" if reason == "limit" else "answered"
    return settle(state, node, answer, status, reason, started, tokens_of(reply),
                  AIMessage(content=answer, usage_metadata=reply.usage_metadata))


def from_failure(state: dict[str, Any], node: str, exc: Exception, reason: str, started: float) -> dict[str, Any]:
    """No model could write the answer: say why, and list what the tools returned."""
    answer = (f"I could not write a final answer ({describe_model_error(exc)}). "
              f"What the tools returned:\n{observations_digest(state)}")
    return settle(state, node, answer, "failed", reason, started, message=AIMessage(content=answer))
