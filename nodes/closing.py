"""Closing a turn: the answer from one model call (finalize, solve), its coverage account, the run's status, and
the structured response.

The status is defined once here and picked from the run's evidence, the same for every model: a failure or an
early stop first, then what the closing reply shows (cut off at the output limit, no final answer in the
protocol), then whether anything the run tried worked, and last the model's own account of the question's parts
(`Coverage`). That account is the latest reflection verdict's when it named the question's parts, else one
closing self-check call (structured output: the parts, and those the answer leaves unanswered); with the check
off, or a check that fails or cannot be read, it is `unchecked`. The closing call's reply is the answer; when no
model can write one, the turn ends failed with what the tools returned. A turn whose budget ran out is wrapped
up with a line naming the budget.

`respond` runs only in a graph built with `response_format=` (LangChain `create_agent`'s `structured_response`),
after the closing node settled the text answer: the model restates that answer in the schema (the provider's
native structured output or a tool call, models/response_format.py), and the reply is validated. A reply that
does not fit is sent back with what was wrong, at most ATTEMPTS times in all. The result goes to
`structured_response`: the pydantic or dataclass instance, or a dict for a TypedDict or a JSON schema. When none
fits, `structured_response` is None and the turn ends `no_answer` (as a text-protocol reply without
`Final Answer:` does: no answer in the form asked for), the text answer kept with a line saying why. A turn that
already ended worse (failed, budget_exhausted, limit_reached, no_answer) keeps its status; a failed or
budget_exhausted one, or one without an answer, is not asked at all: its model failed or its budget is spent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from reactgraph.models import response_format as formats
from reactgraph.models.gateway import ModelCall, ModelReply, describe, failure_line
from reactgraph.models.response_format import ResponseFormat
from reactgraph.nodes import budget, prompts, text_protocol
from reactgraph.nodes.context import Context
from reactgraph.nodes.conversation import last_human_index, pending_calls, question_text, tokens_of
from reactgraph.nodes.driver import AgentServices, Node, Request, Steps, dual_node, log_fallback
from reactgraph.nodes.prompts import for_model, summary_section, with_notes
from reactgraph.nodes.state import (
    CloseReason,
    ClosingCheck,
    CoverageJudge,
    CoverageRecord,
    ExecutionStep,
    RunStatus,
    final_answer_of,
    has_failed,
    iteration_of,
    make_step,
    messages_of,
    status_of,
    steps_of,
    stop_reason_of,
    summary_of,
    usage_of,
    verdict_of,
)
from reactgraph.nodes.text_protocol import answer_without_markup, without_repetition
from reactgraph.nodes.tool_round import tool_steps

# --- the status ---------------------------------------------------------------------------------------------

RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
# The statuses a caller may rely on as an answer (CLI exit code 0); every other one is a failure to answer.
SUCCESS_STATUSES: frozenset[str] = frozenset({"answered", "partial"})
# Why a loop stopped early → the status it ends with (`stop_reason` "budget" is set by the budget checks).
_STOPPED: dict[str, RunStatus] = {"budget": "budget_exhausted", "limit": "limit_reached",
                                  "repeated": "limit_reached", "format": "limit_reached"}
# The line each evidence-settled ending adds to the answer (English, Chinese): what the status rests on.
_EVIDENCE_LINES: dict[str, tuple[str, str]] = {
    "truncated": ("(The answer was cut off at the model's output limit.)", "（回答在模型的输出上限处被截断。）"),
    "not_given": ("(The model gave no final answer.)", "（模型没有给出最终答案。）"),
    "tools_failed": ("(Every tool call failed: no tool result backs this answer.)",
                     "（所有工具调用都失败了：这个回答没有任何工具结果支持。）"),
    "steps_failed": ("(Every step of the plan failed.)", "（计划的每一步都失败了。）"),
}


@dataclass(frozen=True)
class Coverage:
    """The parts of the question and those the answer leaves unanswered, and who gave that account."""

    parts: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    by: CoverageJudge = "unchecked"  # model (its verdict, its plan, its closing self-check) | unchecked (none)

    def record(self) -> CoverageRecord:
        """The account as the state holds it (the `coverage` field)."""
        return CoverageRecord(parts=self.parts, missing=self.missing, by=self.by)


UNCHECKED = Coverage()
UNCHECKED_MARK = "coverage unchecked"  # how every interface marks a status no model's account backs (statuses.md)


def shown_status(status: str | None, coverage: Mapping[str, Any] | None) -> str:
    """A run's status as a person is shown it: `answered · coverage unchecked` when no model's account of the
    question's parts backs it (the check was off, failed or could not be read), so an unchecked answer never
    reads as a plain `answered`."""
    shown = status or "-"
    return f"{shown} · {UNCHECKED_MARK}" if (coverage or {}).get("by") == "unchecked" and status else shown


# A model's account is its output (untrusted): it reaches the state, every output and the answer's Missing line
# within these bounds.
MAX_PARTS = 20
MAX_PART_CHARS = 200


def _texts(items: Sequence[Any]) -> list[str]:
    texts = (" ".join(str(item).split()) for item in list(items)[:MAX_PARTS * 2])
    return [text if len(text) <= MAX_PART_CHARS else text[:MAX_PART_CHARS - 1] + "…" for text in texts if text][
        :MAX_PARTS]


def model_account(parts: Sequence[Any], missing: Sequence[Any]) -> Coverage:
    """The model's account (a verdict's or a self-check's `parts`/`missing`), blank entries dropped."""
    return Coverage(_texts(parts), _texts(missing), "model")


