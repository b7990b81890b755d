"""The ReAct loop's own nodes: `think`, `reflect` and `finalize` (the tool round between them is tool_round.py's).

`think` is one model call that decides between tool calls and a final answer (a correction round or an
empty-reply nudge may add one); a model that fails ends the run with a reason, never a crash. `reflect` is a
structured self-check after each round, from the model (`llm`) or from rules. `finalize` settles the turn's
answer: the model's own, or one composed from what was observed.

With `reflection="inline"` the think reply carries the reflection verdict beside its tool calls or its answer,
so reflecting costs no model call of its own. Tools protocol: one more tool, `InlineReflection` (the verdict's
schema), offered beside the real ones; the system prompt asks for one call of it with every reply. Text
protocol: a `<reflection>{json}</reflection>` block before the Thought. Either way the verdict is taken out of the
reply before the reply joins the conversation (it is no call to run, no text to show) and read within bounds. A
reply without a usable one gets the safe default, a verdict that stops nothing and names no parts: the loop goes
on, the loop guard's rules still apply, and a closing answer is checked by the closing self-check as without
reflection.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any, cast

from langchain_core.messages import AIMessage, AIMessageChunk, AnyMessage, SystemMessage
from langchain_core.messages.utils import message_chunk_to_message
from langchain_core.runnables import RunnableConfig
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, ValidationError

from reactgraph.models.gateway import ModelCall, ModelReply, failure_line
from reactgraph.nodes import prompts, text_protocol
from reactgraph.nodes.budget import exhausted
from reactgraph.nodes.closing import (
    budget_close,
    close_turn,
    finish_turn,
    model_account,
    observations_digest,
    settle_answer,
)
from reactgraph.nodes.context import Context
from reactgraph.nodes.conversation import latest_tool_messages, pending_calls, tokens_of
from reactgraph.nodes.driver import AgentServices, Node, Steps, dual_node, log_fallback
from reactgraph.nodes.prompts import for_model, summary_section, with_notes
from reactgraph.nodes.state import (
    AgentState,
    ExecutionStep,
    FinalizeReason,
    ReflectionVerdict,
    Verdict,
    budget_stopped,
    final_answer_of,
    has_failed,
    iteration_of,
    lessons_of,
    make_step,
    parts_verdict,
    steps_of,
    stop_reason_of,
    summary_of,
    usage_of,
    verdict_of,
)
from reactgraph.nodes.text_protocol import (
    Attempts,
    ReactReply,
    answer_without_markup,
    format_errors,
    read_reply,
    reply_without_repetition,
    without_repetition,
)
from reactgraph.nodes.tool_commands import tool_goto
from reactgraph.nodes.tool_round import repeated_calls, rules_verdict

# --- the inline verdict -------------------------------------------------------------------------------------

INLINE_TOOL = "InlineReflection"
MAX_VERDICT_CHARS = 8000  # a verdict's JSON past this is not read (model output is untrusted)
MAX_NOTE_CHARS = 500
# A block the model left unclosed ends where the protocol's next label begins.
_FLAGS = ("enough_information", "tool_error", "need_other_tool", "repeated_call")
_BLOCK = re.compile(r"<reflection>(?P<body>.*?)(?:</reflection>|(?=\n\s*(?:Thought|Action|Final Answer)\s*[:：])|\Z)",
                    re.S | re.I)


class InlineReflection(BaseModel):
    """The inline verdict's schema: what only the model can judge — whether the results answer the question, its
    parts and those missing. The loop's flags (tool_error, need_other_tool, repeated_call) are the records'
    (`rules_verdict`, judged by reflect just before), and the reply's own Thought, kept in the conversation, is
    its advice to itself (llm reflection's note): asked of the model on every request, they would cost tokens on
    each call and say what the records and the Thought already say."""

    enough_information: bool
    parts: list[str] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)


@cache
def inline_schema() -> dict[str, Any]:
    """The verdict as one more tool's OpenAI schema (one object, so the bound model is derived once). It rides on
    every think request, so every word of it is paid for on each call: its fields go without descriptions or
    defaults (the system prompt's rule, prompts.INLINE_REFLECTION_RULE, names what each means) and its own
    description is one line."""
    schema = convert_to_openai_tool(InlineReflection)
    function = schema["function"]
    function["description"] = "Your verdict on the tool results so far; runs nothing."
    for field_schema in function["parameters"]["properties"].values():
        field_schema.pop("description", None)
        field_schema.pop("default", None)
    return schema


def _names_inline(raw_call: Any) -> bool:
    """A provider's raw tool call (`additional_kwargs["tool_calls"]`, OpenAI's shape) that calls the verdict."""
    return isinstance(raw_call, dict) and (raw_call.get("function") or {}).get("name") == INLINE_TOOL


def _names_inline_block(block: Any) -> bool:
    """A content block that calls the verdict (Anthropic's `tool_use`): sent back, it would want a result."""
    return isinstance(block, dict) and block.get("name") == INLINE_TOOL and block.get("type") != "text"


def split_tools_reply(reply: AIMessage) -> tuple[AIMessage, Any]:
    """The reply without its verdict call(s), and the first one's arguments (None when it made none; the raw
    text of an unreadable one, which then reads as no verdict). Every trace goes: the parsed and unparsable
    calls, the provider's raw calls and content blocks, so no request ever sends a call without its result."""
    if isinstance(reply, AIMessageChunk):  # a streamed reply: its calls settled as a message's
        reply = cast(AIMessage, message_chunk_to_message(reply))
    raw: Any = None
    found = False
    for call in [*reply.tool_calls, *reply.invalid_tool_calls]:
        if call.get("name") == INLINE_TOOL and not found:
            raw, found = call.get("args"), True
    if not found:
        return reply, None
    extra = dict(reply.additional_kwargs)
    if isinstance(extra.get("tool_calls"), list):
        extra["tool_calls"] = [c for c in extra["tool_calls"] if not _names_inline(c)] or None
        if extra["tool_calls"] is None:
            del extra["tool_calls"]
    content = reply.content
    if isinstance(content, list):
        content = [block for block in content if not _names_inline_block(block)]
    return reply.model_copy(update={
        "content": content, "additional_kwargs": extra,
        "tool_calls": [c for c in reply.tool_calls if c.get("name") != INLINE_TOOL],
        "invalid_tool_calls": [c for c in reply.invalid_tool_calls if c.get("name") != INLINE_TOOL]}), raw


def split_text_reply(text: str) -> tuple[str, str | None]:
    """A text-protocol reply without its `<reflection>` block(s), and the first block's body (None without one)."""
    match = _BLOCK.search(text)
    if match is None:
        return text, None
    return _BLOCK.sub("", text).strip(), match.group("body")


def read_verdict(raw: Any) -> tuple[ReflectionVerdict | None, str]:
    """The verdict from a call's arguments or a block's JSON, bounded, with "" as the problem; or None and one
    line naming why it could not be read."""
    if raw is None:
        return None, "the reply carried no verdict"
    if isinstance(raw, str):
        if len(raw) > MAX_VERDICT_CHARS:
            return None, f"the verdict is longer than {MAX_VERDICT_CHARS} characters"
        try:
            raw = json.loads(raw.strip().strip("`").removeprefix("json").strip())
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
            return None, "the verdict is not JSON"
    if not isinstance(raw, dict):
        return None, f"the verdict is a {type(raw).__name__}, not an object"
    if len(json.dumps(raw, default=str)) > MAX_VERDICT_CHARS:
        return None, f"the verdict is longer than {MAX_VERDICT_CHARS} characters"
    try:  # a flag the model left out stops nothing (False), as the safe default does
        verdict = ReflectionVerdict.model_validate({**dict.fromkeys(_FLAGS, False), **raw})
    except ValidationError as exc:
        return None, f"the verdict does not fit its schema ({exc.error_count()} error(s))"
    account = model_account(verdict.parts, verdict.missing)
    note = " ".join(verdict.note.split())[:MAX_NOTE_CHARS]
    return verdict.model_copy(update={"note": note, "parts": account.parts, "missing": account.missing}), ""


def inline_record(raw: Any, iteration: int, rules: Verdict | None = None) -> tuple[Verdict, ExecutionStep, str]:
    """The state's verdict from what a think reply carried (the safe default when it is unusable), with the flags
    the records judged (`rules`: tool_error, need_other_tool, repeated_call) set where the model did not set them;
    its step record (its tokens are the think reply's, counted there) and why it was unusable ("" when it was
    not)."""
    verdict, problem = read_verdict(raw)
    record = verdict.record() if verdict is not None else parts_verdict()
    if rules is not None:  # the flags the records judge (reflect's rules verdict of the same round)
        record["tool_error"] = record["tool_error"] or rules["tool_error"]
        record["need_other_tool"] = record["need_other_tool"] or rules["need_other_tool"]
        record["repeated_call"] = record["repeated_call"] or rules["repeated_call"]
    step = make_step(step=iteration, node="reflect", status="reflection",
                     thought=verdict.note if verdict is not None else f"no inline verdict: {problem}",
                     observation=json.dumps(record, ensure_ascii=False))
    return record, step, problem



# --- think --------------------------------------------------------------------------------------------------

def notes_sections(state: AgentState, reflection: Verdict | None) -> list[str]:
    """What earlier steps wrote after reading tool output: the session summary, the last reflection note, lessons."""
    sections = summary_section(summary_of(state))
    if reflection and (note := reflection["note"]):
        sections.append(prompts.REFLECTION_NOTE.format(note=note))
    if lessons := lessons_of(state):
        sections.append(prompts.LESSONS_SECTION.format(lessons="\n".join(f"- {lesson}" for lesson in lessons)))
    return sections


def inline_asked(state: AgentState, context: Context) -> bool:
    """Whether this think request asks for the inline verdict: reflection="inline" and the turn has tool results."""
    return context.reflection == "inline" and any(step["node"] == "act" for step in steps_of(state))


def prompt_messages(state: AgentState, context: Context, reflection: Verdict | None,
                    schemas: list[dict[str, Any]] | None = None) -> list[AnyMessage]:
    """System prompt (instructions and protocol only), then the conversation with tool results framed as data
    and the notes from earlier steps (summary, reflection note, lessons) as a data message before the question.

    In the text protocol the tool rounds are rendered as Thought/Action/Observation text for the request only.
    """
    system = context.system_prompt.format(now=prompts.prompt_date())
    if prompts.DATA_RULE not in system:  # a configured system prompt still says that tool output is data
        system += "\n" + prompts.DATA_RULE
    history = with_notes(state["messages"], notes_sections(state, reflection))
    if context.protocol == "text":
        system += "\n\n" + text_protocol.instructions(schemas or [])
        history = text_protocol.as_text_messages(history)
    else:
        history = for_model(history)
    if inline_asked(state, context):  # the verdict is asked for with the step (the inline verdict, above)
        system += "\n\n" + (prompts.TEXT_INLINE_REFLECTION if context.protocol == "text"
                             else prompts.INLINE_REFLECTION_RULE)
    return [SystemMessage(system), *history]


@dataclass
class _Turn:
    """What one think call has done so far; a model failure at any point is reported from it."""

    iteration: int
    inline: bool = False  # reflection="inline": a verdict the reply carries is taken out of it and read
    asked: bool = False  # …and this request asked for one (the turn has tool results): a missing one is defaulted
    rules: Verdict | None = None  # the records' verdict on the last round (reflect's), for the flags it judges
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
        if not self.inline or (raw is None and not self.asked):
            return {}
        record, step, problem = inline_record(raw, self.iteration, self.rules)
        if problem:
            log_fallback("think", "inline_verdict_default", problem)
        self.steps.append(step)
        return {"reflection": record}

    def update(self, **fields: Any) -> dict[str, Any]:
        update: dict[str, Any] = {"iteration": self.iteration, **fields}
        if self.steps:
            update["steps"] = self.steps
        return update


# A decision is a node body's part: it yields the model calls to make and receives the replies (see driver.py).
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
    """Text protocol: parse the reply; a malformed one is answered with a format note (read_reply) and costs an
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
        # The inline verdict judges the tool results so far: asked for once the turn has some (the first reply
        # has nothing to judge, and a direct answer is checked by the closing self-check as without reflection).
        turn = _Turn(iteration=iteration_of(state) + 1, inline=context.reflection == "inline",
                     asked=inline_asked(state, context), rules=verdict_of(state))
        schemas = services.schemas(context, config)
        request = prompt_messages(state, context, verdict_of(state), schemas)
        if context.protocol == "text":  # the tools are described in the prompt, never bound
            spent = format_errors(state)  # the turn's unusable replies so far
            call = ModelCall("think", request, stop=tuple(text_protocol.STOP),
                             verdict_block=tuple(InlineReflection.model_fields) if turn.asked else ())
            decision = _text_decision(call, turn, schemas, spent, context)
        else:
            bound = [*schemas, inline_schema()] if turn.asked else schemas
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



# --- reflect ------------------------------------------------------------------------------------------------

def _settle(state: AgentState, verdict: ReflectionVerdict, tokens: int, started: float,
            by_rules: bool = False) -> dict[str, Any]:
    iteration = iteration_of(state)
    # The loop guard is authoritative: a model may miss a repeat, but a repeat must always stop the loop
    # (a verdict from the rules has looked for repeats already).
    if not by_rules and repeated_calls(steps_of(state), iteration):
        verdict = verdict.model_copy(update={"repeated_call": True})
    step = make_step(step=iteration, node="reflect", status="reflection", thought=verdict.note,
                     observation=verdict.model_dump_json(), tokens=tokens,
                     latency_ms=(time.perf_counter() - started) * 1000)
    return {"reflection": verdict.record(), "steps": [step]}


def _from_model_output(reply: ModelReply, state: AgentState) -> tuple[ReflectionVerdict, int]:
    """The parsed verdict, or the rules' verdict when the model's output could not be parsed."""
    tokens = tokens_of(reply.message)
    if isinstance(reply.parsed, ReflectionVerdict):
        return reply.parsed, tokens
    fallback = rules_verdict(steps_of(state), iteration_of(state))
    reason = reply.parsing_error or "no structured output"
    log_fallback("reflect", "reflection_rules", reason)
    return fallback.model_copy(update={"note": f"{fallback.note} (model reflection unusable: "
                                               f"{str(reason)[:120]}; used rules)".strip()}), tokens


def make_reflect(services: AgentServices) -> Node:
    """The reflect node: the model's structured verdict (`llm`), the rules' (`rules`, `inline`, or when the model
    fails), or nothing (`off`)."""

    def reflect(state: AgentState, runtime: Runtime[Context], config: RunnableConfig) -> Steps:
        started = time.perf_counter()
        context = runtime.context
        if context.reflection == "off":
            return {"reflection": None}
        steps, iteration = steps_of(state), iteration_of(state)
        # A text-protocol model may offer no structured output, so its `llm` reflection uses the rules. `inline`:
        # no call either; the rules judge this round now, the model's verdict comes with its next reply (think).
        if context.reflection != "llm" or context.protocol == "text":
            return _settle(state, rules_verdict(steps, iteration), 0, started, by_rules=True)
        messages: list[AnyMessage] = [SystemMessage(prompts.REFLECT_PROMPT), *for_model(state["messages"])]
        try:
            reply = yield from ModelCall("reflect", messages, schema=ReflectionVerdict)
        except Exception as exc:  # noqa: BLE001 - reflection is advisory; the loop goes on without it
            log_fallback("reflect", "reflection_rules", exc)
            verdict = rules_verdict(steps, iteration)
            note = f"{verdict.note} (model reflection failed: {type(exc).__name__}; used rules)".strip()
            return _settle(state, verdict.model_copy(update={"note": note}), 0, started, by_rules=True)
        return _settle(state, *_from_model_output(reply, state), started)

    return dual_node(reflect, name="reflect", models=services.models)



# --- finalize -----------------------------------------------------------------------------------------------

def stop_reason(state: AgentState, context: Context) -> FinalizeReason:
    """Why the loop stopped without the model's own answer: budget, format errors, limit, repeated call, or enough
    information."""
    if budget_stopped(state):
        return "budget"
    if stop_reason_of(state) == "format":
        return "format"
    if iteration_of(state) >= context.max_iterations:
        return "limit"
    if "finalize" in tool_goto(latest_tool_messages(state["messages"])):
        return "tool"
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
