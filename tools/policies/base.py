"""The shape every gateway policy shares: a step that may answer a call itself or pass it on."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel

from reactgraph.tools.injection import ToolInjection
from reactgraph.tools.meta import ToolMeta
from reactgraph.tools.policies.observability.events import EventSink
from reactgraph.tools.result import ToolResult, ToolStatus
from reactgraph.tools.session import ToolSession


@dataclass(slots=True)
class CallContext:
    """One tool call on its way through the pipeline; policies fill in what they learn."""

    name: str
    args: Any
    call_id: str
    session: ToolSession
    meta: ToolMeta | None = None
    # Validated arguments: the tool's pydantic model, or the checked dict for a JSON-schema tool.
    params: BaseModel | dict[str, Any] | None = None
    attempts: int = 0
    # Monotonic time by which the call must finish (set by the timeout policy, read by retry).
    deadline: float | None = None
    # Set by the circuit breaker when this call is its half-open probe, and by the concurrency limit when the
    # call had to wait for a slot: a call that waited is checked against the breaker again before it runs.
    breaker_probe: bool = False
    waited_for_slot: bool = False
    # Set once the breaker step inside the slot has dealt with the call (the outer step then records nothing).
    breaker_settled: bool = False
    # Where this call's gateway events go (retry, breaker, timeout, waiting); None: no events, no cost.
    sink: EventSink | None = None
    # A person approved this call (the graphs' approval step); a tool that asks for approval runs only then.
    approved: bool = False
    # What the running graph offers tools that ask for injected arguments (state, store, ToolRuntime).
    injection: ToolInjection | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def tool(self) -> ToolMeta:
        """The called tool, for every step that runs after `Existence`, which resolves it."""
        if self.meta is None:
            raise LookupError(f"call {self.call_id!r}: a step ran before Existence resolved {self.name!r}")
        return self.meta

    @property
    def arguments(self) -> BaseModel | dict[str, Any]:
        """The validated arguments, for every step after `ArgumentValidation`, which sets them."""
        if self.params is None:
            raise LookupError(f"call {self.call_id!r}: a step ran before ArgumentValidation checked {self.name!r}")
        return self.params

    def result(self, status: ToolStatus, content: str, *, value: Any = None, artifact: Any = None,
               **detail: Any) -> ToolResult:
        """A result for this call; latency is stamped by the telemetry policy on the way out."""
        return ToolResult(name=self.name, call_id=self.call_id, status=status, content=content,
                          attempts=self.attempts, value=value, detail={**self.detail, **detail}, artifact=artifact)


Handler = Callable[[CallContext], Awaitable[ToolResult]]


class Policy(Protocol):
    """A pipeline step: answer the call (short-circuit) or `await proceed(call)` and adapt its result."""

    async def __call__(self, call: CallContext, proceed: Handler) -> ToolResult: ...


def chain(policies: Sequence[Policy], innermost: Handler) -> Handler:
    """Compose policies so the first one listed sees the call first and the result last."""
    handler = innermost
    for policy in reversed(policies):
        handler = _bind(policy, handler)
    return handler


def _bind(policy: Policy, proceed: Handler) -> Handler:
    # A partial rather than a closure: one coroutine frame per policy instead of two, on every call.
    return functools.partial(policy, proceed=proceed)
