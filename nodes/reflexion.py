"""Reflexion: trials of the ReAct graph (the actor) at one question, each judged, with a lesson after each one
that failed.

`load_lessons` starts a question's trials: it captures how to check the answer (the input's expected text or a
registered checker) and recalls lessons from earlier runs in the long-term store. `trial` runs the actor as a
subgraph with the lessons so far in its prompt, inheriting checkpointer, store and thread, within what earlier
trials left of each budget. `evaluate` judges the last trial: by the task's checker or expected text when given,
else by the model. `self_reflect`, after a failed trial, writes a lesson to the long-term store and to the next
trial's prompt. An evaluation or a lesson that uses up a budget ends the run, as a trial that ran out of one
does (`stopped_by_budget`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, NotRequired

from langchain_core.messages import AIMessage, AnyMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from reactgraph.memory.session_id import store_label
from reactgraph.models.gateway import ModelCall, ModelReply, add_usage
from reactgraph.nodes import prompts
from reactgraph.nodes.budget import exhausted, remaining_context, wrap_up_note
from reactgraph.nodes.context import Context
from reactgraph.nodes.conversation import last_human_index, question_text, tokens_of, turn_question
from reactgraph.nodes.driver import AgentServices, Await, Call, Node, Steps, dual_node, log_fallback
from reactgraph.nodes.prompts import for_model, with_notes
from reactgraph.nodes.state import (
    AGENT_TURN,
    AgentState,
    ExecutionStep,
    begin_turn,
    budget_stopped,
    final_answer_of,
    has_failed,
    iteration_of,
    lessons_of,
    make_step,
    messages_of,
    status_of,
    steps_of,
    stop_reason_of,
    turn_id_of,
    usage_of,
)
from reactgraph.nodes.text_protocol import corrections_left
from reactgraph.nodes.tool_commands import CommandRules

# --- the state and the schemas ------------------------------------------------------------------------------

# Lessons shown to a trial: the newest few, so the prompt stays bounded when a question is retried often.
MAX_LESSONS = 5


class Evaluation(BaseModel):
    """A judgement of one attempt at the user's question."""

    passed: bool = Field(description="True only if the answer fully and correctly answers every part of the "
                                     "question from the tool results.")
    reason: str = Field(default="", description="One sentence saying why.")


class Lesson(BaseModel):
    """What the next attempt should do differently."""

    lesson: str = Field(description="One or two concrete sentences: what went wrong and what to do instead.")


class ReflexionInput(TypedDict):
    """A question, and optionally how to check its answer (else the model judges)."""

    messages: Annotated[list[AnyMessage], add_messages]
    # Text(s) the answer must contain (case-insensitive; "127,750" matches "127750").
    expected: NotRequired[str | list[str] | None]
    # Name of a checker registered in CHECKERS (`register_checker`), and its keyword arguments.
    checker: NotRequired[str | None]
    checker_params: NotRequired[dict[str, Any] | None]


# Who judged a trial: the task's checker or expected text, the model, the rules, or the trial's failed status.
JudgedBy = Literal["checker", "expected", "model", "rules", "status"]


class EvaluationRecord(TypedDict):
    """The judgement of the last trial as the state holds it (the `evaluation` field)."""

    passed: bool
    reason: str
    by: JudgedBy


class Criteria(TypedDict):
    """How this question's answer is checked, captured from the input (see `ReflexionInput`)."""

    expected: str | list[str] | None
    checker: str | None
    params: dict[str, Any]


class ReflexionState(AgentState):
    """The session, plus this question's trials. `iteration` and `steps` add up over the trials."""

    expected: NotRequired[str | list[str] | None]
    checker: NotRequired[str | None]
    checker_params: NotRequired[dict[str, Any] | None]
    # The input's checking criteria, captured for this turn (the input fields are cleared so the next
    # question on the thread is not checked against them).
    criteria: NotRequired[Criteria]
    trial: NotRequired[int]  # trials run so far for this question
    evaluation: NotRequired[EvaluationRecord | None]  # the last trial's judgement
    trajectory: NotRequired[list[AnyMessage]]  # the last trial's messages, from the question on


