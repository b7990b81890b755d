"""How a node runs: one body for its sync and async runs, the services a compiled graph's nodes share, and
one log record for every fallback a node takes.

A body is `body(state, runtime, config)`, a generator that yields the calls it needs made. It asks for a model
call with `reply = yield from ModelCall(...)` (the graph's model gateway makes it: models/gateway.py, a
`ModelReply` comes back), for a subgraph run with `result = yield from Call(graph, input)` (`invoke`, or
`ainvoke` under the graph's `ainvoke`), for a tool call with `result = yield from ToolRun(gateway, call,
session)` (the tool gateway's `execute_sync` on the node's own thread, or its `execute` awaited), and for any
other coroutine with `result = yield from Await(coroutine)` (awaited, or run on the sync bridge under `invoke`).
A failed call is thrown into the body at its `yield from`, so failures are handled with an ordinary try/except;
a model call fails there only after the gateway's retry and fallback steps. Only the driver differs between
`invoke` and `ainvoke`, so no node is written twice. The body returns its state update. What its calls used (the
gateway's account of the model calls, one per tool result) goes into the update's `usage`, and the model
fallbacks the gateway took into its steps and `active_model`, the same way for every node (`Node`).

A node followed by a route may run its route itself (`add_routed_node`): it returns its update with
`Command(goto=...)`, the route computed over the node's fresh state, which the node builds for much less than a
conditional edge's read of it (`RoutedNode`).

`AgentServices` is what the nodes of one compiled graph share: the tool gateway and the model gateway (whose
retry policy is the model-calling nodes'), and the tool schemas derived from them once rather than on every step.

`log_fallback` records every fallback a node takes (a summary, a reflection, a plan, a lesson, a judgement made
by the rules because the model's failed; a malformed reply sent back; a model error that ends the turn): what
would otherwise happen silently. The CLI shows them (`--debug`, `--log-format`); see reactgraph/cli/logs.py.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import logging
import warnings
from collections.abc import Callable, Coroutine, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.channels import BaseChannel, BinaryOperatorAggregate, LastValue
from langgraph.runtime import Runtime, get_runtime
from langgraph.types import Command, Overwrite, RetryPolicy, Send

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
    describe,
)
from reactgraph.nodes.context import Context, UnknownToolNames, resolve_context, unknown_tool_names
from reactgraph.nodes.conversation import current_question
from reactgraph.nodes.state import ActiveModel, make_step
from reactgraph.tools import ToolGateway, ToolMeta, ToolResult, ToolSession
from reactgraph.tools.threads import run_sync

if TYPE_CHECKING:
    from langgraph.graph import StateGraph

# --- the node driver ----------------------------------------------------------------------------------------

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


@dataclass(frozen=True, slots=True)
class ToolRun:
    """A tool call a body asks the tool gateway to run: `execute_sync` under `invoke` (on the node's thread, no
    event loop), `execute` awaited under `ainvoke`. `yield from` it: the value is the call's `ToolResult`."""

    gateway: ToolGateway
    call: Mapping[str, Any]
    session: ToolSession
    options: Mapping[str, Any] = field(default_factory=dict)  # execute's keywords: events, approved, injection…

    def __iter__(self) -> Generator[Request, Any, ToolResult]:
        return (yield self)


Request = ModelCall | Call[Any] | Await[Any] | ToolRun
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
        result: Any = None
        failure: BaseException | None = None
        try:
            if isinstance(request, ModelCall):
                result = _gateway(models).invoke(request, turn, config)
            elif isinstance(request, ToolRun):
                result = request.gateway.execute_sync(request.call, request.session, **request.options)
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
        result: Any = None
        failure: BaseException | None = None
        try:
            if isinstance(request, ModelCall):
                result = await _gateway(models).ainvoke(request, turn, config)
            elif isinstance(request, ToolRun):
                result = await request.gateway.execute(request.call, request.session, **request.options)
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
                         spent=Usage(**(spent or {})), state=state, runtime=runtime)

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
        if self._runtime:  # LangGraph runs a route outside its node's config context: the runtime is read in a
            context = contextvars.copy_context()  # context holding the route's config (no tracing context needed)
            context.run(var_child_runnable_config.set, config or ensure_config())
            kwargs["runtime"] = context.run(_runtime)
        return self.route(input, **kwargs)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self.invoke(input, config, **kwargs)


