"""Closing a turn with one model call (finalize, solve): the reply as the answer, or what the tools found."""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from reactgraph.models.loader import without_tool_use
from reactgraph.nodes.shared import text_protocol
from reactgraph.nodes.shared.context import Context
from reactgraph.nodes.shared.framing import for_model, with_notes
from reactgraph.nodes.shared.loop_guard import tool_steps
from reactgraph.nodes.shared.model_retry import model_failure
from reactgraph.nodes.shared.node_driver import Call
from reactgraph.nodes.shared.react_markup import answer_without_markup
from reactgraph.nodes.shared.services import AgentServices
from reactgraph.nodes.shared.state import answer_update
from reactgraph.nodes.shared.transcript import tokens_of


def observations_digest(state: Mapping[str, Any]) -> str:
    """A plain listing of what the tools returned: the last resort when no model can write the answer."""
    lines = [f"- {s['action']} ({s['status']}): {s['observation'][:300]}" for s in tool_steps(state.get("steps", []))]
    return "\n".join(lines) or "- (no tool results)"


def settle(state: Mapping[str, Any], node: str, answer: str, status: str, reason: str, started: float,
           tokens: int = 0, message: AIMessage | None = None) -> dict[str, Any]:
    return answer_update(node=node, iteration=state.get("iteration", 0), answer=answer, status=status,
                         reason=reason, tokens=tokens, started=started, message=message)


def from_reply(state: Mapping[str, Any], node: str, reply: AIMessage, reason: str, started: float,
               context: Context) -> dict[str, Any]:
    """The closing reply as the answer (`limit_reached` when the loop hit its limit); empty counts as failed."""
    answer = reply.text.strip()
    if context.protocol == "text":  # the model may still write "Final Answer: …"
        answer = text_protocol.answer_text(answer)
    answer = answer_without_markup(answer)  # in either protocol: a user reads the answer, not the ReAct labels
    if not answer:
        return _failed(state, node, "The model call failed: ValueError: empty reply", reason, started)
    status = "limit_reached" if reason == "limit" else "answered"
    # The reply's id stays: a `messages` stream has already shown this reply, token by token, under that id.
    return settle(state, node, answer, status, reason, started, tokens_of(reply),
                  AIMessage(content=answer, usage_metadata=reply.usage_metadata, id=reply.id))


def _failed(state: Mapping[str, Any], node: str, why: str, reason: str, started: float) -> dict[str, Any]:
    """No model could write the answer: say why, and list what the tools returned."""
    answer = f"I could not write a final answer ({why}). What the tools returned:\n{observations_digest(state)}"
    return settle(state, node, answer, "failed", reason, started, message=AIMessage(content=answer))


def close_turn(services: AgentServices, state: Mapping[str, Any], runtime: Runtime[Context], config: RunnableConfig,
               *, node: str, system: str, reason: str, started: float,
               notes: Sequence[str] = ()) -> Generator[Call, Any, dict[str, Any]]:
    """A node body's closing call: the conversation (with `notes` as its data message) under `system`,
    answered without calling tools."""
    context = runtime.context
    model: Any = services.model(context)
    history: list[AnyMessage] = with_notes(state["messages"], notes)
    if context.protocol == "text":  # a text-only model reads tool rounds as Thought/Action/Observation
        history = text_protocol.as_text_messages(history)
    else:  # no tools to call; Anthropic still needs them defined when the history holds tool calls
        history = for_model(history)
        model = without_tool_use(model, services.schemas(context, config))
    try:
        reply = yield Call(model, [SystemMessage(system), *history])
    except Exception as exc:  # noqa: BLE001 - after the retries: the turn still ends with the records' answer
        return _failed(state, node, model_failure(exc, None, runtime), reason, started)
    return from_reply(state, node, reply, reason, started, context)