# Reflexion's per-turn fields (begin_turn): every run of the graph starts its trials afresh. The input's criteria
# are cleared so that the next question on this thread is not checked against this one's.
REFLEXION_TURN: Mapping[str, Any] = {**AGENT_TURN, "trial": 0, "evaluation": None, "trajectory": [],
                                     "expected": None, "checker": None, "checker_params": None}


# Reading Reflexion's own fields, each with its default (the agent state's fields: nodes/state.py).

def trial_of(state: Mapping[str, Any]) -> int:
    """Trials run so far for this question."""
    return state.get("trial") or 0


def evaluation_of(state: Mapping[str, Any]) -> EvaluationRecord | None:
    """The last trial's judgement, or None (no trial judged yet)."""
    return state.get("evaluation") or None


def failed_because(state: Mapping[str, Any], default: str) -> str:
    """Why the last trial did not pass, as its judgement said (`default` when it said nothing)."""
    evaluation = evaluation_of(state)
    return (evaluation["reason"] if evaluation else "") or default


def trajectory_of(state: Mapping[str, Any]) -> list[AnyMessage]:
    """The last trial's messages, from the question on."""
    return state.get("trajectory") or []


def criteria_of(state: Mapping[str, Any]) -> Criteria:
    """The checking criteria captured for this question (none: the model judges)."""
    return state.get("criteria") or Criteria(expected=None, checker=None, params={})


def input_criteria(state: Mapping[str, Any]) -> Criteria:
    """The checking criteria the input brought (`expected`, `checker`, `checker_params`)."""
    return Criteria(expected=state.get("expected"), checker=state.get("checker"),
                    params=state.get("checker_params") or {})


def lessons_namespace(session: str) -> tuple[str, ...]:
    """Where a session's lessons live in the long-term store (episodic memory; the id encoded as a label)."""
    return ("lessons", store_label(session))


def answer_id(turn_id: str | None) -> str:
    """The id of this turn's answer message: each trial replaces the previous trial's answer."""
    return f"{turn_id or 'turn'}:answer"



# --- a budget used up between trials ------------------------------------------------------------------------

def _in_chinese(state: ReflexionState) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in question_text(state["messages"]))


def stopped_by_budget(state: ReflexionState, runtime: Runtime[Context], update: dict[str, Any],
                      reply: ModelReply) -> dict[str, Any]:
    """`update` of an evaluate / self_reflect node whose model call (`reply`) used up a budget:
    the run ends (no further trial or lesson) with the last trial's answer plus the wrap-up note, status
    `budget_exhausted`, `stop_reason`/`budget` set. Unchanged when every budget still has room.

    The node driver adds this call's usage to the update afterwards; the reply's `turn_usage` decides here."""
    spent = exhausted(reply.turn_usage, runtime.context)
    if spent is None:
        return update
    answer = f"{final_answer_of(state)}\n\n{wrap_up_note(spent, _in_chinese(state))}".strip()
    steps = [{**step, "observation": f"{step['observation']}\n{wrap_up_note(spent, _in_chinese(state))}"}
             for step in update.get("steps", [])]
    return {**update, "steps": steps, "final_answer": answer, "status": "budget_exhausted", "stop_reason": "budget",
            "budget": spent, "messages": [AIMessage(answer, id=answer_id(turn_id_of(state)))]}



# --- evaluate -----------------------------------------------------------------------------------------------

# A checker takes the answer, the run's ExecutionStep records and the task's params (the same shape as
# evals.checks, so a harness can register its own): True/False, or (passed, reason).
Checker = Callable[..., bool | tuple[bool, str]]
CHECKERS: dict[str, Checker] = {}


def register_checker(name: str, checker: Checker | None = None) -> Any:
    """Register a checker a Reflexion input can name (`{"checker": name}`); usable as a decorator."""
    def register(fn: Checker) -> Checker:
        CHECKERS[name] = fn
        return fn
    return register(checker) if checker is not None else register


@register_checker("answered")
def answered(answer: str, steps: Sequence[ExecutionStep], **_: Any) -> tuple[bool, str]:
    """The last attempt ended with status answered (not at the limit, not failed)."""
    final = next((s for s in reversed(steps) if s["node"] == "finalize"), None)
    status = final["status"] if final else "none"
    return bool(answer.strip()) and status == "answered", f"the attempt ended with status {status}"


