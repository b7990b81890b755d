"""One body for a node's sync and async runs: the body is a generator that yields the calls it needs made.

A body is `body(state, runtime, config)`; it yields a `Call` (a runnable to invoke: a chat model, a
structured-output chain, a subgraph) or a coroutine (the tool gateway's async API), and is sent the result.
A failed call is thrown into the body at its `yield`, so failures are handled with an ordinary try/except.
Only the driver differs between the graph's `invoke` (sync calls, coroutines on the sync bridge) and its
`ainvoke` (awaited), so no node is written twice.

A transient model error is not thrown into the body while the node's `RetryPolicy` has attempts left:
the driver raises it and LangGraph runs the node again (see model_retry).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from typing import Any, NamedTuple

from langchain_core.runnables import RunnableConfig

# The sync+async node runnable LangGraph itself builds from plain functions, and LangChain's `create_agent`
# uses for its nodes; `trace=False` because the node's run is already traced by LangGraph.
from langgraph._internal._runnable import RunnableCallable
from langgraph.runtime import Runtime
from langgraph.types import Overwrite, RetryPolicy

from reactgraph.nodes.runtime.budget import Usage, add_usage, call_usage
from reactgraph.nodes.runtime.fallback_log import describe
from reactgraph.nodes.runtime.model_retry import attempt_of, leave_to_retry
from reactgraph.nodes.state.context import Context, resolve_context
from reactgraph.tools.sync_bridge import run_sync


class Call(NamedTuple):
    """A call a node body asks for: `runnable.invoke(input, config, **kwargs)` (or `ainvoke`)."""

    runnable: Any
    input: Any
    config: RunnableConfig | None = None
    kwargs: dict[str, Any] = {}  # noqa: RUF012 - never mutated; a NamedTuple default


logger = logging.getLogger("reactgraph.nodes")

# What a body is: it yields `Call`s or coroutines, is sent their results, and returns the node's state update.
Steps = Generator[Any, Any, dict[str, Any]]
Body = Callable[[Any, Runtime[Context], RunnableConfig], Steps]
Node = RunnableCallable  # what `dual_node` and `plain_node` return: a node to give `StateGraph.add_node`


def _with_context(runtime: Runtime[Context]) -> Runtime[Context]:
    """The runtime with a resolved `Context` (None or a mapping becomes one), so bodies read it directly."""
    if isinstance(runtime.context, Context):
        return runtime
    return runtime.override(context=resolve_context(runtime.context))


def _call(request: Any) -> Any:
    if isinstance(request, Call):
        return request.runnable.invoke(request.input, request.config, **request.kwargs)
    return run_sync(request)


async def _acall(request: Any) -> Any:
    if isinstance(request, Call):
        return await request.runnable.ainvoke(request.input, request.config, **request.kwargs)
    return await request


def _answer(steps: Generator[Any, Any, Any], result: Any, failure: Exception | None, retry: RetryPolicy | None,
            runtime: Runtime[Context], name: str = "?") -> Any:
    """Hand a call's outcome to the body: its result is sent in, its failure thrown in at the `yield` (or
    raised for LangGraph's RetryPolicy while attempts are left); returns the body's next request."""
    if failure is None:
        return steps.send(result)
    if leave_to_retry(retry, runtime, failure):
        _log_retry(name, failure, runtime, retry)
        raise failure
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


def _counted(usage: Usage, request: Any, result: Any, runtime: Runtime[Context]) -> Usage:
    """`usage` plus what this call used (a model reply's tokens and cost, a tool call); see budget.call_usage."""
    spent = call_usage(request.input if isinstance(request, Call) else None, result, runtime.context.model)
    return add_usage(usage, spent) if spent else usage


def with_usage(update: Any, usage: Usage) -> Any:
    """The node's update with what its calls used added to the `usage` channel (inside a turn's reset, which
    replaces the channel with `Overwrite`, the node's own usage is kept)."""
    if not usage or not isinstance(update, dict):
        return update
    current = update.get("usage")
    if isinstance(current, Overwrite):
        return {**update, "usage": Overwrite(add_usage(current.value, usage))}
    return {**update, "usage": add_usage(current, usage)}


def dual_node(body: Body, *, name: str, retry: RetryPolicy | None = None) -> Node:
    """The node LangGraph runs: `body` driven by sync calls under `invoke` and by awaits under `ainvoke`."""

    def node(state: Any, runtime: Runtime[Context], config: RunnableConfig) -> Any:
        runtime = _with_context(runtime)
        steps, usage = body(state, runtime, config), Usage()
        try:
            request = next(steps)
            while True:
                result, failure = None, None
                try:
                    result = _call(request)
                    usage = _counted(usage, request, result, runtime)
                except Exception as exc:  # noqa: BLE001 - handed to the body, or raised for the retry
                    failure = exc
                request = _answer(steps, result, failure, retry, runtime, name)
        except StopIteration as done:
            return with_usage(done.value, usage)

    async def anode(state: Any, runtime: Runtime[Context], config: RunnableConfig) -> Any:
        runtime = _with_context(runtime)
        steps, usage = body(state, runtime, config), Usage()
        try:
            request = next(steps)
            while True:
                result, failure = None, None
                try:
                    result = await _acall(request)
                    usage = _counted(usage, request, result, runtime)
                except Exception as exc:  # noqa: BLE001 - handed to the body, or raised for the retry
                    failure = exc
                request = _answer(steps, result, failure, retry, runtime, name)
        except StopIteration as done:
            return with_usage(done.value, usage)

    return RunnableCallable(node, anode, name=name, trace=False)


def plain_node(fn: Callable[..., Any], *, name: str | None = None) -> Node:
    """A node without calls to make (CPU only): the same function under `invoke` and `ainvoke`, where a plain
    function would be sent to a worker thread."""

    async def afn(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return RunnableCallable(fn, afn, name=name or fn.__name__, trace=False)



def edge(route: Callable[..., Any]) -> Node:
    """A routing function for `add_conditional_edges`, run without a trace span of its own (LangGraph traces
    a plain function's every call; a route is a pure function of the state, and the node before it is traced)."""
    name = getattr(route, "__name__", None) or getattr(getattr(route, "func", None), "__name__", None)  # partial
    return RunnableCallable(route, name=name, trace=False)
