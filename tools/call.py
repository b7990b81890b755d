"""One tool call at the gateway, as one record from the model's call to its result, and what shapes it.

The gateway takes a call as the model wrote it (LangChain's `{"name", "args", "id"}` dict) and keeps ONE record of
it, `ToolResult`, from entry to result: the call (`name`, `args`, `call_id`), who makes it (`ToolSession`: its
id for logs, the tools it may use, its approval settings) and how (`approved`, the events' `sink`, the graph's
`injection`), what the steps learn on the way (the resolved tool `meta`, the validated `params`, the `deadline`,
the breaker's flags), and last the outcome the model reads next: a `ToolStatus`, the observation `content`, the
raw `value` and `artifact`, `latency_ms`, `attempts` and `detail`. Until a step answers it (`answer`), the record
reads as an `error` with no text: a call can never leave the gateway looking like a success it was not. Callers
get the same record back, so the result always carries the call it answers.

Every step of the pipeline has one shape (`Policy`: answer the record, or `await proceed(record)` and adapt its
answer), composed by `chain`; the innermost step (`Invoke`) runs the tool. A tool tells the gateway how to treat
its failure with the exceptions here (`ToolError`, `TransientToolError`, `ToolInputError`); gateway events go to
the caller's sink through `emit`.

Telling a tool's own failure (reported to the model as a result) from the caller stopping the run (re-raised):
tools may raise anything, BaseExceptions included (SystemExit, KeyboardInterrupt, GeneratorExit, CancelledError,
custom ones); none of them may end the gateway's caller. Only two things stop a run from outside, and each can
be recognised:
- cancellation of the run's task (a caller's timeout, `task.cancel()`, and a user's Ctrl-C under `asyncio.run`,
  whose SIGINT handler cancels the main task): the task then reports `cancelling() > 0`. A CancelledError the
  tool raised on its own leaves that count at 0.
- a user's Ctrl-C while a synchronous caller runs on the main thread (a blocking call's steps and waits, or the
  sync bridge's loop): Python's SIGINT handler raises KeyboardInterrupt in whatever code the main thread runs,
  which may be an async tool's. A blocking call has no task, so this is the only way it is stopped. Python runs
  signal handlers only on the main thread and only between instructions (at calls and loop jumps), never at
  a `raise` statement; so a KeyboardInterrupt off the main thread, or thrown by a `raise`, is the tool's own.
Sync tools run on worker threads, where no signal ever arrives: whatever they raise is theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import dis
import functools
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, Protocol

from reactgraph.errors import ReactGraphError
from reactgraph.tools import untrusted
from reactgraph.tools.commands import answer_command, is_command
from reactgraph.tools.threads import ToolAborted, ToolThreads, awaited

if TYPE_CHECKING:
    from pydantic import BaseModel

    from reactgraph.tools.langchain_adapter import ToolInjection
    from reactgraph.tools.meta import ToolMeta
    from reactgraph.tools.middleware import ToolWraps


class ToolError(ReactGraphError):
    """A tool failed in a way the model should read verbatim (e.g. "no weather data for Atlantis")."""


class TransientToolError(ToolError):
    """A failure that may succeed on retry (network blip, 503); only these are retried."""


class ToolRegistrationError(ReactGraphError, ValueError):
    """A tool definition cannot be registered (duplicate name, bad schema)."""


class ToolInputError(ToolError):
    """The arguments are well-typed but unusable (bad expression, unknown timezone): the model must fix them.

    The gateway reports these as `invalid_args`, which never counts against the tool's circuit breaker.
    """


ApprovalSetting = Literal["always", "never"]

SCOPE_PREFIX = "mcp-config:"  # the tag prefix of tools added for one MCP config file (see ToolGateway.mcp_config_scope)


@dataclass(frozen=True, slots=True)
class ToolSession:
    """A caller of the gateway. `allow`/`deny` hold tool names or tags; deny wins over allow."""

    id: str = "default"
    # None allows every tool; an empty set allows none.
    allow: frozenset[str] | None = None
    deny: frozenset[str] = frozenset()
    # Approval overrides by tool name or tag: ("http_get", "never"), ("mcp", "always");
    # see tools/guards.py.
    approval: tuple[tuple[str, ApprovalSetting], ...] = ()
    # Scope tags (`mcp-config:<file>`) of the MCP config files this session's runs name (Context.mcp_config): a
    # tool carrying such a tag is visible only to sessions naming it.
    mcp_scopes: frozenset[str] = frozenset()

    def permits(self, name: str, tags: tuple[str, ...] = ()) -> bool:
        labels = {name, *tags}
        if labels & self.deny:
            return False
        if any(tag.startswith(SCOPE_PREFIX) and tag not in self.mcp_scopes for tag in tags):
            return False
        return self.allow is None or bool(labels & self.allow)

    @classmethod
    def of(cls, id: str = "default", allow: Iterable[str] | None = None, deny: Iterable[str] | None = (),
           approval: Mapping[str, ApprovalSetting] | None = None, mcp_scopes: Iterable[str] = ()) -> ToolSession:
        """Convenience constructor taking any iterables (CLI options, Context fields)."""
        return cls(id=id, allow=None if allow is None else frozenset(allow), deny=frozenset(deny or ()),
                   approval=tuple(sorted((approval or {}).items())), mcp_scopes=frozenset(mcp_scopes))


class ToolStatus(StrEnum):
    """Outcome of one tool call; every value is a distinct way a call can end."""

    OK = "ok"
    UNKNOWN_TOOL = "unknown_tool"
    DENIED = "denied"
    INVALID_ARGS = "invalid_args"
    CIRCUIT_OPEN = "circuit_open"
    RATE_LIMITED = "rate_limited"
    TIMEOUT = "timeout"
    # The tool asks a person to approve each call, and this one came without an approval: it was not run.
    NEEDS_APPROVAL = "needs_approval"
    ERROR = "error"

    @property
    def counts_as_failure(self) -> bool:
        """Whether the circuit breaker should count this outcome against the tool."""
        return self in _FAILURES


_FAILURES = frozenset({ToolStatus.ERROR, ToolStatus.TIMEOUT})


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool returned in two parts (LangChain's `content_and_artifact`): `content` for the model, `artifact`
    for the program (raw data, ids, a dataframe), kept on the ToolMessage and never shown to the model."""

    content: Any
    artifact: Any


