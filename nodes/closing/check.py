"""The coverage account of a closing answer: the model's own, from its latest verdict when that named the
question's parts, else from one closing self-check call (structured output: the parts, and those the answer
leaves unanswered). With the check off, or a check that fails or cannot be read, the account is `unchecked`."""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, SystemMessage
from langgraph.runtime import Runtime

from reactgraph.models.gateway import ModelCall
from reactgraph.nodes import prompts, text_protocol
from reactgraph.nodes.closing.status import UNCHECKED, Coverage, model_account, verdict_coverage
from reactgraph.nodes.context import Context
from reactgraph.nodes.conversation import pending_calls, tokens_of
from reactgraph.nodes.driver import AgentServices, Request, log_fallback
from reactgraph.nodes.prompts import for_model, summary_section, with_notes
from reactgraph.nodes.state import ClosingCheck, messages_of, summary_of


def check_request(state: Mapping[str, Any], answer: str, context: Context) -> list[AnyMessage]:
    """The check prompt, then the conversation as the model read it (facts folded into the running summary
    count as remembered) ending with the answer under check."""
    messages = list(messages_of(state))
    if messages and isinstance(messages[-1], AIMessage) and not pending_calls(messages[-1]):
        messages = messages[:-1]  # the reply that gave the answer: the answer as given stands in for it
    history = with_notes([*messages, AIMessage(answer)], summary_section(summary_of(state)))
    history = text_protocol.as_text_messages(history) if context.protocol == "text" else for_model(history)
    return [SystemMessage(prompts.CLOSING_CHECK_PROMPT), *history]


def coverage_account(services: AgentServices, state: Mapping[str, Any], runtime: Runtime[Context], *, node: str,
                     answer: str) -> Generator[Request, Any, tuple[Coverage, int]]:
    """(`Coverage`, tokens the check used): the latest verdict's account, else the closing self-check's (one
    model call, when `Context.closing_check` is on), else `unchecked`."""
    if (coverage := verdict_coverage(state)) is not None:
        return coverage, 0
    context = runtime.context
    if not context.closing_check:
        return UNCHECKED, 0
    # Advisory: a failure is no account rather than no answer, and must not have LangGraph run the closing node
    # (and its answer's call) again.
    try:
        reply = yield from ModelCall("check", check_request(state, answer, context), schema=ClosingCheck,
                                     advisory=True)
    except Exception as exc:  # noqa: BLE001 - e.g. a model without structured output: no account
        log_fallback(node, "coverage_unchecked", exc)
        return UNCHECKED, 0
    parsed = reply.parsed
    tokens = tokens_of(reply.message)
    if not isinstance(parsed, ClosingCheck):
        log_fallback(node, "coverage_unchecked", reply.parsing_error or "no structured output")
        return UNCHECKED, tokens
    return model_account(parsed.parts, parsed.missing), tokens