def normalise(text: str) -> str:
    """Casefolded, thousands separators inside numbers removed ("127,750" → "127750")."""
    return re.sub(r"(?<=\d)[,，](?=\d{3}\b)", "", text or "").casefold()


def by_criteria(state: ReflexionState) -> EvaluationRecord | None:
    """The verdict of the task's own check, or None when the question came without one."""
    criteria = criteria_of(state)
    answer = final_answer_of(state)
    if name := criteria.get("checker"):
        verdict = CHECKERS[name](answer, steps_of(state), **(criteria.get("params") or {}))
        passed, reason = verdict if isinstance(verdict, tuple) else (bool(verdict), "")
        return {"passed": bool(passed), "reason": reason or f"checker {name} {'passed' if passed else 'failed'}",
                "by": "checker"}
    if expected := criteria.get("expected"):
        wanted = [expected] if isinstance(expected, str) else list(expected)
        missing = [text for text in wanted if normalise(text) not in normalise(answer)]
        reason = (f"the answer does not contain {', '.join(repr(m) for m in missing)}" if missing
                  else "the answer contains the expected text")
        return {"passed": not missing, "reason": reason, "by": "expected"}
    return None


def by_rules(state: ReflexionState, why: str = "") -> EvaluationRecord:
    """No model judgement to be had: an attempt that answered (not at the limit, not failed) passes."""
    status = status_of(state) or "none"
    reason = f"the attempt ended with status {status}" + (f" ({why})" if why else "")
    return {"passed": status == "answered", "reason": reason, "by": "rules"}


def _settle(state: ReflexionState, verdict: EvaluationRecord, tokens: int, started: float) -> dict[str, Any]:
    record = make_step(step=iteration_of(state), node="evaluate", status="passed" if verdict["passed"] else
                       "failed", thought=f"trial {trial_of(state)} · judged by {verdict['by']}",
                       observation=verdict["reason"], tokens=tokens, latency_ms=(time.perf_counter() - started) * 1000)
    return {"evaluation": verdict, "steps": [record]}


def _from_output(state: ReflexionState, output: ModelReply, started: float) -> dict[str, Any]:
    parsed = output.parsed
    if isinstance(parsed, Evaluation):
        verdict = EvaluationRecord(passed=parsed.passed, reason=parsed.reason, by="model")
    else:
        verdict = by_rules(state, f"model judgement unusable: {str(output.parsing_error or '')[:120]}")
    return _settle(state, verdict, tokens_of(output.message), started)


def without_model(state: ReflexionState, context: Context) -> EvaluationRecord | None:
    """The verdict when no model judgement is needed or to be had, else None."""
    if has_failed(state):
        reason = f"the attempt failed: {final_answer_of(state)[:200]}"
        return {"passed": False, "reason": reason, "by": "status"}
    if (verdict := by_criteria(state)) is not None:
        return verdict
    if context.protocol == "text":  # a text-only model may offer no structured output
        return by_rules(state)
    return None


def make_evaluate(services: AgentServices) -> Node:
    """The evaluate node: the task's own check when it has one, else the model's judgement, else the rules."""

    def evaluate(state: ReflexionState, runtime: Runtime[Context], config: RunnableConfig) -> Steps:
        started = time.perf_counter()
        if (verdict := without_model(state, runtime.context)) is not None:
            return _settle(state, verdict, 0, started)
        request = [SystemMessage(prompts.EVALUATE_PROMPT), *for_model(trajectory_of(state))]
        try:
            output = yield from ModelCall("evaluate", request, schema=Evaluation)
        except Exception as exc:  # noqa: BLE001 - judging is advisory; the rules decide without it
            log_fallback("evaluate", "judgement_rules", exc)
            return _settle(state, by_rules(state, f"model judgement failed: {type(exc).__name__}"), 0, started)
        update = _from_output(state, output, started)
        if update["evaluation"]["passed"]:  # a passed answer keeps its status, whatever the judging cost
            return update
        return stopped_by_budget(state, runtime, update, output)

    return dual_node(evaluate, name="evaluate", models=services.models)



# --- load_lessons -------------------------------------------------------------------------------------------

