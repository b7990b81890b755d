"""`think`: one model call that decides between tool calls and a final answer."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from reactgraph.models.gateway import ModelCall, ModelReply, failure_line
from reactgraph.nodes import prompts, text_protocol
from reactgraph.nodes.context import Context
from reactgraph.nodes.conversation import pending_calls, tokens_of
from reactgraph.nodes.driver import AgentServices, Node, Steps, dual_node, log_fallback
from reactgraph.nodes.prompts import for_model, summary_section, with_notes
from reactgraph.nodes.react.inline_reflection import inline_record, inline_schema, split_text_reply, split_tools_reply
from reactgraph.nodes.state import (
    AgentState,
    ExecutionStep,
    Verdict,
    iteration_of,
    lessons_of,
    make_step,
    summary_of,
    verdict_of,
)
from reactgraph.nodes.text_protocol import Attempts, ReactReply, format_errors, read_reply, reply_without_repetition


def notes_sections(state: AgentState, reflection: Verdict | None) -> list[str]:
    """What earlier steps wrote after reading tool output: the session summary, the last reflection note, lessons."""
    sections = summary_section(summary_of(state))
    if reflection and (note := reflection["note"]):
        sections.append(prompts.REFLECTION_NOTE.format(note=note))
    if lessons := lessons_of(state):
        sections.append(prompts.LESSONS_SECTION.format(lessons="\n".join(f"- {lesson}" for lesson in lessons)))
    return sections


def prompt_messages(state: AgentState, context: Context, reflection: Verdict | None,
                    schemas: list[dict[str, Any]] | None = None) -> list[AnyMessage]:
    """System prompt (instructions and protocol only), then the conversation with tool results framed as data
    and the notes from earlier steps (summary, reflection note, lessons) as a data message before the question.

    In the text protocol the tool rounds are rendered as Thought/Action/Observation text for the request only.
    """
    system = context.system_prompt.format(now=datetime.now(UTC).strftime("%Y-%m-%d %H:%M"))
    if prompts.DATA_RULE not in system:  # a configured system prompt still says that tool output is data
        system += "\n" + prompts.DATA_RULE
    history = with_notes(state["messages"], notes_sections(state, reflection))
    if context.protocol == "text":
        system += "\n\n" + text_protocol.instructions(schemas or [])
        history = text_protocol.as_text_messages(history)
    else:
        history = for_model(history)
    if context.reflection == "inline":  # the verdict is asked for with the step (nodes/react/inline_reflection.py)
        system += "\n\n" + (prompts.TEXT_INLINE_REFLECTION if context.protocol == "text"
                             else prompts.INLINE_REFLECTION_RULE)
    return [SystemMessage(system), *history]


@dataclass
class _Turn:
    """What one think call has done so far; a model failure at any point is reported from it."""

    iteration: int
    inline: bool = False  # reflection="inline": the reply carries the verdict
    started: float = field(default_factory=time.perf_counter)
    steps: list[ExecutionStep] = field(default_factory=list)

    def ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000

    def split(self, reply: AIMessage) -> tuple[AIMessage, Any]:
        """The reply without the verdict it carries, and the verdict (inline reflection only)."""
        return split_tools_reply(reply) if self.inline else (reply, None)

    def split_text(self, text: str) -> tuple[str, str | None]:
        return split_text_reply(text) if self.inline else (text, None)

    def verdict(self, raw: Any) -> dict[str, Any]:
        """The state's `reflection` from the verdict the reply carried (inline reflection only), its step recorded."""
        if not self.inline:
            return {}
        record, step, problem = inline_record(raw, self.iteration)
        if problem:
            log_fallback("think", "inline_verdict_default", problem)
        self.steps.append(step)
        return {"reflection": record}

    def update(self, **fields: Any) -> dict[str, Any]:
        update: dict[str, Any] = {"iteration": self.iteration, **fields}
        if self.steps:
            update["steps"] = self.steps
        return update


# A decision is a node body's part: it yields the model calls to make and receives the replies (see node_driver).
Decision = Steps


def _is_empty(reply: AIMessage) -> bool:
    return not pending_calls(reply) and not reply.text.strip()


