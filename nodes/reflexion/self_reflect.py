"""`self_reflect`: after a failed trial, write a lesson to the long-term store and to the next trial's prompt."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

from langchain_core.messages import SystemMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.runtime import get_runtime

from reactgraph.nodes.shared import prompts
from reactgraph.nodes.shared.context import Context, current_context
from reactgraph.nodes.reflexion.load_lessons import session_of
from reactgraph.nodes.shared.services import AgentServices
from reactgraph.nodes.shared.state import make_step
from reactgraph.nodes.shared.transcript import current_question, text_of, tokens_of
from reactgraph.nodes.reflexion.state import MAX_LESSONS, Lesson, ReflexionState, lessons_namespace


def rules_lesson(state: ReflexionState) -> str:
    """A lesson from the evaluation alone, when the model cannot write one."""
    reason = (state.get("evaluation") or {}).get("reason") or "it did not pass the check"
    return (f"Attempt {state.get('trial', 0)} did not pass ({reason}). Check every part of the question against "
            f"the tool results, and try another tool or query for the parts that are missing.")


def _remember(state: ReflexionState, config: RunnableConfig, lesson: str, how: str, tokens: int,
              started: float) -> dict[str, Any]:
    trial = state.get("trial", 0)
    evaluation = state.get("evaluation") or {}
    if (store := get_runtime().store) is not None:
        # Keyed by question and trial: a resumed run rewrites the same lesson instead of adding a copy.
        store.put(lessons_namespace(session_of(config)), f"{state.get('turn_id')}:{trial}", {
            "question": text_of(current_question(state["messages"])).strip(), "lesson": lesson, "trial": trial,
            "answer": state.get("final_answer") or "", "reason": evaluation.get("reason", ""),
            "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds")})
    record = make_step(step=state.get("iteration", 0), node="self_reflect", status="lesson", thought=how,
                       observation=lesson, tokens=tokens, latency_ms=(time.perf_counter() - started) * 1000)
    lessons = list(dict.fromkeys([*(state.get("lessons") or []), lesson]))  # the same lesson twice adds nothing
    return {"lessons": lessons[-MAX_LESSONS:], "steps": [record]}


def make_self_reflect(services: AgentServices) -> RunnableLambda:
    """The self_reflect node (sync and async)."""

    def prepare(state: ReflexionState):
        context: Context = current_context()
        if context.protocol == "text":  # a text-only model may offer no structured output
            return None, None
        reason = (state.get("evaluation") or {}).get("reason") or "no reason given"
        writer = services.model(context).with_structured_output(Lesson, include_raw=True)
        return writer, [SystemMessage(prompts.SELF_REFLECT_PROMPT.format(reason=reason)),
                        *state.get("trajectory", [])]

    def settle(state: ReflexionState, config: RunnableConfig, output: Any, started: float) -> dict[str, Any]:
        if isinstance(output, dict) and isinstance(parsed := output.get("parsed"), Lesson) and parsed.lesson.strip():
            return _remember(state, config, parsed.lesson.strip(), "model", tokens_of(output.get("raw")), started)
        why = "rules (model lesson unusable)" if output is not None else "rules"
        return _remember(state, config, rules_lesson(state), why, 0, started)

    def self_reflect(state: ReflexionState, config: RunnableConfig) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            writer, request = prepare(state)
            output = writer.invoke(request) if writer is not None else None
        except Exception:  # noqa: BLE001 - a lesson from the rules still goes to the next trial
            output = {}
        return settle(state, config, output, started)

    async def aself_reflect(state: ReflexionState, config: RunnableConfig) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            writer, request = prepare(state)
            output = await writer.ainvoke(request) if writer is not None else None
        except Exception:  # noqa: BLE001
            output = {}
        return settle(state, config, output, started)

    return RunnableLambda(self_reflect, aself_reflect, name="self_reflect")