def verdict_coverage(state: Mapping[str, Any]) -> Coverage | None:
    """The account the latest verdict already gives (the model's reflection, or its plan); None without parts."""
    verdict = verdict_of(state)
    if verdict is None or not _texts(verdict["parts"]):
        return None
    return model_account(verdict["parts"], verdict["missing"])


@dataclass(frozen=True)
class Evidence:
    """What the closing reply shows: a final answer given in the protocol, and whether it was cut off."""

    given: bool = True
    truncated: bool = False


def cut_off(reply: BaseMessage | None) -> bool:
    """The reply stopped at the output-token limit (OpenAI `finish_reason` "length", Anthropic `stop_reason`
    "max_tokens"), as the provider reported it."""
    metadata = getattr(reply, "response_metadata", None) or {}
    return metadata.get("finish_reason") == "length" or metadata.get("stop_reason") == "max_tokens"


def nothing_worked(steps: Sequence[ExecutionStep]) -> str | None:
    """Why nothing the run tried worked: every tool call failed ("tools_failed"; a call that found nothing did
    not fail, nor did one a person rejected or answered: that is a decision, not a failure), or every plan step
    ("steps_failed"); None when something worked or nothing was tried."""
    calls = [s for s in steps if s["node"] == "act" and s["status"] not in ("rejected", "responded")]
    if calls and all(s["status"] != "ok" for s in calls):
        return "tools_failed"
    plan_steps = [s for s in steps if s["node"] == "execute_step"]
    if plan_steps and all(s["status"] in ("failed", "model_error") for s in plan_steps):
        return "steps_failed"
    return None


def settled_by_evidence(state: Mapping[str, Any], reason: CloseReason,
                        evidence: Evidence) -> tuple[RunStatus, str] | None:
    """The status the run's evidence settles without a coverage account, with the key of the line that says so
    ("" for none); None when the account decides. A failure, then an early stop (budget, limit, repeat), then a
    reply cut off at the output limit (a limit too), then no final answer, or nothing the run tried worked."""
    if has_failed(state) or reason == "failure":
        return "failed", ""
    stopped = _STOPPED.get(stop_reason_of(state) or "") or _STOPPED.get(reason)
    if stopped is not None:
        return stopped, ""
    if evidence.truncated:
        return "limit_reached", "truncated"
    if not evidence.given:
        return "no_answer", "not_given"
    if why := nothing_worked(steps_of(state)):
        return "no_answer", why
    return None


def by_coverage(coverage: Coverage) -> RunStatus:
    """How much of the question the account says is answered: all, some (partial) or none (no_answer)."""
    if coverage.parts and coverage.missing:
        return "no_answer" if set(coverage.parts) <= set(coverage.missing) else "partial"
    return "answered"


def pick_status(state: Mapping[str, Any], reason: CloseReason, coverage: Coverage,
                evidence: Evidence = Evidence()) -> RunStatus:
    """The turn's status: what the evidence settles, else how much of the question the account says is answered."""
    settled = settled_by_evidence(state, reason, evidence)
    return settled[0] if settled is not None else by_coverage(coverage)


def annotated(answer: str, status: str, coverage: Coverage, why: str, lang_zh: bool) -> str:
    """The answer with what its status rests on: the evidence line (`why`), and for partial / no_answer a line
    naming the missing parts unless the answer already names each of them."""
    lines = [answer] if answer else []
    if why in _EVIDENCE_LINES:
        lines.append(_EVIDENCE_LINES[why][1 if lang_zh else 0])
    missing, lowered = coverage.missing, answer.casefold()
    if status in ("partial", "no_answer") and any(part.casefold() not in lowered for part in missing):
        lines.append(("还缺少：" + "；".join(missing) + "。") if lang_zh else ("Missing: " + "; ".join(missing) + "."))
    return "\n".join(lines)