def _answer(reply: ModelReply) -> AIMessage:
    return reply.message or AIMessage("")


def _tools_decision(call: ModelCall, turn: _Turn) -> Decision:
    request = call.messages
    reply, carried = turn.split(_answer((yield from call)))
    if _is_empty(reply):  # one nudge before giving up: some models occasionally return nothing
        # In the leading system message: providers such as Anthropic refuse a second, later system message.
        nudged = SystemMessage(f"{request[0].text}\n{prompts.EMPTY_REPLY_NUDGE}")
        reply, again = turn.split(_answer((yield from replace(call, messages=[nudged, *request[1:]]))))
        carried = again if again is not None else carried
    reply = reply_without_repetition(reply)  # a looping reply never reaches the conversation
    if _is_empty(reply):
        answer = "The model returned an empty reply twice; no answer could be produced."
        turn.steps.append(make_step(step=turn.iteration, node="think", status="empty_reply", observation=answer,
                                    tokens=tokens_of(reply), latency_ms=turn.ms()))
        return turn.update(messages=[reply], status="failed", final_answer=answer)
    return turn.update(messages=[reply], **turn.verdict(carried))


def _text_decision(call: ModelCall, turn: _Turn, schemas: list[dict[str, Any]], spent: int,
                   context: Context) -> Decision:
    """Text protocol: parse the reply; a malformed one is answered with a format note (text_replies) and costs an
    iteration. Past the iteration limit or the format-error budget no message is added: finalize answers from
    what was observed (the budget's end is the `format` stop)."""
    by_budget = max(context.max_format_errors - spent, 0)
    allowed = min(by_budget, context.max_iterations - turn.iteration)
    first = turn.iteration
    attempts: Attempts[ReactReply] = Attempts()
    try:
        yield from read_reply(call, lambda text: text_protocol.parse_reply(turn.split_text(text)[0]),
                              lambda problem: text_protocol.format_correction(problem, schemas),
                              node="think", allowed=allowed, attempts=attempts)
    finally:  # a model error after unusable replies still reports them, with what they cost
        turn.steps += attempts.records("think", lambda i: first + i)
        turn.iteration = first + min(len(attempts.errors), allowed)
    if attempts.parsed is None:
        return turn.update(**({"stop_reason": "format"} if by_budget <= allowed else {}))
    text, carried = turn.split_text(attempts.text)
    return turn.update(messages=[text_protocol.to_ai_message(attempts.parsed, text, schemas, attempts.reply)],
                       **turn.verdict(carried))


def make_think(services: AgentServices) -> Node:
    """The think node, bound to the graph's services: one model call that decides (a correction round or an
    empty-reply nudge may add one); a model that fails ends the run with a reason, never a crash."""

    def think(state: AgentState, runtime: Runtime[Context], config: RunnableConfig) -> Decision:
        context = runtime.context
        # The turn began in the graph's first node (load_memory's begin_turn): its fields are this question's.
        turn = _Turn(iteration=iteration_of(state) + 1, inline=context.reflection == "inline")
        schemas = services.schemas(context, config)
        request = prompt_messages(state, context, verdict_of(state), schemas)
        if context.protocol == "text":  # the tools are described in the prompt, never bound
            spent = format_errors(state)  # the turn's unusable replies so far
            call = ModelCall("think", request, stop=tuple(text_protocol.STOP))
            decision = _text_decision(call, turn, schemas, spent, context)
        else:
            bound = [*schemas, inline_schema()] if turn.inline else schemas
            decision = _tools_decision(ModelCall("think", request, tools=bound), turn)
        try:
            return (yield from decision)
        except Exception as exc:  # noqa: BLE001 - after the retries (see model_retry): one line, status failed
            log_fallback("think", "model_error_failed_turn", exc)
            reason = failure_line(exc, runtime)
            turn.steps.append(make_step(step=turn.iteration, node="think", status="model_error",
                                        observation=reason, latency_ms=turn.ms()))
            return turn.update(status="failed", final_answer=reason)

    return dual_node(think, name="think", models=services.models)