def edge(route: Callable[..., Any]) -> Route:
    """`route` as a conditional edge (see `Route`)."""
    return Route(route)


# --- a node that routes itself ------------------------------------------------------------------------------

# The kinds of channel that a step which does not write them leaves as they are (an empty update is a no-op in
# their source) and whose reducer returns a new value. Any other kind is recomputed in a fresh state, written or
# not, from a copy of it, as LangGraph's own read does: an EphemeralValue (LangChain's `jump_to`) is cleared by a
# step that does not write it, a DeltaChannel's reducer may work in place.
_STEADY_CHANNELS = (LastValue, BinaryOperatorAggregate)


class RoutedNode(Runnable[Any, Any]):
    """A node and the route after it, run as one: the node's update, with `Command(goto=...)` to where `route`
    sends the graph (its answer mapped through `path`; a `Send` goes as it is).

    Behind a conditional edge the route gets the node's fresh state (its state with the node's writes applied),
    which LangGraph builds by copying every channel of the graph, the state's fields and its `branch:to:*`
    channels, once per route per step. Here the fresh state is the node's input with only the channels the node
    wrote recomputed, each by the graph's own channel (its reducer: `add_messages`, `operator.add`, …); the route
    sees the same state for a fraction of the work. `node`: a Runnable (`Node`), or a function of (state,
    runtime); the route is a function of (state) or (state, runtime), as for `edge`."""

    def __init__(self, node: Runnable[Any, Any] | Callable[[Any, Any], Any], route: Callable[..., Any],
                 path: Mapping[Any, str], channels: Mapping[str, BaseChannel], name: str) -> None:
        self.node, self.route, self.path, self.channels, self.name = node, route, dict(path), channels, name
        self._route_runtime = "runtime" in inspect.signature(route).parameters
        self._unsteady: tuple[str, ...] | None = None  # read on first use: the builder may still add channels

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if isinstance(self.node, Runnable):
            return self._routed(input, self.node.invoke(input, config))
        return self._routed(input, self.node(input, get_runtime()))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if isinstance(self.node, Runnable):
            return self._routed(input, await self.node.ainvoke(input, config))
        return self._routed(input, self.node(input, get_runtime()))

    def _routed(self, state: Any, output: Any) -> Any:
        fresh = self.fresh(state, output)
        target = self.route(fresh, runtime=_runtime()) if self._route_runtime else self.route(fresh)
        goto = ([t if isinstance(t, Send) else self.path[t] for t in target] if isinstance(target, list | tuple)
                else self.path[target])
        if isinstance(output, dict):
            return Command(update=output, goto=goto)
        parts = [] if output is None else list(output) if isinstance(output, list | tuple) else [output]
        return [*parts, Command(goto=goto)]

    def fresh(self, state: Any, output: Any) -> Any:
        """`state` with the writes of `output` applied, as a conditional edge after the node would read it."""
        if self._unsteady is None:
            self._unsteady = tuple(k for k, c in self.channels.items() if type(c) not in _STEADY_CHANNELS)
        written: dict[str, list[Any]] = {key: [] for key in self._unsteady}
        for key, value in _writes(output):
            if key in self.channels:
                written.setdefault(key, []).append(value)
        if not written or not isinstance(state, dict):
            return state
        fresh = dict(state)
        for key, values in written.items():
            spec = self.channels[key]
            channel = spec.from_checkpoint(state[key]) if key in state else spec.copy()
            if type(spec) not in _STEADY_CHANNELS:
                channel = channel.copy()  # the node's input stays as it was
            channel.update(values)
            if channel.is_available():
                fresh[key] = channel.get()
            else:
                fresh.pop(key, None)
        return fresh


def _writes(output: Any) -> Iterator[tuple[str, Any]]:
    """The (channel, value) pairs of a node's output, taken as LangGraph takes them: from a dict, a Command, or a
    list of both (observe's update and its tools' Commands)."""
    for part in output if isinstance(output, list | tuple) else (output,):
        if isinstance(part, dict):
            yield from part.items()
        elif isinstance(part, Command) and part.graph != Command.PARENT:
            yield from part._update_as_tuples()  # LangGraph's own reading of it (a dict, pairs or a typed object)