# --- the coverage account -----------------------------------------------------------------------------------

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
        # A whole reply's tokens, not a structured reply's half: the check's schema bounds its lists, and cut at
        # half the limit a small model's account could not be read (a reply of 64 tokens on a 128-token limit).
        reply = yield from ModelCall("check", check_request(state, answer, context), schema=ClosingCheck,
                                     advisory=True, max_output_tokens=context.max_output_tokens)
    except Exception as exc:  # noqa: BLE001 - e.g. a model without structured output: no account
        log_fallback(node, "coverage_unchecked", exc)
        return UNCHECKED, 0
    parsed = reply.parsed
    tokens = tokens_of(reply.message)
    if not isinstance(parsed, ClosingCheck):
        log_fallback(node, "coverage_unchecked", reply.parsing_error or "no structured output")
        return UNCHECKED, tokens
    return model_account(parsed.parts, parsed.missing), tokens



# --- the closing call ---------------------------------------------------------------------------------------

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
    account (`coverage_account`: the verdict's, or one self-check call). The answer gains a line saying
    what its status rests on (a cut-off, the missing parts) unless it says so itself (`annotated`)."""
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



# --- respond ------------------------------------------------------------------------------------------------

ATTEMPTS = 3  # the first request and two more, each told what was wrong with the reply before
NOT_ASKED = frozenset({"failed", "budget_exhausted"})
KEPT = frozenset({"limit_reached", "no_answer"})  # already worse than a missing structured response
MAX_SHOWN = 2_000  # characters of the structured response in its step record


def make_respond(services: AgentServices, response_format: ResponseFormat) -> Node:
    """The respond node for `response_format`."""

    def respond(state: Mapping[str, Any], runtime: Runtime[Context], config: RunnableConfig) -> Steps:
        started = time.perf_counter()
        answer = final_answer_of(state)
        if status_of(state) in NOT_ASKED or not answer:
            return {"structured_response": None}
        asked: list[BaseMessage] = formats.request(question_text(messages_of(state)), answer)
        problem = ""
        for _ in range(ATTEMPTS):
            try:
                output = yield from ModelCall("respond", asked, schema=response_format)
            except Exception as exc:  # noqa: BLE001 - after the retries (and fallbacks): the text answer stays
                problem = failure_line(exc, runtime, name_model=False)
                break
            try:
                value = _validated(output, response_format)
            except ValueError as exc:
                problem = str(exc)
                asked = [*asked[:2], formats.retry_note(problem)]
                continue
            return _responded(state, value, response_format, started)
        log_fallback("respond", "no_structured_response", problem)
        return _unanswered(state, problem, started)

    return dual_node(respond, name="respond", models=services.models)


def _validated(output: ModelReply, response_format: ResponseFormat) -> Any:
    """The structured response in a reply; ValueError with why it is not."""
    if (error := output.parsing_error) is not None:
        raise ValueError(f"{response_format.name}: the reply could not be read ({describe(error)})")
    if output.parsed is None:
        raise ValueError(f"{response_format.name}: the reply held no structured answer")
    return response_format.validate(output.parsed)


def _responded(state: Mapping[str, Any], value: Any, response_format: ResponseFormat,
               started: float) -> dict[str, Any]:
    shown = json.dumps(formats.jsonable(value), ensure_ascii=False)
    record = make_step(step=iteration_of(state), node="respond", status="structured_response",
                       thought=f"{response_format.name} ({response_format.strategy} strategy)",
                       observation=shown[:MAX_SHOWN], latency_ms=(time.perf_counter() - started) * 1000)
    # JSON data: the graph's `structured_response` channel gives the run the instance (graph/structured.py)
    return {"structured_response": formats.jsonable(value), "steps": [record]}


def _unanswered(state: Mapping[str, Any], problem: str, started: float) -> dict[str, Any]:
    """No structured response: None, status no_answer unless already worse, the answer saying why."""
    status = status_of(state)
    status = status if status in KEPT else "no_answer"
    note = f"(No structured response: {problem})"
    answer = f"{final_answer_of(state)}\n\n{note}"
    record = make_step(step=iteration_of(state), node="respond", status=status, thought=problem,
                       observation=answer, latency_ms=(time.perf_counter() - started) * 1000)
    update: dict[str, Any] = {"structured_response": None, "status": status, "final_answer": answer,
                              "steps": [record]}
    last = next((m for m in reversed(messages_of(state)) if isinstance(m, AIMessage)), None)
    if last is not None and last.id is not None and last.text.strip() == final_answer_of(state).strip():
        # the answer's message says it too
        update["messages"] = [last.model_copy(update={"content": answer})]
    return update
