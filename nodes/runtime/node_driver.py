"""One body for a node's sync and async runs: the body is a generator that yields the calls it needs made.

A body is `body(state, runtime, config)`. It asks for a model call with `reply = yield from ModelCall(...)`
(the graph's model gateway makes it: models/gateway.py, a `ModelReply` comes back), for a subgraph run with
`result = yield from Call(graph, input)` (`invoke`, or `ainvoke` under the graph's `ainvoke`), and for the tool
gateway's async API with `result = yield from Await(coroutine)` (awaited, or run on the sync bridge under
`invoke`). A failed call is thrown into the body at its `yield from`, so failures are handled with an ordinary
try/except; a model call fails there only after the gateway's retry and fallback steps. Only the driver differs
between `invoke` and `ainvoke`, so no node is written twice.

The body returns its state update. What its calls used (the gateway's account of the model calls, one per tool
result) goes into the update's `usage`, and the model fallbacks the gateway took into its steps and
`active_model`, the same way for every node (`Node`).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Coroutine, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langchain_core.runnables.config import set_config_context
from langgraph.runtime import Runtime, get_runtime
from langgraph.types import Overwrite

from reactgraph.models.gateway import (
    FALLBACK_EVENT,
    Fallback,
    ModelCall,
    ModelFailure,
    ModelGateway,
    ModelTurn,
    Usage,
    add_usage,
    attempt_of,
)
from reactgraph.nodes.context import Context, resolve_context
from reactgraph.nodes.conversation import current_question
from reactgraph.nodes.state import ActiveModel, make_step
from reactgraph.tools import ToolResult
from reactgraph.tools.sync_bridge import run_sync

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """A runnable call a body asks for (a subgraph run): `runnable.invoke(input, config, **kwargs)` (or
    `ainvoke`). `yield from` it: the value is the call's result."""

    runnable: Runnable[Any, T]
    input: Any
    config: RunnableConfig | None = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __iter__(self) -> Generator[Request, Any, T]:
        return (yield self)


@dataclass(frozen=True, slots=True)
class Await(Generic[T]):
    """A coroutine a body asks to have awaited (on the sync bridge under `invoke`). `yield from` it: the value is
    the coroutine's."""

    coroutine: Coroutine[Any, Any, T]

    def __iter__(self) -> Generator[Request, Any, T]:
        return (yield self)


Request = ModelCall | Call[Any] | Await[Any]
Update = dict[str, Any]
# What a body is: it yields requests, is sent their results, and returns the node's state update.
Steps = Generator[Request, Any, Update]
Body = Callable[[Any, Runtime[Context], RunnableConfig], Steps]


def _runtime() -> Runtime[Context]:
    """The run's runtime (LangGraph's public accessor), with a resolved `Context` (None or a mapping becomes one)."""
    runtime: Runtime[Context] = get_runtime()
    if isinstance(runtime.context, Context):
        return runtime
    return runtime.override(context=resolve_context(runtime.context))


def _question_id(state: Any) -> str | None:
    question = current_question(state.get("messages") or []) if isinstance(state, Mapping) else None
    return question.id if question is not None else None


def _active_model(state: Any, context: Context) -> str | None:
    """The fallback that took over earlier in this turn (the state's `active_model`), or None."""
    active = state.get("active_model") if isinstance(state, Mapping) else None
    if (not isinstance(active, Mapping) or active.get("question") != _question_id(state)
            or active.get("model") not in context.fallback_models):
        return None
    return str(active["model"])


def _tool_usage(result: Any) -> Usage:
    return Usage(tool_calls=1) if isinstance(result, ToolResult) else Usage()


def drive(steps: Steps, models: ModelGateway | None, turn: ModelTurn, config: RunnableConfig) -> tuple[Update, Usage]:
    """Run a body with sync calls: its update, and what its tool calls used."""
    usage = Usage()
    try:
        request = next(steps)
    except StopIteration as done:  # a body that asked for nothing
        return done.value, usage
    while True:
        result, failure = None, None
        try:
            if isinstance(request, ModelCall):
                result = _gateway(models).invoke(request, turn, config)
            elif isinstance(request, Call):
                result = request.runnable.invoke(request.input, request.config, **request.kwargs)
            else:
                result = run_sync(request.coroutine)
        except Exception as exc:  # noqa: BLE001 - handed to the body, or re-raised (see _failure_of)
            failure = _failure_of(request, exc)
        usage = add_usage(usage, _tool_usage(result))
        request = _advance(steps, result, failure)
        if isinstance(request, _Ended):
            return request.update, usage


async def adrive(steps: Steps, models: ModelGateway | None, turn: ModelTurn,
                 config: RunnableConfig) -> tuple[Update, Usage]:
    """Run a body with awaited calls: its update, and what its tool calls used."""
    usage = Usage()
    try:
        request = next(steps)
    except StopIteration as done:  # a body that asked for nothing
        return done.value, usage
    while True:
        result, failure = None, None
        try:
            if isinstance(request, ModelCall):
                result = await _gateway(models).ainvoke(request, turn, config)
            elif isinstance(request, Call):
                result = await request.runnable.ainvoke(request.input, request.config, **request.kwargs)
            else:
                result = await request.coroutine
        except Exception as exc:  # noqa: BLE001 - handed to the body, or re-raised (see _failure_of)
            failure = _failure_of(request, exc)
        usage = add_usage(usage, _tool_usage(result))
        request = _advance(steps, result, failure)
        if isinstance(request, _Ended):
            return request.update, usage


