"""One body for a node's sync and async runs: the body is a generator that yields the calls it needs made.

A body is `body(state, runtime, config)`. It asks for a call with `result = yield from Call(runnable, input)`
(a chat model, a structured-output chain, a subgraph: `runnable.invoke`, or `ainvoke` under the graph's
`ainvoke`) or `result = yield from Await(coroutine)` (the tool gateway's async API: awaited, or run on the
sync bridge under `invoke`); `result` has the type the runnable or coroutine returns. A failed call is thrown
into the body at its `yield from`, so failures are handled with an ordinary try/except. Only the driver
differs between `invoke` and `ainvoke`, so no node is written twice.

The body returns its state update. What its calls used (model tokens and cost, tool calls; budget.call_usage)
is counted by the driver, which returns it beside the update (`drive`, `adrive`); the node then writes the
update `charged` with it, so every node's usage reaches the `usage` channel the same way.

A transient model error is not thrown into the body while the node's `RetryPolicy` has attempts left:
the driver raises it and LangGraph runs the node again (see model_retry).
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable, Coroutine, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langchain_core.runnables.config import set_config_context
from langgraph.pregel import Pregel
from langgraph.runtime import Runtime, get_runtime
from langgraph.types import Overwrite, RetryPolicy

from reactgraph.nodes.runtime import model_fallback
from reactgraph.nodes.runtime.budget import Usage, add_usage, call_usage
from reactgraph.nodes.runtime.fallback_log import describe
from reactgraph.nodes.runtime.model_fallback import SwitchModel, model_label, next_model
from reactgraph.nodes.runtime.model_retry import attempt_of, leave_to_retry
from reactgraph.nodes.state.agent import ExecutionStep
from reactgraph.nodes.state.context import Context, resolve_context
from reactgraph.tools.sync_bridge import run_sync

T = TypeVar("T")
logger = logging.getLogger("reactgraph.nodes")


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """A runnable call a body asks for: `runnable.invoke(input, config, **kwargs)` (or `ainvoke`).
    `yield from` it: the value is the call's result."""

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


Request = Call[Any] | Await[Any]
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


def _counted(usage: Usage, request: Request, result: Any, runtime: Runtime[Context], started: float) -> Usage:
    """`usage` plus what this call used (a model reply's tokens and cost, a tool call; see budget.call_usage) and,
    for a model call, the seconds it took (a failed one too: a timeout spends the model-time budget). A subgraph
    (a Reflexion trial) is no model call: its own nodes count their calls."""
    spent = call_usage(request.input if isinstance(request, Call) else None, result, runtime.context.model)
    if isinstance(request, Call) and not isinstance(request.runnable, Pregel):
        spent = Usage(**spent, model_seconds=round(time.perf_counter() - started, 6))
    return add_usage(usage, spent) if spent else usage


def _answer(steps: Steps, request: Request, result: Any, failure: Exception | None, retry: RetryPolicy | None,
            runtime: Runtime[Context], name: str) -> Request:
    """Hand a call's outcome to the body: its result is sent in, its failure thrown in at the `yield` (or
    raised for LangGraph's RetryPolicy while attempts are left, or, for a model call, as `SwitchModel` while a
    fallback model is left); returns the body's next request."""
    if failure is None:
        return steps.send(result)
    if leave_to_retry(retry, runtime, failure):
        _log_retry(name, failure, runtime, retry)
        raise failure
    if isinstance(request, Call) and not isinstance(request.runnable, Pregel) and (
            spec := next_model(runtime.context, failure)):
        raise SwitchModel(failure, model_label(request.runnable, runtime.context), spec)
    return steps.throw(failure)


def _log_retry(node: str, failure: Exception, runtime: Runtime[Context], retry: RetryPolicy | None) -> None:
    """A transient model error the node is re-run for (LangGraph's RetryPolicy): a WARNING with the attempt."""
    if logger.isEnabledFor(logging.WARNING):
        attempt = attempt_of(runtime)
        logger.warning("%s: transient model error, the node runs again (attempt %d of %d)", node, attempt + 1,
                       retry.max_attempts if retry else 0,
                       extra={"retry": {"node": node, "attempt": attempt, "next_attempt": attempt + 1,
                                        "max_attempts": retry.max_attempts if retry else None,
                                        "error": describe(failure)}})