def add_routed_node(builder: StateGraph[Any, Any, Any, Any], name: str,
                    node: Runnable[Any, Any] | Callable[[Any, Any], Any], route: Callable[..., Any],
                    ends: Sequence[str] | Mapping[Any, str], **options: Any) -> None:
    """Add `node` as `name` with `route` after it, as `add_conditional_edges(name, edge(route), ends)` would, run
    as one (`RoutedNode`). Its destinations are the route's: drawn alike by `get_graph()` and Studio. `ends`: the
    route's answers, or a map of its answers to the nodes they lead to; `options`: `add_node`'s."""
    path = dict(ends) if isinstance(ends, Mapping) else {end: end for end in ends}
    destinations = {target: str(label) for label, target in path.items()}
    builder.add_node(name, RoutedNode(node, route, path, builder.channels, name), destinations=destinations,
                     **options)



# --- what a graph's nodes share -----------------------------------------------------------------------------

class AgentServices:
    """The tool gateway and the model gateway, built once per graph and reused across runs."""

    def __init__(self, gateway: ToolGateway, model: BaseChatModel | None = None,
                 retry: RetryPolicy | None = None, *, model_wraps: Any = None, tool_wraps: Any = None) -> None:
        self.gateway = gateway
        # An explicit model (tests' scripted models, a user's configured client) overrides Context.model.
        self.models = ModelGateway(model, retry, model_wraps)
        # The graph's LangChain wrap_tool_call middleware, handed to the gateway with each call (graph/middleware.py).
        self.tool_wraps = tool_wraps
        # Keyed by object ids; the objects are kept alongside, so an id is never reused while it is a key.
        self._schemas: dict[int, tuple[ToolMeta, dict[str, Any]]] = {}

    @property
    def retry(self) -> RetryPolicy:
        """The model-calling nodes' retry policy (the model gateway's)."""
        return self.models.retry

    def session(self, context: Context, config: RunnableConfig | None) -> ToolSession:
        """The run's gateway session; a Context naming an MCP config file adds its servers' tools (once per file
        per gateway: the first run waits for them to start) and lets this session see them."""
        thread_id = ((config or {}).get("configurable") or {}).get("thread_id") or "default"
        scopes = (self.gateway.mcp_config_scope(context.mcp_config.strip()),) if context.mcp_config.strip() else ()
        return ToolSession.of(id=str(thread_id), allow=context.allowed_tools or None, deny=context.denied_tools,
                              approval=context.approval, mcp_scopes=scopes)

    def schemas(self, context: Context, config: RunnableConfig | None) -> list[dict[str, Any]]:
        """The OpenAI schemas of the tools this run may use (each tool's schema is built once)."""
        session = self.session(context, config)  # first: it may add the tools of the Context's MCP config
        # A warning, not an error: one Context may serve graphs whose gateways hold different tools, and an
        # unknown name fails closed (allow: fewer tools; deny: nothing more denied). Shown once per message.
        if (context.allowed_tools or context.denied_tools or context.approval) and (
                problem := unknown_tool_names(context, self.gateway.registry)):
            warnings.warn(problem, UnknownToolNames, stacklevel=2)
        return [self._schema(meta) for meta in self.gateway.tools(session)]

    def _schema(self, meta: ToolMeta) -> dict[str, Any]:
        cached = self._schemas.get(id(meta))
        if cached is None or cached[0] is not meta:
            cached = self._schemas[id(meta)] = (meta, meta.openai_schema())
        return cached[1]



# --- the fallback log ---------------------------------------------------------------------------------------

logger = logging.getLogger("reactgraph.nodes")


def log_fallback(node: str, kind: str, reason: str | BaseException, *, level: int = logging.WARNING) -> None:
    """Record that `node` fell back (`kind`: summary_rules, reflection_rules, plan_one_step, …) and why; an
    exception's traceback goes along at DEBUG."""
    if not logger.isEnabledFor(level):
        return
    why = describe(reason) if isinstance(reason, BaseException) else str(reason)[:300]
    exc_info = reason if isinstance(reason, BaseException) and logger.isEnabledFor(logging.DEBUG) else None
    logger.log(level, "%s fell back: %s (%s)", node, kind, why, exc_info=exc_info,
               extra={"fallback": {"node": node, "kind": kind, "reason": why}})
