"""`ToolGateway`: the one door every tool call of every graph goes through, and the registry of the tools behind it."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.tools import BaseTool

from reactgraph.tools.call import EventSink, Handler, Invoke, ToolRegistrationError, ToolResult, ToolSession, chain
from reactgraph.tools.guards import (
    ApprovalGate,
    ArgumentValidation,
    Existence,
    Permission,
    ResultLimit,
    approval_request,
    interrupt_on,
)
from reactgraph.tools.langchain_adapter import ToolInjection
from reactgraph.tools.meta import ToolMeta, as_tool_meta
from reactgraph.tools.resilience import (
    BreakerConfig,
    BreakerRecheck,
    BreakerStore,
    Bulkhead,
    CircuitBreakerPolicy,
    CircuitBreakers,
    MemoryBreakerStore,
    Normalise,
    Retry,
    Timeout,
)
from reactgraph.tools.telemetry import MetricsStore, Telemetry, ToolTracing
from reactgraph.tools.threads import ToolThreads, run_blocking, run_sync

ToolCall = Mapping[str, Any]  # LangChain's tool call dict: {"name", "args", "id"}


async def _wrapped(call: ToolResult, proceed: Handler) -> ToolResult:
    """The pipeline's place for a graph's `wrap_tool_call` middleware: a pass for a call that carries none (its
    module is imported only by graphs built with middleware)."""
    if call.wraps is None:
        return await proceed(call)
    from reactgraph.tools.middleware import Wrapped
    return await Wrapped()(call, proceed)


def _settled(record: ToolResult) -> ToolResult:
    """An answered record, let go of the run's writer, state, store, wrappers and the tool's exception."""
    record.sink = record.injection = record.wraps = record.raised = None
    return record


class ToolRegistry:
    """Tools by name, in registration order; a name can be registered once."""

    def __init__(self) -> None:
        self._tools: dict[str, ToolMeta] = {}

    def add(self, meta: ToolMeta) -> None:
        if meta.name in self._tools:
            raise ToolRegistrationError(f"a tool named {meta.name!r} is already registered")
        self._tools[meta.name] = meta

    def get(self, name: str) -> ToolMeta | None:
        return self._tools.get(name) if isinstance(name, str) else None

    def __iter__(self) -> Iterator[ToolMeta]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def available(self, session: ToolSession) -> list[ToolMeta]:
        """Enabled tools this session is permitted to call."""
        return [m for m in self._tools.values() if m.enabled and session.permits(m.name, m.tags)]

    def available_names(self, session: ToolSession) -> list[str]:
        return [m.name for m in self.available(session)]


class ToolGateway:
    """A registry of tools plus the policy pipeline that runs their calls; never raises for a tool's fault.

    The pipeline's steps live one module per concept (tools/guards.py, resilience.py,
    telemetry.py; the call record and the innermost step in call.py); their order is the list `__init__`
    chains, outermost first.
    """

    def __init__(self, tools: Iterable[ToolMeta | BaseTool | Callable[..., Any]] = (), *,
                 max_concurrent: int = 5, max_wait_s: float = 60.0,
                 breaker: BreakerConfig | None = None, breaker_store: BreakerStore | None = None,
                 metrics_store: MetricsStore | None = None, clock: Callable[[], float] = time.time,
                 retry: Retry | None = None,
                 max_result_chars: int = 1_000_000, max_threads: int = 32, max_stuck_per_tool: int = 4) -> None:
        self.registry = ToolRegistry()
        self.breakers = CircuitBreakers(breaker, clock=clock, store=breaker_store)
        self.bulkhead = Bulkhead(max_concurrent, max_wait_s)
        self.telemetry = Telemetry(metrics_store)
        self.threads = ToolThreads(max_threads, max_stuck_per_tool)
        self._max_result_chars = max_result_chars
        self.mcp_servers: list[Any] = []  # the MCP servers whose tools this gateway registered (tools/mcp/)
        # The configured MCP servers that did not start (or could not be started as configured), by name → the one
        # line saying why; their tools are absent, the other servers' are there.
        self.mcp_failed: dict[str, str] = {}
        self._mcp_scopes: set[str] = set()  # the scope tags of the MCP config files added for Contexts
        self._mcp_lock = threading.Lock()
        # The longest an MCP server's start (or restart) may take; the service sets it below the session lease's
        # expiry, so a start never outlives the lease of the run that waits for it. None: the configs' own.
        self.mcp_startup_cap_s: float | None = None
        # The pipeline, outermost first: each step sees the call before the ones below it, and its result after.
        self._pipeline: Handler = chain([
            ToolTracing(),  # a span per call while tracing is on (reactgraph.graph.tracing); else a pass
            self.telemetry,  # latency, one log record, the tool's metrics
            ResultLimit(max_result_chars),  # no result leaves larger than its limit
            Existence(self.registry),  # the tool is registered and enabled (resolves `call.tool`)
            Permission(self.registry),  # the session may use it
            ArgumentValidation(),  # the arguments fit its schema (sets `call.arguments`)
            ApprovalGate(),  # a tool that asks for approval runs only with `approved=True`
            _wrapped,  # the graph's LangChain wrap_tool_call middleware, if it has any (tools/middleware.py)
            CircuitBreakerPolicy(self.breakers, self.registry),  # its circuit is not open
            self.bulkhead,  # a concurrency slot, waited for up to max_wait_s
            BreakerRecheck(self.breakers, self.registry),  # a call that waited asks the breaker again
            Normalise(),  # below here a tool may raise anything; above, every outcome is a ToolResult
            Timeout(),  # the tool's timeout_s bounds the call, retries included
            retry or Retry(),  # transient failures tried again while time remains
        ], Invoke(self.threads))  # the tool itself (sync tools on the gateway's own daemon threads, `threads`)
        for item in tools:
            self.register(item)

    # -- registration -------------------------------------------------------------------------------------

    def register(self, tool: ToolMeta | BaseTool | Callable[..., Any], **options: Any) -> ToolMeta:
        """Register a `ToolMeta`, a LangChain tool, or a typed function; a duplicate name is an error."""
        meta = as_tool_meta(tool, **options)
        self.registry.add(meta)
        return meta

    def tool(self, fn: Callable[..., Any] | None = None, **options: Any):
        """Decorator form of `register`: `@gateway.tool` or `@gateway.tool(timeout_s=2, tags=("math",))`."""
        def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
            self.register(func, **options)
            return func
        return decorate(fn) if fn is not None else decorate

    # -- MCP servers ------------------------------------------------------------------------------------------

    def add_mcp_servers(self, config: Mapping[str, Any] | str) -> list[ToolMeta]:
        """Register the tools of the MCP servers in `config` ({"mcpServers": …} and the other shapes of
        docs/mcp.md, as a dict, a JSON file's path or JSON text), starting each server's one session now; works
        from sync code inside a running loop too. A server that does not start is left out: logged as a warning
        and named in `mcp_failed`; the others' tools are registered. A bad config raises `McpConfigError`."""
        from reactgraph.tools.mcp.tools import add_servers
        return add_servers(self, config)

    async def aadd_mcp_servers(self, config: Mapping[str, Any] | str) -> list[ToolMeta]:
        """`add_mcp_servers` for async code."""
        from reactgraph.tools.mcp.tools import aadd_servers
        return await aadd_servers(self, config)

    def mcp_config_scope(self, path: str) -> str:
        """The scope tag of the MCP config file at `path` (a run's `Context.mcp_config`), its servers added on
        first use; their tools are visible only to sessions naming that scope (`ToolSession.mcp_scopes`)."""
        from reactgraph.tools.mcp.config import scope_of
        from reactgraph.tools.mcp.tools import add_servers

        scope = scope_of(path)
        with self._mcp_lock:  # one start per file, however many runs arrive at once
            if scope not in self._mcp_scopes:
                add_servers(self, path, scope=scope)
                self._mcp_scopes.add(scope)
        return scope

    async def aclose(self) -> None:
        """Close the sessions of the MCP servers this gateway added (also done at process exit)."""
        if self.mcp_servers:
            from reactgraph.tools.mcp.tools import close_servers
            servers, self.mcp_servers = list(self.mcp_servers), []
            await close_servers(servers)

    def close(self) -> None:
        """`aclose` for sync code."""
        if self.mcp_servers:
            from reactgraph.tools.mcp.loop import run_blocking
            run_blocking(self.aclose(), 30.0)

    # -- what the model sees --------------------------------------------------------------------------------

    def tools(self, session: ToolSession | None = None) -> list[ToolMeta]:
        """Enabled tools this session may use (all registered tools when no session is given)."""
        return self.registry.available(session or ToolSession())

    def schemas(self, session: ToolSession | None = None) -> list[dict[str, Any]]:
        """OpenAI tool schemas of the enabled tools this session may use."""
        return [meta.openai_schema() for meta in self.tools(session)]

    def as_langchain_tools(self, session: ToolSession | None = None, *, approved_by: Any = None,
                           on_result: Callable[[ToolResult], None] | None = None) -> list[BaseTool]:
        """The tools as LangChain `BaseTool`s whose calls still go through this gateway's pipeline.

        `approved_by`: the LangChain `HumanInTheLoopMiddleware` of the agent these tools run in. A call of a tool
        its `interrupt_on` gates has been put to a person by it, so the gateway takes that as the approval instead
        of answering `needs_approval` (asked once, not twice); every other check still runs. Without it, or for a
        tool it does not gate, a call that needs approval is not run (see docs/approvals.md). `on_result` sees each
        call's `ToolResult` (its status included, which the text the runner gets does not say)."""
        from reactgraph.tools.langchain_adapter import GatewayTool
        return [GatewayTool.wrap(self, meta, session or ToolSession(), approved_by, on_result)
                for meta in self.tools(session)]

    def interrupt_on(self, session: ToolSession | None = None) -> dict[str, dict[str, Any]]:
        """`interrupt_on` for LangChain's `HumanInTheLoopMiddleware`: the tools whose calls need a person's approval
        in this session, each with its allowed decisions and the reason it asks."""
        return interrupt_on(self.registry, session or ToolSession())

    # -- running calls ----------------------------------------------------------------------------------------

    async def execute(self, call: ToolCall, session: ToolSession | None = None, *,
                      events: EventSink | None = None, approved: bool = False,
                      injection: ToolInjection | None = None, wraps: Any = None) -> ToolResult:
        """Run one tool call (the model's `{"name", "args", "id"}` dict) through the pipeline: its one record,
        answered (the normalised result, with the call it answers).

        `events` receives the call's gateway events (retry, breaker, timeout, waiting) as small dicts.
        `approved`: a person approved this call (see `approval_request`); without it, a call of a tool that
        asks for approval is answered `needs_approval` and not run. `injection`: the graph's state, store,
        context and config, for LangChain tools with injected arguments (the graphs' act node passes it).
        `wraps`: the graph's LangChain `wrap_tool_call` middleware, run after the guards (tools/middleware.py).
        """
        record = ToolResult.of(call, session or ToolSession(), sink=events, approved=approved, injection=injection,
                               wraps=wraps)
        return _settled(await self._pipeline(record))

    def execute_sync(self, call: ToolCall, session: ToolSession | None = None, *,
                     events: EventSink | None = None, approved: bool = False,
                     injection: ToolInjection | None = None, wraps: Any = None) -> ToolResult:
        """`execute` for sync callers (the graphs' `invoke`, a gateway tool's `.invoke()`): the same pipeline and
        the same record, run on the caller's thread with no event loop. Its steps wait by blocking that thread;
        a sync tool still runs on one of the gateway's threads, so its timeout holds (tools/threads.py). A
        gateway whose breaker state lives in a shared store (asyncio's Redis client) runs the call on the sync
        bridge's loop instead."""
        if not isinstance(self.breakers.store, MemoryBreakerStore):
            return run_sync(self.execute(call, session, events=events, approved=approved, injection=injection,
                                         wraps=wraps))
        record = ToolResult.of(call, session or ToolSession(), sink=events, approved=approved, injection=injection,
                               wraps=wraps, blocking=True)
        return _settled(run_blocking(self._pipeline(record)))

    def reads_state(self, name: str) -> bool:
        """Whether the tool `name` asks for the graph state (`InjectedState`, `ToolRuntime`): its act task then
        carries the state."""
        meta = self.registry.get(name)
        return bool(meta is not None and meta.injects is not None and meta.injects.reads_state)

    def approval_request(self, call: ToolCall, session: ToolSession | None = None) -> dict[str, Any] | None:
        """`{"id", "name", "args", "reason", "decisions"}` (the decisions a person may give) when this call needs a
        person's approval before it runs, else None
        (also None for a call the pipeline would refuse anyway: unknown, not permitted, invalid arguments)."""
        return approval_request(self.registry, call if isinstance(call, Mapping) else {}, session or ToolSession())

    async def execute_many(self, calls: Sequence[ToolCall], session: ToolSession | None = None, *,
                           events: EventSink | None = None, approved: bool = False) -> list[ToolResult]:
        """Run calls concurrently (bounded by the concurrency limits); results come back in call order.
        `approved` applies to every call (see `execute`)."""
        if len(calls) == 1:
            return [await self.execute(calls[0], session, events=events, approved=approved)]
        return list(await asyncio.gather(*(self.execute(call, session, events=events, approved=approved)
                                           for call in calls)))

    # -- observability ----------------------------------------------------------------------------------------

    async def status(self) -> list[dict[str, Any]]:
        """Per tool: description, tags, limits, breaker state, stuck threads and call metrics (`reactgraph tools`).

        `stuck_threads` counts the tool's calls that gave up (timed out, cancelled) while its thread still runs.
        Metrics and breaker states are those of their stores: every process's when they are in Redis;
        `metrics_source` says which.
        """
        rows = []
        store = self.telemetry.store
        if store.shared:  # this process's own last calls are in the picture too
            await asyncio.to_thread(store.flush, 1.0)
        all_metrics = await store.read([meta.name for meta in self.registry])
        for meta in self.registry:
            breaker = self.breakers.for_tool(meta.name)
            snap = await breaker.snapshot()
            metrics = all_metrics.get(meta.name)
            rows.append({
                "name": meta.name, "description": meta.description, "enabled": meta.enabled,
                "server": meta.extra.get("mcp_server"),
                "tags": list(meta.tags), "timeout_s": meta.timeout_s, "max_concurrency": meta.max_concurrency,
                "max_result_chars": meta.max_result_chars or self._max_result_chars,
                "stuck_threads": self.threads.stuck(meta.name),
                "breaker": {"state": snap.state.value, "consecutive_failures": snap.consecutive_failures,
                            "retry_in_s": round(breaker.retry_in(snap), 3) if snap.state == "open" else None},
                "metrics": metrics, "metrics_source": store.describe(),
                "schema": meta.openai_schema()["function"]["parameters"],
            })
        return rows
