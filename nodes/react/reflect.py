"""`reflect`: a structured self-check after each round — from the model (`llm`) or from rules."""

from __future__ import annotations

import time
from typing import Any

from langchain_core.messages import AnyMessage, SystemMessage
from langchain_core.runnables import RunnableLambda

from reactgraph.nodes.shared import prompts
from reactgraph.nodes.shared.context import Context, current_context
from reactgraph.nodes.shared.loop_guard import repeated_calls, rules_verdict
from reactgraph.nodes.shared.verdict import ReflectionVerdict
from reactgraph.nodes.shared.services import AgentServices
from reactgraph.nodes.shared.state import AgentState, make_step
from reactgraph.nodes.shared.transcript import tokens_of


def _settle(state: AgentState, verdict: ReflectionVerdict, tokens: int, started: float) -> dict[str, Any]:
    iteration = state.get("iteration", 0)
    # The loop guard is authoritative: a model may miss a repeat, but a repeat must always stop the loop.
    if repeated_calls(state.get("steps", []), iteration):
        verdict = verdict.model_copy(update={"repeated_call": True})
    step = make_step(step=iteration, node="reflect", status="reflection", thought=verdict.note,
                     observation=verdict.model_dump_json(), tokens=tokens,
                     latency_ms=(time.perf_counter() - started) * 1000)
    return {"reflection": verdict.model_dump(), "steps": [step]}


def _from_model_output(output: dict[str, Any], state: AgentState) -> tuple[ReflectionVerdict, int]:
    """The parsed verdict, or the rules' verdict when the model's output could not be parsed."""
    tokens = tokens_of(output.get("raw"))
    parsed = output.get("parsed")
    if isinstance(parsed, ReflectionVerdict):
        return parsed, tokens
    fallback = rules_verdict(state.get("steps", []), state.get("iteration", 0))
    reason = output.get("parsing_error") or "no structured output"
    return fallback.model_copy(update={"note": f"{fallback.note} (model reflection unusable: "
                                               f"{str(reason)[:120]}; used rules)".strip()}), tokens


def make_reflect(services: AgentServices) -> RunnableLambda:
    """The reflect node (sync and async)."""

    def prepare(state: AgentState):
        context: Context = current_context()
        # A text-protocol model may offer no structured output, so its `llm` reflection uses the rules.
        if context.reflection != "llm" or context.protocol == "text":
            return None, None
        judge = services.model(context).with_structured_output(ReflectionVerdict, include_raw=True)
        messages: list[AnyMessage] = [SystemMessage(prompts.REFLECT_PROMPT), *state["messages"]]
        return judge, messages

    def rules_only(state: AgentState, started: float) -> dict[str, Any]:
        if current_context().reflection == "off":
            return {"reflection": None}
        return _settle(state, rules_verdict(state.get("steps", []), state.get("iteration", 0)), 0, started)

    def model_failed(state: AgentState, exc: Exception, started: float) -> dict[str, Any]:
        verdict = rules_verdict(state.get("steps", []), state.get("iteration", 0))
        note = f"{verdict.note} (model reflection failed: {type(exc).__name__}; used rules)".strip()
        return _settle(state, verdict.model_copy(update={"note": note}), 0, started)

    def reflect(state: AgentState) -> dict[str, Any]:
        started = time.perf_counter()
        judge, messages = prepare(state)
        if judge is None:
            return rules_only(state, started)
        try:
            output = judge.invoke(messages)
        except Exception as exc:  # noqa: BLE001 - reflection is advisory; the loop goes on without it
            return model_failed(state, exc, started)
        return _settle(state, *_from_model_output(output, state), started)

    async def areflect(state: AgentState) -> dict[str, Any]:
        started = time.perf_counter()
        judge, messages = prepare(state)
        if judge is None:
            return rules_only(state, started)
        try:
            output = await judge.ainvoke(messages)
        except Exception as exc:  # noqa: BLE001
            return model_failed(state, exc, started)
        return _settle(state, *_from_model_output(output, state), started)

    return RunnableLambda(reflect, areflect, name="reflect")