def session_of(config: RunnableConfig | None) -> str:
    return str(((config or {}).get("configurable") or {}).get("thread_id") or "default")


def recalled_lessons(store: BaseStore | None, question: str, session: str) -> list[str]:
    """Lessons the store holds for this very question in this session (episodic memory), oldest first."""
    if store is None or not question:
        return []
    items = [i for i in store.search(lessons_namespace(session), limit=1000) if i.value.get("question") == question]
    items.sort(key=lambda item: (item.value.get("time", ""), item.value.get("trial", 0)))
    return [str(item.value["lesson"]) for item in items if item.value.get("lesson")][-MAX_LESSONS:]


def load_lessons(state: ReflexionState, runtime: Runtime[Any]) -> dict[str, Any]:
    """Reset the per-question fields; every run of the graph starts its trials afresh."""
    criteria = input_criteria(state)
    # a bad input is refused before any model or tool is called
    if (checker := criteria["checker"]) and checker not in CHECKERS:
        raise ValueError(f"unknown checker {checker!r}; registered: {', '.join(sorted(CHECKERS)) or 'none'}")
    turn_question(state["messages"])  # an empty question (a bare invoke, Studio) runs no trial
    lessons = recalled_lessons(runtime.store, question_text(state["messages"]), session_of(get_config()))
    return {**begin_turn(state, REFLEXION_TURN), "lessons": lessons, "criteria": criteria}



# --- trial --------------------------------------------------------------------------------------------------

def _actor_input(state: ReflexionState) -> dict[str, Any]:
    # The conversation without an earlier trial's answer: each trial starts from the question, not a transcript.
    previous = answer_id(turn_id_of(state))
    return {"messages": [m for m in state["messages"] if m.id != previous], "lessons": lessons_of(state)}


def _absorb(state: ReflexionState, result: dict[str, Any], context: Context,
            carried: Sequence[str] = ()) -> dict[str, Any]:
    """The trial's outcome in the run's terms: iterations and records add up; the answer replaces the last one;
    the `carried` fields (those the trial's tools may set with a Command) come back as the trial left them."""
    offset = iteration_of(state)
    messages = messages_of(result)
    spent = _spent(state, result, context)
    answer = _in_run_terms(final_answer_of(result), result.get("budget"), spent.get("budget"))
    return {"trial": trial_of(state) + 1, "iteration": offset + iteration_of(result),
            "steps": [{**step, "step": step["step"] + offset} for step in steps_of(result)],
            "final_answer": answer, "status": status_of(result), "reflection": result.get("reflection"),
            "coverage": result.get("coverage"),
            "trajectory": messages[max(last_human_index(messages), 0):],
            # a fallback that took over in the trial answers the rest of the turn (evaluate, lesson), as in ReAct
            **({"active_model": result["active_model"]} if result.get("active_model") else {}),
            "messages": [AIMessage(answer, id=answer_id(turn_id_of(state)))], **spent,
            **{name: result[name] for name in carried if name in result}}


def _in_run_terms(answer: str, trial_budget: Any, run_budget: Any) -> str:
    """The trial's wrap-up line names what was left to it; the run's answer names the run's budget."""
    if not trial_budget or not run_budget or trial_budget == run_budget:
        return answer
    for lang_zh in (False, True):  # the note is in the question's language
        answer = answer.replace(wrap_up_note(trial_budget, lang_zh), wrap_up_note(run_budget, lang_zh))
    return answer


def _spent(state: ReflexionState, result: dict[str, Any], context: Context) -> dict[str, Any]:
    """The trial's usage, added to the run's; a budget the trial ran out of is reported against the run's limit."""
    usage = usage_of(result)
    if stop_reason_of(result) == "format":  # the run's format-error budget is spent: no further trial
        return {"usage": usage, "stop_reason": "format"}
    if not budget_stopped(result):
        return {"usage": usage}
    spent = exhausted(add_usage(usage_of(state), usage), context)
    return {"usage": usage, "stop_reason": "budget", "budget": spent or result.get("budget")}


