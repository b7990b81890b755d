"""`self_reflect`: after a failed trial, write a lesson to the long-term store and to the next trial's prompt."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from langchain_core.messages import SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from reactgraph.models.gateway import ModelCall, ModelReply
from reactgraph.nodes import prompts
from reactgraph.nodes.context import Context
from reactgraph.nodes.conversation import question_text, tokens_of
from reactgraph.nodes.driver import AgentServices, Await, Node, Steps, dual_node, log_fallback
from reactgraph.nodes.prompts import for_model, with_notes
from reactgraph.nodes.reflexion.budget_stop import stopped_by_budget
from reactgraph.nodes.reflexion.load_lessons import session_of
from reactgraph.nodes.reflexion.state import (
    MAX_LESSONS,
    Lesson,
    ReflexionState,
    failed_because,
    lessons_namespace,
    trajectory_of,
    trial_of,
)
from reactgraph.nodes.state import final_answer_of, iteration_of, lessons_of, make_step, turn_id_of


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