# Where a call's events go: inside our graphs, LangGraph's stream writer (the `custom` stream mode).
EventSink = Callable[[dict[str, Any]], None]


def emit(sink: EventSink, name: str, call_id: str, event: str, **fields: Any) -> None:
    """Send one event; a sink that fails must never fail the tool call (events are information, not control)."""
    with contextlib.suppress(Exception):  # e.g. a consumer that stopped reading: the call goes on
        sink({"type": "gateway", "event": event, "tool": name, "call_id": call_id, **fields})


@dataclass(slots=True)
class ToolResult:
    """One tool call's record at the gateway: the call, what the steps learn on its way, and its outcome.

    `content` is what the model reads next; the call it answers is `name`, `args` and `call_id`.
    """

    name: str
    call_id: str
    status: ToolStatus = ToolStatus.ERROR
    content: str = ""
    latency_ms: float = 0.0
    attempts: int = 0
    # Raw value returned by the tool (ok calls only); `content` is its rendering for the model.
    value: Any = None
    # Machine-readable facts behind `content` (e.g. field errors, retry time) for logs and tests.
    detail: dict[str, Any] = field(default_factory=dict)
    # The tool's artifact (`ToolOutput`), for the ToolMessage: not for the model, nor for logs.
    artifact: Any = None
    # The LangGraph `Command` the tool returned (tools/commands.py): its state update and goto, kept whole for the
    # graph's act step; the observation in `content` is its ToolMessage's text. The result limit cuts `content`
    # and `value`, never this: the update is the tool's write to the state, not output for the model.
    command: Any = None
    # The arguments as the model wrote them (a dict, a JSON string, or junk that validation refuses).
    args: Any = None
    session: ToolSession = field(default_factory=ToolSession, repr=False)
    # A person approved this call (the graphs' approval step); a tool that asks for approval runs only then.
    approved: bool = field(default=False, repr=False)
    # Where this call's gateway events go (retry, breaker, timeout, waiting); None: no events, no cost.
    sink: EventSink | None = field(default=None, repr=False, compare=False)
    # What the running graph offers tools that ask for injected arguments (state, store, ToolRuntime).
    injection: ToolInjection | None = field(default=None, repr=False, compare=False)
    # The called tool, resolved by `Existence`.
    meta: ToolMeta | None = field(default=None, repr=False)
    # Validated arguments: the tool's pydantic model, or the checked dict for a JSON-schema tool.
    params: BaseModel | dict[str, Any] | None = field(default=None, repr=False)
    # Monotonic time by which the call must finish (set by the timeout policy, read by retry).
    deadline: float | None = field(default=None, repr=False)
    # Set by the circuit breaker when this call is its half-open probe, and by the concurrency limit when the
    # call had to wait for a slot: a call that waited is checked against the breaker again before it runs.
    breaker_probe: bool = field(default=False, repr=False)
    waited_for_slot: bool = field(default=False, repr=False)
    # Set once the breaker step inside the slot has dealt with the call (the outer step then records nothing).
    breaker_settled: bool = field(default=False, repr=False)
    # The graph's LangChain `wrap_tool_call` middleware for this call (tools/middleware.py); None: none.
    wraps: ToolWraps | None = field(default=None, repr=False, compare=False)
    # What the tool raised, for those wrappers (as LangChain's ToolNode, they see the tool's exception).
    raised: BaseException | None = field(default=None, repr=False, compare=False)
    # A sync caller's call (`ToolGateway.execute_sync`): the steps wait by blocking its thread, no event loop.
    blocking: bool = field(default=False, repr=False, compare=False)

    @classmethod
    def of(cls, call: Any, session: ToolSession, *, sink: EventSink | None = None, approved: bool = False,
           injection: ToolInjection | None = None, wraps: ToolWraps | None = None,
           blocking: bool = False) -> ToolResult:
        """The record of one call as the model wrote it (LangChain's `{"name", "args", "id"}` dict), with junk
        tolerated: a bad call must become a result, not an exception."""
        if isinstance(call, Mapping):
            name = call.get("name")
            return cls(name=name if isinstance(name, str) else _text(name), args=call.get("args"),
                       call_id=_text(call.get("id") or ""), session=session, sink=sink, approved=approved,
                       injection=injection, wraps=wraps, blocking=blocking)
        return cls(name=_text(call), call_id="", session=session, sink=sink, approved=approved, injection=injection,
                   wraps=wraps, blocking=blocking)

    @property
    def ok(self) -> bool:
        return self.status is ToolStatus.OK

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

    def answer(self, status: ToolStatus, content: str, *, value: Any = None, artifact: Any = None,
               **detail: Any) -> ToolResult:
        """Settle this call's outcome (any earlier answer is replaced); latency is stamped by the telemetry
        policy on the way out."""
        self.status, self.content, self.value, self.artifact, self.detail = status, content, value, artifact, detail
        self.command = None  # a later answer (a timeout, a retry's) replaces a Command's too
        return self

    def to_dict(self) -> dict[str, Any]:
        """The outcome as logs and JSON show it (no raw value, no artifact)."""
        return {"name": self.name, "call_id": self.call_id, "status": self.status.value, "content": self.content,
                "latency_ms": self.latency_ms, "attempts": self.attempts, "detail": copy.deepcopy(self.detail)}