def make_trial(actor: CompiledStateGraph[Any, Any, Any, Any], middleware_fields: tuple[str, ...] = ()) -> Node:
    """The trial node: runs `actor` as a subgraph, inheriting checkpointer, store and thread. What the trial's
    tools set with a Command (tool_commands.py) and its middleware's state fields come back to the run's state;
    the middleware's fields also go to each trial (a call count goes on across trials)."""
    settable = [name for name in CommandRules.of(actor.builder.channels, {}).settable if name != "messages"]
    carried = list(dict.fromkeys([*settable, *middleware_fields]))

    def trial(state: ReflexionState, runtime: Runtime[Context], config: RunnableConfig) -> Steps:
        # The trial may spend what the earlier trials (and their evaluations) left of each budget.
        budgets = remaining_context(usage_of(state), runtime.context)
        # The format-error budget is the run's too, as in the other graphs: what earlier trials left of it.
        budgets = replace(budgets, max_format_errors=corrections_left(state, budgets.max_format_errors))
        given = {name: state[name] for name in middleware_fields if name in state}  # type: ignore[literal-required]
        result = yield from Call(actor, {**_actor_input(state), **given}, config, {"context": budgets})
        return _absorb(state, result, runtime.context, carried)

    return dual_node(trial, name="trial")



# --- self_reflect -------------------------------------------------------------------------------------------

def rules_lesson(state: ReflexionState) -> str:
    """A lesson from the evaluation alone, when the model cannot write one."""
    reason = failed_because(state, "it did not pass the check")
    return (f"Attempt {trial_of(state)} did not pass ({reason}). Check every part of the question against "
            f"the tool results, and try another tool or query for the parts that are missing.")


def _remember(state: ReflexionState, runtime: Runtime[Context], config: RunnableConfig, lesson: str, how: str,
              tokens: int, started: float) -> Steps:
    trial = trial_of(state)
    if (store := runtime.store) is not None:
        # Keyed by question and trial: a resumed run rewrites the same lesson instead of adding a copy. Yielded
        # as the store's async call: under `ainvoke` a synchronous store write would wait on the event loop.
        yield from Await(store.aput(lessons_namespace(session_of(config)), f"{turn_id_of(state)}:{trial}", {
            "question": question_text(state["messages"]), "lesson": lesson, "trial": trial,
            "answer": final_answer_of(state), "reason": failed_because(state, ""),
            "time": datetime.now(UTC).isoformat(timespec="milliseconds")}))
    record = make_step(step=iteration_of(state), node="self_reflect", status="lesson", thought=how,
                       observation=lesson, tokens=tokens, latency_ms=(time.perf_counter() - started) * 1000)
    lessons = list(dict.fromkeys([*lessons_of(state), lesson]))  # the same lesson twice adds nothing
    return {"lessons": lessons[-MAX_LESSONS:], "steps": [record]}


def make_self_reflect(services: AgentServices) -> Node:
    """The self_reflect node: the model's lesson, or one from the rules when the model cannot write one."""

    def self_reflect(state: ReflexionState, runtime: Runtime[Context], config: RunnableConfig) -> Steps:
        started = time.perf_counter()
        output: ModelReply | None = None
        asked = False
        if runtime.context.protocol != "text":  # a text-only model may offer no structured output
            reason = failed_because(state, "no reason given")
            notes = [prompts.FAILED_CHECK_SECTION.format(reason=reason)]
            request = [SystemMessage(prompts.SELF_REFLECT_PROMPT),
                       *for_model(with_notes(trajectory_of(state), notes))]
            asked = True
            try:
                output = yield from ModelCall("lesson", request, schema=Lesson)
            except Exception as exc:  # noqa: BLE001 - a lesson from the rules still goes to the next trial
                log_fallback("self_reflect", "lesson_rules", exc)
        if output is not None and isinstance(parsed := output.parsed, Lesson) and parsed.lesson.strip():
            update = yield from _remember(state, runtime, config, parsed.lesson.strip(), "model",
                                          tokens_of(output.message), started)
        else:
            why = "rules (model lesson unusable)" if asked else "rules"
            update = yield from _remember(state, runtime, config, rules_lesson(state), why, 0, started)
        # The lesson is kept either way; a budget it used up ends the run before another trial.
        return stopped_by_budget(state, runtime, update, output) if output is not None else update

    return dual_node(self_reflect, name="self_reflect", models=services.models)
