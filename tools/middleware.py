"""LangChain's `wrap_tool_call` middleware as one step of the tool gateway's pipeline (`Wrapped`).

A graph built with `middleware=[...]` hands each of its calls the middleware that wrap tool calls
(`ToolWraps`, on the call's record). The step runs them as `create_agent` composes them — the first listed is the
outermost — each with LangChain's `ToolCallRequest` (the call, the tool, the graph's state, a `ToolRuntime`) and
a handler that runs the rest of the pipeline and answers a `ToolMessage`.

Where, and why: after the guards (the tool exists, the session may use it, the arguments fit its schema, a
person approved it where one must) and before the resilience steps (breaker, concurrency limit, timeout, our
retry). A wrapper so sees only calls the gateway would run — it never retries a call that can never run, nor
runs one nobody approved — and whatever it asks of its handler, a retry or changed arguments (checked against
the schema again), still goes through the breaker, the limits and the timeout: a wrapper cannot make a tool
escape them.

As LangChain's `ToolNode` does, the handler raises what the tool raised (so `ToolRetryMiddleware` retries it and
`ToolErrorMiddleware` words it); an exception that leaves the outermost wrapper is contained as the call's
error result, as any tool failure is. Outcomes that are the gateway's own (a timeout, an open breaker, a full
queue) come back as error messages, not exceptions: they are no fault of the tool's to retry at once.
A wrapper's own `ToolMessage` becomes the call's result (status from its `status`); a `Command` is refused in
one line as the call's error (the graphs apply a tool's `Command` themselves, not a wrapper's).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig

from reactgraph.tools import untrusted
from reactgraph.tools.call import Handler, ToolResult, ToolStatus, tool_fault
from reactgraph.tools.guards import ArgumentValidation
from reactgraph.tools.threads import awaited, run_blocking


@dataclass(frozen=True)
class ToolWraps:
    """The `wrap_tool_call` middleware of one graph, in the order given."""

    middleware: tuple[Any, ...]


class Wrapped:
    """The pipeline step that runs a call's `ToolWraps` around the steps below it (a pass without any)."""

    async def __call__(self, call: ToolResult, proceed: Handler) -> ToolResult:
        wraps = call.wraps
        if wraps is None or not wraps.middleware:
            return await proceed(call)
        if call.blocking:  # the wrappers await: on the sync bridge's loop, the steps below on a thread, blocking
            return await awaited(True, self._around(call, wraps, _on_a_thread(proceed)))
        return await self._around(call, wraps, proceed)

    async def _around(self, call: ToolResult, wraps: ToolWraps, proceed: Handler) -> ToolResult:
        loop = asyncio.get_running_loop()
        results: list[ToolResult] = []

        async def inner(request: Any) -> ToolMessage:
            record = _record_for(call, request)
            record = await (ArgumentValidation()(record, proceed) if record is not call else proceed(record))
            results.append(record)
            if record.status is ToolStatus.ERROR and record.raised is not None:
                raise record.raised  # as ToolNode does: a wrapper sees what the tool raised
            return message_of(record)

        handler: Callable[[Any], Any] = inner
        for middleware in reversed(wraps.middleware):
            handler = _layer(middleware, handler, loop)
        try:
            outcome = await handler(_request(call))
        except Exception as exc:  # noqa: BLE001 - whatever leaves the wrappers is the call's error, as a tool's
            return tool_fault(call, exc)
        return _settle(call, outcome, results)


def _on_a_thread(proceed: Handler) -> Handler:
    """The steps below the wrappers, for a blocking call: run (blocking) on a worker thread, off the loop."""
    async def below(record: ToolResult) -> ToolResult:
        return await asyncio.to_thread(run_blocking, proceed(record))
    return below