# A call the model wrote that cannot even be shown is logged under the gateway's name, as it always was.
_gateway_log = logging.getLogger("reactgraph.tools.gateway")


def _text(value: Any) -> str:
    try:
        return str(value)
    except Exception as exc:  # noqa: BLE001 - e.g. an int past Python's digit limit, a list nested 5,000 deep
        _gateway_log.debug("a tool call's name or id cannot be shown as text (%s)", type(exc).__name__,
                           extra={"swallowed": {"where": "tool call name/id", "error_type": type(exc).__name__}})
        return f"<{type(value).__name__}>"


Handler = Callable[[ToolResult], Awaitable[ToolResult]]


class Policy(Protocol):
    """A pipeline step: answer the call (short-circuit) or `await proceed(call)` and adapt its result."""

    async def __call__(self, call: ToolResult, proceed: Handler) -> ToolResult: ...


def chain(policies: Sequence[Policy], innermost: Handler) -> Handler:
    """Compose policies so the first one listed sees the call first and the result last."""
    handler = innermost
    for policy in reversed(policies):
        handler = _bind(policy, handler)
    return handler


def _bind(policy: Policy, proceed: Handler) -> Handler:
    # A partial rather than a closure: one coroutine frame per policy instead of two, on every call.
    return functools.partial(policy, proceed=proceed)


log = logging.getLogger("reactgraph.tools.containment")

_RAISE = dis.opmap["RAISE_VARARGS"]


def delivered_by_signal(interrupt: KeyboardInterrupt) -> bool:
    """Whether this KeyboardInterrupt came from the SIGINT handler (a user's Ctrl-C) rather than a tool's `raise`."""
    if threading.current_thread() is not threading.main_thread():
        return False
    tb = interrupt.__traceback__
    if tb is None:
        return True  # nothing to tell by: let the interrupt stop the run, as a Ctrl-C should
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code.co_code
    return not (0 <= tb.tb_lasti < len(code) and code[tb.tb_lasti] == _RAISE)