def drive(steps: Steps, runtime: Runtime[Context], retry: RetryPolicy | None, name: str) -> tuple[Update, Usage]:
    """Run a body with sync calls: its update, and what its calls used."""
    usage = Usage()
    try:
        request = next(steps)
        while True:
            result, failure, started = None, None, time.perf_counter()
            try:
                if isinstance(request, Call):
                    result = request.runnable.invoke(request.input, request.config, **request.kwargs)
                else:
                    result = run_sync(request.coroutine)
            except Exception as exc:  # noqa: BLE001 - handed to the body, or raised for the retry
                failure = exc
            usage = _counted(usage, request, result, runtime, started)
            request = _answer(steps, request, result, failure, retry, runtime, name)
    except StopIteration as done:
        return done.value, usage
    except SwitchModel as switch:  # the body is run again from its start, with the fallback model
        steps.close()
        switch.usage = usage
        raise


async def adrive(steps: Steps, runtime: Runtime[Context], retry: RetryPolicy | None,
                 name: str) -> tuple[Update, Usage]:
    """Run a body with awaited calls: its update, and what its calls used."""
    usage = Usage()
    try:
        request = next(steps)
        while True:
            result, failure, started = None, None, time.perf_counter()
            try:
                if isinstance(request, Call):
                    result = await request.runnable.ainvoke(request.input, request.config, **request.kwargs)
                else:
                    result = await request.coroutine
            except Exception as exc:  # noqa: BLE001 - handed to the body, or raised for the retry
                failure = exc
            usage = _counted(usage, request, result, runtime, started)
            request = _answer(steps, request, result, failure, retry, runtime, name)
    except StopIteration as done:
        return done.value, usage
    except SwitchModel as switch:  # the body is run again from its start, with the fallback model
        steps.close()
        switch.usage = usage
        raise


def charged(update: Update, usage: Usage) -> Update:
    """The node's update with what its calls used added to the `usage` channel (inside a turn's reset, which
    replaces the channel with `Overwrite`, the node's own usage is kept)."""
    if not usage:
        return update
    current = update.get("usage")
    if isinstance(current, Overwrite):
        return {**update, "usage": Overwrite(add_usage(current.value, usage))}
    return {**update, "usage": add_usage(current, usage)}


class Node(Runnable[Any, Update]):
    """A node to give `StateGraph.add_node`: `body` driven by sync calls under `invoke`, by awaits under `ainvoke`.
    Untraced itself: LangGraph traces the node's run."""

    def __init__(self, body: Body, *, name: str, retry: RetryPolicy | None = None) -> None:
        self.body, self.name, self.retry = body, name, retry
        self.node_name = name

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Update:
        config = config if config is not None else ensure_config()
        runtime, retry, used = model_fallback.active_runtime(_runtime(), input), self.retry, Usage()
        records: list[ExecutionStep] = []
        while True:
            try:
                update, usage = drive(self.body(input, runtime, config), runtime, retry, self.node_name)
                break
            except SwitchModel as switch:
                model_fallback.announce(switch, self.node_name, config)
                runtime, retry, used = self._switch(switch, input, runtime, used, records)
        return charged(model_fallback.with_switches(update, input, records, runtime), add_usage(used, usage))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Update:
        config = config if config is not None else ensure_config()
        runtime, retry, used = model_fallback.active_runtime(_runtime(), input), self.retry, Usage()
        records: list[ExecutionStep] = []
        while True:
            try:
                update, usage = await adrive(self.body(input, runtime, config), runtime, retry, self.node_name)
                break
            except SwitchModel as switch:
                await model_fallback.aannounce(switch, self.node_name, config)
                runtime, retry, used = self._switch(switch, input, runtime, used, records)
        return charged(model_fallback.with_switches(update, input, records, runtime), add_usage(used, usage))

    def _switch(self, switch: SwitchModel, state: Any, runtime: Runtime[Context], used: Usage,
                records: list[ExecutionStep]) -> tuple[Runtime[Context], None, Usage]:
        """After a model failed for good: the fallback's runtime, no node re-runs for it here (the node's attempts
        were the failed model's), what was used so far; the switch's record is added to `records`."""
        records.append(model_fallback.record(state, self.node_name, switch))
        return model_fallback.switched(runtime, switch, self.node_name), None, add_usage(used, switch.usage or Usage())


def dual_node(body: Body, *, name: str, retry: RetryPolicy | None = None) -> Node:
    """The node LangGraph runs for `body` (see `Node`)."""
    return Node(body, name=name, retry=retry)


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