def _failure_of(request: Any, exc: Exception) -> BaseException:
    """What the body is told of its request's failure. A model call's failure after the gateway's retries and
    fallbacks is the body's to handle; anything else a model call raises propagates — for LangGraph's
    RetryPolicy, or a model that cannot be loaded at all."""
    if isinstance(exc, ModelFailure):
        return exc.error
    if isinstance(request, ModelCall):
        raise exc
    return exc


class _Ended(NamedTuple):
    update: Update


def _advance(steps: Steps, result: Any, failure: BaseException | None) -> Any:
    """The body's next request, given its last one's result or failure; `_Ended` with its update once it ends."""
    try:
        return steps.send(result) if failure is None else steps.throw(failure)
    except StopIteration as done:
        return _Ended(done.value)


def _gateway(models: ModelGateway | None) -> ModelGateway:
    if models is None:
        raise TypeError("this node was built without a model gateway: it cannot make a model call")
    return models


def charged(update: Update, usage: Usage) -> Update:
    """The node's update with what its calls used added to the `usage` channel (inside a turn's start, which
    replaces the channel with `Overwrite`, the node's own usage is kept)."""
    if not usage:
        return update
    current = update.get("usage")
    if isinstance(current, Overwrite):
        return {**update, "usage": Overwrite(add_usage(current.value, usage))}
    return {**update, "usage": add_usage(current, usage)}


def with_fallbacks(update: Update, state: Any, turn: ModelTurn) -> Update:
    """The node's update with a `model_fallback` record per switch the gateway made, before its own records,
    and the turn's active model (the rest of the turn's nodes start with the fallback)."""
    if not turn.fallbacks:
        return update
    iteration = (state.get("iteration") or 0) if isinstance(state, Mapping) else 0
    records = [make_step(step=iteration, node=turn.node, status="model_fallback",
                         thought=f"{switch.failed} failed: {switch.error}",
                         observation=f"{switch.model} answers from here on") for switch in turn.fallbacks]
    steps = update.get("steps")
    steps = Overwrite([*records, *steps.value]) if isinstance(steps, Overwrite) else [*records, *(steps or [])]
    active = ActiveModel(model=turn.spec or "", question=_question_id(state))
    return {**update, "steps": steps, "active_model": active}


def _event(switch: Fallback, node: str) -> dict[str, Any]:
    return {"node": node, "failed": switch.failed, "model": switch.model, "error": switch.error}


class Node(Runnable[Any, Update]):
    """A node to give `StateGraph.add_node`: `body` driven by sync calls under `invoke`, by awaits under `ainvoke`;
    its model calls go through `models`, whose retry policy is the node's. Untraced itself: LangGraph traces the
    node's run."""

    def __init__(self, body: Body, *, name: str, models: ModelGateway | None = None) -> None:
        self.body, self.name, self.models = body, name, models
        self.node_name = name

    def _turn(self, runtime: Runtime[Context], state: Any) -> ModelTurn:
        spent = state.get("usage") if isinstance(state, Mapping) else None
        return ModelTurn(settings=runtime.context, node=self.node_name,
                         retry=self.models.retry if self.models is not None else None,
                         attempt=attempt_of(runtime), spec=_active_model(state, runtime.context),
                         spent=Usage(**(spent or {})))

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Update:
        config = config if config is not None else ensure_config()
        runtime = _runtime()
        turn = self._turn(runtime, input)
        try:
            update, usage = drive(self.body(input, runtime, config), self.models, turn, config)
        finally:
            for switch in turn.fallbacks:
                with contextlib.suppress(RuntimeError):  # outside a traced run (no parent run): nothing to tell
                    dispatch_custom_event(FALLBACK_EVENT, _event(switch, self.node_name), config=config)
        return with_fallbacks(charged(update, add_usage(turn.usage, usage)), input, turn)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Update:
        config = config if config is not None else ensure_config()
        runtime = _runtime()
        turn = self._turn(runtime, input)
        try:
            update, usage = await adrive(self.body(input, runtime, config), self.models, turn, config)
        finally:
            for switch in turn.fallbacks:
                with contextlib.suppress(RuntimeError):
                    await adispatch_custom_event(FALLBACK_EVENT, _event(switch, self.node_name), config=config)
        return with_fallbacks(charged(update, add_usage(turn.usage, usage)), input, turn)


def dual_node(body: Body, *, name: str, models: ModelGateway | None = None) -> Node:
    """The node LangGraph runs for `body` (see `Node`)."""
    return Node(body, name=name, models=models)


class Route(Runnable[Any, Any]):
    """A routing function for `add_conditional_edges`, run without a trace span of its own (LangGraph traces a
    plain function's every call; a route is a pure function of the state, and the node before it is traced).
    It is passed `runtime` when it takes a parameter of that name."""

    def __init__(self, route: Callable[..., Any]) -> None:
        self.route = route
        self.name = getattr(route, "__name__", None) or getattr(getattr(route, "func", None), "__name__", None)
        self._runtime = "runtime" in inspect.signature(route).parameters

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if self._runtime:  # LangGraph runs a route outside its node's config context: set it to read the runtime
            with set_config_context(config or ensure_config()) as context:
                kwargs["runtime"] = context.run(_runtime)
        return self.route(input, **kwargs)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self.invoke(input, config, **kwargs)


def edge(route: Callable[..., Any]) -> Route:
    """`route` as a conditional edge (see `Route`)."""
    return Route(route)