def stopped_from_outside(exc: BaseException) -> bool:
    """Whether `exc` means the caller is stopping the run (so it must propagate), not that the tool failed."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no event loop: a blocking call, which only a user's Ctrl-C stops from outside
        task = None
    if task is not None and task.cancelling():
        return True
    return isinstance(exc, KeyboardInterrupt) and delivered_by_signal(exc)


def tool_fault(call: ToolResult, exc: BaseException) -> ToolResult:
    """The `error` result for whatever tool code raised; re-raises instead when the run is being stopped."""
    if stopped_from_outside(exc):
        if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt)):
            raise exc
        # The tool swallowed the cancellation and raised something else: the cancellation still wins.
        raise asyncio.CancelledError(f"cancelled while {call.name} ran") from exc
    cause = exc.cause if isinstance(exc, ToolAborted) else exc
    call.raised = cause
    # The call's own record (the telemetry step's) says it failed; its traceback only at DEBUG, for the tool's author.
    if log.isEnabledFor(logging.DEBUG):
        log.debug("tool %s raised %s (contained as an error result)", call.name, type(cause).__name__,
                  exc_info=cause, extra={"swallowed": {"tool": call.name, "error_type": type(cause).__name__}})
    return call.answer(ToolStatus.ERROR, untrusted.failed(call.name, cause), error_type=type(cause).__name__)


class Invoke:
    """Calls `meta.run` with the validated arguments; sync tools never block the event loop, nor the caller of a
    blocking call past its deadline.

    A sync tool whose earlier calls left too many threads stuck (still running past their timeout) is not
    given another: the call fails at once, and the threads stay for the tools that return.
    """

    def __init__(self, threads: ToolThreads | None = None) -> None:
        self.threads = threads or ToolThreads()

    async def __call__(self, call: ToolResult) -> ToolResult:
        kwargs = dict(call.arguments)  # field name → validated value, nested models kept as models
        tool = call.tool
        if tool.injects is not None:  # what the runtime supplies, added after every check of what the model sent
            kwargs.update(tool.injects.values(call.call_id, call.injection, []))
        if tool.is_async:  # a blocking call's on the shared loop, within its deadline
            value = await awaited(call.blocking, tool.run(**kwargs), call.deadline)
            if is_command(value):
                return answer_command(call, value)
            if isinstance(value, ToolOutput):
                return call.answer(ToolStatus.OK, untrusted.render_value(value.content), value=value.content,
                                   artifact=value.artifact)
            return call.answer(ToolStatus.OK, untrusted.render_value(value), value=value)
        stuck = self.threads.refusal(call.name)
        if stuck is not None:
            return call.answer(ToolStatus.ERROR, untrusted.stuck(call.name, stuck, tool.timeout_s),
                               reason="stuck threads", stuck_threads=stuck)
        work = functools.partial(_run_and_render, tool.run, kwargs)
        if call.blocking and tool.timeout_s is None:  # no deadline to keep: no hand-off to a thread either
            value, content = _inline(work)
        elif call.blocking:  # the caller's thread waits for the tool's, up to the deadline
            value, content = self.threads.call(call.name, work, call.deadline)
        else:
            value, content = await self.threads.run(call.name, work)
        if content is None and inspect.isawaitable(value):  # a sync-looking callable that is async inside
            value = await awaited(call.blocking, value, call.deadline)
            content = None if is_command(value) else untrusted.render_value(value)
        if content is None:
            return answer_command(call, value)
        return call.answer(ToolStatus.OK, content, value=value)


def _inline(work: Callable[[], tuple[Any, str | None]]) -> tuple[Any, str | None]:
    """`work()` on this thread, in a copy of its context as a gateway thread would run it. Inside this coroutine a
    StopIteration would turn into a RuntimeError (PEP 479): it is carried as a thread carries it. Anything else
    goes up as raised, so `Normalise` tells a user's Ctrl-C from a tool's fault as it does for a thread's."""
    try:
        return contextvars.copy_context().run(work)
    except StopIteration as exc:
        raise ToolAborted(exc) from None


def _run_and_render(run: Callable[..., Any], kwargs: Mapping[str, Any]) -> tuple[Any, str | None]:
    # Rendered on the tool's thread: a huge or slow-to-print value then costs the tool's time, not the loop's.
    # None: not rendered (an awaitable, or a Command, whose observation is its ToolMessage's).
    value = run(**kwargs)
    if inspect.isawaitable(value) or is_command(value):
        return value, None
    return value, untrusted.render_value(value)
