"""`reflect`: a structured self-check after each round — from the model (`llm`) or from rules."""

from __future__ import annotations

import time
from typing import Any

from langchain_core.messages import AnyMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from reactgraph.models.gateway import ModelCall, ModelReply
from reactgraph.nodes import prompts
from reactgraph.nodes.context import Context
from reactgraph.nodes.conversation import tokens_of
from reactgraph.nodes.driver import AgentServices, Node, Steps, dual_node, log_fallback
from reactgraph.nodes.prompts import for_model
from reactgraph.nodes.state import AgentState, ReflectionVerdict, iteration_of, make_step, steps_of
from reactgraph.nodes.tool_round import repeated_calls, rules_verdict


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