def _layer(middleware: Any, inner: Callable[[Any], Any], loop: asyncio.AbstractEventLoop) -> Callable[[Any], Any]:
    """One wrapper as an async handler: its `awrap_tool_call` where it has one, else its sync `wrap_tool_call` on
    a worker thread, whose handler runs the inner layers back on the gateway's loop."""
    from langchain.agents.middleware import AgentMiddleware

    if type(middleware).awrap_tool_call is not AgentMiddleware.awrap_tool_call:
        async def wrapped(request: Any) -> Any:
            return await middleware.awrap_tool_call(request, inner)
        return wrapped

    def sync_inner(request: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(inner(request), loop).result()

    async def threaded(request: Any) -> Any:
        return await asyncio.to_thread(middleware.wrap_tool_call, request, sync_inner)
    return threaded


def _request(call: ToolResult) -> Any:
    from langchain.tools import ToolRuntime
    from langgraph.prebuilt.tool_node import ToolCallRequest

    injection = call.injection
    state = dict(injection.state) if injection is not None and injection.state is not None else {}
    runtime = ToolRuntime(state=state, context=getattr(injection, "context", None),
                          config=cast(RunnableConfig, dict(getattr(injection, "config", None) or {})),
                          stream_writer=getattr(injection, "stream_writer", None) or (lambda _: None),
                          tool_call_id=call.call_id, store=getattr(injection, "store", None))
    tool_call = ToolCall(name=call.name, args=_request_args(call), id=call.call_id, type="tool_call")
    return ToolCallRequest(tool_call=tool_call, tool=described(call.tool), state=state, runtime=runtime)


_DESCRIBED: dict[int, tuple[Any, Any]] = {}
_MAX_DESCRIBED = 4096


def describing_tool(source: Any, name: str, description: str, args_schema: Any,
                    metadata: dict[str, Any] | None = None) -> Any:
    """A LangChain tool that describes a tool to a middleware (name, description, arguments) and refuses to run:
    a call runs only through the gateway. One per `source` object (a registered tool, a bound schema)."""
    cached = _DESCRIBED.get(id(source))
    if cached is None or cached[0] is not source:
        from langchain_core.tools import StructuredTool

        def not_here(**_: Any) -> str:
            raise RuntimeError(f"{name} runs only through the tool gateway (a wrapper's handler, the act step)")

        tool = StructuredTool.from_function(func=not_here, name=name, description=description or name,
                                            args_schema=args_schema, metadata=metadata)
        if len(_DESCRIBED) >= _MAX_DESCRIBED:  # one per registered tool or schema: a bound, not a cache policy
            _DESCRIBED.clear()
        cached = _DESCRIBED[id(source)] = (source, tool)
    return cached[1]


def described(meta: Any) -> Any:
    """A registered tool, as a wrapper's `ToolCallRequest.tool` (see `describing_tool`)."""
    return describing_tool(meta, meta.name, meta.description, meta.params_model or meta.json_schema)


def _record_for(call: ToolResult, request: Any) -> ToolResult:
    """The record a handler call runs: the call itself, or a copy with the arguments a wrapper changed."""
    asked = request.tool_call
    if asked.get("name") != call.name:
        raise ValueError(f"a wrap_tool_call middleware renamed the call {call.name!r} to {asked.get('name')!r}: "
                         "a wrapper may change a call's arguments, not the tool it calls")
    if asked.get("args") == _request_args(call):
        return call
    return dataclasses.replace(call, args=asked.get("args"), params=None)


def _request_args(call: ToolResult) -> dict[str, Any]:
    params = call.params
    if params is None or isinstance(params, dict):
        return dict(params or {})
    return params.model_dump()


def message_of(record: ToolResult) -> ToolMessage:
    return ToolMessage(content=record.content, tool_call_id=record.call_id, name=record.name,
                       status="success" if record.ok else "error", artifact=record.artifact)


def _settle(call: ToolResult, outcome: Any, results: Sequence[ToolResult]) -> ToolResult:
    """The call's record after the wrappers: the handler's own result when they returned its message, else the
    message they returned."""
    from langgraph.types import Command

    if isinstance(outcome, Command):
        return call.answer(ToolStatus.ERROR, untrusted.failed(call.name, TypeError(
            "a wrap_tool_call middleware returned a Command: only a tool's own Command is applied")))
    if not isinstance(outcome, ToolMessage):
        return call.answer(ToolStatus.ERROR, untrusted.failed(call.name, TypeError(
            f"a wrap_tool_call middleware returned a {type(outcome).__name__}, not a ToolMessage")))
    last = results[-1] if results else None
    if last is not None:
        call.attempts, call.latency_ms = last.attempts, last.latency_ms
        if outcome.content == last.content and (outcome.status == "success") == last.ok:
            return call.answer(last.status, last.content, value=last.value, artifact=last.artifact, **last.detail)
    status = ToolStatus.OK if outcome.status == "success" else ToolStatus.ERROR
    return call.answer(status, outcome.text if isinstance(outcome.content, list) else str(outcome.content),
                       artifact=outcome.artifact, wrapped=True)


def wrappers_of(middleware: Sequence[Any]) -> tuple[Any, ...]:
    """The middleware that wrap tool calls (sync or async overridden), in the order given."""
    from langchain.agents.middleware import AgentMiddleware

    return tuple(m for m in middleware
                 if type(m).wrap_tool_call is not AgentMiddleware.wrap_tool_call
                 or type(m).awrap_tool_call is not AgentMiddleware.awrap_tool_call)
