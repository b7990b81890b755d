"""Closing a turn with one model call (finalize, solve): the reply as the answer, or what the tools found."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from reactgraph.models.gateway import ModelCall, failure_line
from reactgraph.nodes import budget, text_protocol
from reactgraph.nodes.closing.check import coverage_account
from reactgraph.nodes.closing.status import (
    UNCHECKED,
    Coverage,
    Evidence,
    annotated,
    by_coverage,
    cut_off,
    settled_by_evidence,
    verdict_coverage,
)
from reactgraph.nodes.context import Context
from reactgraph.nodes.conversation import last_human_index, tokens_of
from reactgraph.nodes.driver import AgentServices, Steps, log_fallback
from reactgraph.nodes.prompts import for_model, with_notes
from reactgraph.nodes.state import CloseReason, RunStatus, iteration_of, make_step, messages_of, steps_of, usage_of
from reactgraph.nodes.text_protocol import answer_without_markup, without_repetition
from reactgraph.nodes.tool_round import tool_steps


def observations_digest(state: Mapping[str, Any]) -> str:
    """A plain listing of what the tools returned: the last resort when no model can write the answer."""
    lines = [f"- {s['action']} ({s['status']}): {s['observation'][:300]}" for s in tool_steps(steps_of(state))]
    return "\n".join(lines) or "- (no tool results)"


def finish_turn(state: Mapping[str, Any], node: str, answer: str, *, reason: CloseReason, started: float,
                status: RunStatus, tokens: int = 0, message: AIMessage | None = None,
                coverage: Coverage | None = None) -> dict[str, Any]:
    """The state update that ends a turn: the answer, its status, its step record and the answer message (and
    the coverage account, when one was taken: `settle_answer`)."""
    record = make_step(step=iteration_of(state), node=node, status=status, thought=reason, observation=answer,
                       tokens=tokens, latency_ms=(time.perf_counter() - started) * 1000)
    update: dict[str, Any] = {"final_answer": answer, "status": status, "steps": [record]}
    if message is not None:
        update["messages"] = [message]
    if coverage is not None:
        update["coverage"] = coverage.record()
    return update


def settle_answer(services: AgentServices, state: Mapping[str, Any], runtime: Runtime[Context], answer: str, *,
                  node: str, reason: CloseReason, started: float, reply: BaseMessage | None, given: bool = True,
                  tokens: int = 0, message: AIMessage | None = None) -> Steps:
    """End a turn with the model's answer, its status from the evidence: the reply (`given` in the protocol,
    cut off or not), what the run's tools and steps did, and, where that allows `answered`, the coverage
    account (`check.coverage_account`: the verdict's, or one self-check call). The answer gains a line saying
    what its status rests on (a cut-off, the missing parts) unless it says so itself (`status.annotated`)."""
    evidence = Evidence(given=given, truncated=cut_off(reply))
    if (settled := settled_by_evidence(state, reason, evidence)) is not None:
        (status, why), coverage = settled, verdict_coverage(state) or UNCHECKED  # the account changes nothing
    else:
        coverage, spent = yield from coverage_account(services, state, runtime, node=node, answer=answer)
        status, why, tokens = by_coverage(coverage), "", tokens + spent
    named = annotated(answer, status, coverage, why, _in_chinese(state))
    if named != answer:
        message = AIMessage(content=named, usage_metadata=message.usage_metadata if message else None,
                            id=message.id if message else None)
    return finish_turn(state, node, named, reason=reason, started=started, status=status, tokens=tokens,
                       message=message, coverage=coverage)


def _in_chinese(state: Mapping[str, Any]) -> bool:
    messages = messages_of(state)
    i = last_human_index(messages)
    return i >= 0 and any("\u4e00" <= ch <= "\u9fff" for ch in str(messages[i].text))


def _reply_answer(reply: AIMessage, context: Context) -> tuple[str, bool]:
    """The closing reply's text as an answer a user reads (its loops cut, without "Final Answer:" or other ReAct
    labels), and whether it is one: in the text protocol a reply in step form (a Thought, an Action) without a
    Final Answer gave none, its Thought standing in; a plain reply is the answer the closing prompt asked for."""
    answer, given = without_repetition(reply.text).strip(), True
    if context.protocol == "text":  # the model may still write "Final Answer: …"
        given = bool(text_protocol.parse_reply(answer).final_answer) or not text_protocol.LABEL.search(answer)
        answer = text_protocol.answer_text(answer)
    return answer_without_markup(answer), given  # in either protocol: a user reads the answer, not the labels


def _failed(state: Mapping[str, Any], node: str, why: str, reason: CloseReason, started: float) -> dict[str, Any]:
    """No model could write the answer: say why, and list what the tools returned."""
    answer = f"I could not write a final answer ({why}). What the tools returned:\n{observations_digest(state)}"
    return finish_turn(state, node, answer, reason=reason, started=started, status="failed",
                       message=AIMessage(content=answer))


def close_turn(services: AgentServices, state: Mapping[str, Any], runtime: Runtime[Context], config: RunnableConfig,
               *, node: str, system: str, reason: CloseReason, started: float,
               notes: Sequence[str] = ()) -> Steps:
    """A node body's closing call: the conversation (with `notes` as its data message) under `system`,
    answered without calling tools; the reply is the answer (`settle_answer`), an empty or failed one ends the
    turn failed with what the tools returned."""
    context = runtime.context
    history: list[AnyMessage] = with_notes(state["messages"], notes)
    tools: list[dict[str, Any]] = []
    if context.protocol == "text":  # a text-only model reads tool rounds as Thought/Action/Observation
        history = text_protocol.as_text_messages(history)
    else:  # no tools to call; Anthropic still needs them defined when the history holds tool calls
        history = for_model(history)
        tools = services.schemas(context, config)
    try:
        answered = yield from ModelCall("answer", [SystemMessage(system), *history], tools=tools, tool_choice="none")
    except Exception as exc:  # noqa: BLE001 - after the retries: the turn still ends with the records' answer
        log_fallback(node, "answer_from_records", exc)
        return _failed(state, node, failure_line(exc, runtime, name_model=False), reason, started)
    reply = answered.message or AIMessage("")
    answer, given = _reply_answer(reply, context)
    if not answer:
        return _failed(state, node, "The model call failed: ValueError: empty reply", reason, started)
    # The reply's id stays: a `messages` stream has already shown this reply, token by token, under that id.
    return (yield from settle_answer(services, state, runtime, answer, node=node, reason=reason, started=started,
                                     reply=reply, given=given, tokens=tokens_of(reply),
                                     message=AIMessage(content=answer, usage_metadata=reply.usage_metadata,
                                                       id=reply.id)))


def budget_close(services: AgentServices, state: Mapping[str, Any], runtime: Runtime[Context], config: RunnableConfig,
                 *, node: str, system: str, started: float, gathered: str,
                 notes: Sequence[str] = ()) -> Steps:
    """Wrap a turn up once a budget ran out: after a tool-call budget one closing call (it calls no tool); after
    a token or cost budget no model call at all, the answer being what was `gathered`. Either way the answer
    ends naming the budget and that what was not looked up is missing; status `budget_exhausted`."""
    spent = budget.exhausted(usage_of(state), runtime.context)
    assert spent is not None  # the router sends here only when a budget ran out
    if spent["kind"] == "max_tool_calls":
        update = yield from close_turn(services, state, runtime, config, node=node, system=system, reason="budget",
                                       started=started, notes=notes)
    else:
        update = finish_turn(state, node, f"What was gathered before the budget ran out:\n{gathered}", reason="budget",
                             started=started, status="budget_exhausted", message=AIMessage(content=""))
    answer = f"{update['final_answer']}\n\n{budget.wrap_up_note(spent, _in_chinese(state))}"
    message = next(iter(update.get("messages") or []), None) or AIMessage(content="")
    update["steps"][0]["observation"] = answer
    return {**update, "final_answer": answer, "status": "budget_exhausted", "stop_reason": "budget",
            "budget": spent, "messages": [message.model_copy(update={"content": answer})]}
