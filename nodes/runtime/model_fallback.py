"""`Context.fallback_models`: when the model in use fails for good, the next one in the list takes over.

"For good" is after the retry policy gave up (model_retry.py): an error that is not transient (a bad key, a
model the provider does not have, a request it refuses), or a transient one on the node's last attempt. Any
exception from a model call counts, as for LangChain's `ModelFallbackMiddleware` (LangGraph's interrupts
excepted); tool calls and subgraphs do not switch models. The node driver then runs the node's body again with
the fallback as the run's model (`FallbackContext`), each fallback in turn; when the last one fails too, its
error goes to the node's own handling as without fallbacks (the turn usually ends `failed`, saying why).

The switch is recorded three ways: a step record (node: the node, status `model_fallback`, thought: which model
failed and why, observation: which one answers now), the state's `active_model` (so the rest of the turn's nodes
start with the fallback, with the retry policy as their current model; the next question starts with `model`
again), and a `reactgraph.model_fallback` callback event that the OpenTelemetry spans record (graph/run_spans.py).
A fallback taking over inside a node gets its provider's own retries there, not the node's re-runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from reactgraph.errors import ReactGraphError
from reactgraph.nodes.conversation.transcript import current_question
from reactgraph.nodes.runtime.fallback_log import describe, log_fallback
from reactgraph.nodes.state.agent import ExecutionStep, make_step
from reactgraph.nodes.state.context import Context, FallbackContext
from reactgraph.nodes.state.records import ActiveModel

EVENT = "reactgraph.model_fallback"


class SwitchModel(ReactGraphError):
    """Raised out of a body's drive when a model call failed for good and a fallback model is left."""

    def __init__(self, failure: Exception, failed: str, spec: str) -> None:
        super().__init__(f"{failed} failed; {spec} takes over")
        self.failure, self.failed, self.spec = failure, failed, spec
        self.usage: Any = None  # what the body's calls used before the switch (set by the driver)


def next_model(context: Context, failure: Exception) -> str | None:
    """The fallback after the model in use, or None (none left, or an interrupt, which is no failure)."""
    if isinstance(failure, GraphBubbleUp):
        return None
    specs = list(dict.fromkeys(context.fallback_models))  # each once: a repeated spec would be tried forever
    if isinstance(context, FallbackContext) and context.model in specs:
        specs = specs[specs.index(context.model) + 1:]
    return specs[0] if specs else None


def model_label(runnable: Any, context: Context) -> str:
    """The failed model's name: the run's model spec, unless the called runnable's chat model (a bound or
    configured one) is another (a graph's own model object)."""
    if not isinstance(context, FallbackContext):
        for _ in range(6):
            if isinstance(runnable, BaseChatModel):
                name = str(getattr(runnable, "model_name", None) or getattr(runnable, "model", None) or "")
                return context.model if context.model.endswith(f":{name}") else name or type(runnable).__name__
            runnable = getattr(runnable, "bound", None) or getattr(runnable, "first", None)
    return context.model


def question_id(state: Any) -> str | None:
    question = current_question(state.get("messages") or []) if isinstance(state, Mapping) else None
    return question.id if question is not None else None


def active_runtime(runtime: Runtime[Context], state: Any) -> Runtime[Context]:
    """The runtime with the turn's fallback model as its model, when one took over earlier in this turn."""
    active = state.get("active_model") if isinstance(state, Mapping) else None
    context = runtime.context
    if (not isinstance(active, Mapping) or active.get("question") != question_id(state)
            or active.get("model") not in context.fallback_models):
        return runtime
    return runtime.override(context=FallbackContext.of(context, active["model"]))


def switched(runtime: Runtime[Context], switch: SwitchModel, node: str) -> Runtime[Context]:
    """The runtime with the fallback as the run's model; the switch logged as a fallback the node took."""
    log_fallback(node, "model_fallback", f"{switch.failed} failed ({describe(switch.failure)}); {switch.spec} "
                 "takes over")
    return runtime.override(context=FallbackContext.of(runtime.context, switch.spec))


def record(state: Any, node: str, switch: SwitchModel) -> ExecutionStep:
    iteration = (state.get("iteration") or 0) if isinstance(state, Mapping) else 0
    return make_step(step=iteration, node=node, status="model_fallback",
                     thought=f"{switch.failed} failed: {describe(switch.failure)}",
                     observation=f"{switch.spec} answers from here on")


def with_switches(update: dict[str, Any], state: Any, records: list[ExecutionStep],
                  runtime: Runtime[Context]) -> dict[str, Any]:
    """The node's update with the switch records before its own and the turn's active model."""
    if not records:
        return update
    steps = update.get("steps")
    steps = Overwrite([*records, *steps.value]) if isinstance(steps, Overwrite) else [*records, *(steps or [])]
    active = ActiveModel(model=runtime.context.model, question=question_id(state))
    return {**update, "steps": steps, "active_model": active}


def _event(switch: SwitchModel, node: str) -> dict[str, Any]:
    return {"node": node, "failed": switch.failed, "model": switch.spec, "error": describe(switch.failure)}


def announce(switch: SwitchModel, node: str, config: RunnableConfig) -> None:
    """The switch as a callback event (tracing records it on the node's span)."""
    with contextlib.suppress(RuntimeError):  # outside a traced run (no parent run): nothing to tell
        dispatch_custom_event(EVENT, _event(switch, node), config=config)


async def aannounce(switch: SwitchModel, node: str, config: RunnableConfig) -> None:
    with contextlib.suppress(RuntimeError):
        await adispatch_custom_event(EVENT, _event(switch, node), config=config)
