"""LangChain's tool protocol, both ways: LangChain tools' injected arguments in, gateway tools out as `BaseTool`s.

In: arguments a LangChain tool asks the runtime for, not the model — the call's id, the graph state, the store,
LangGraph's `ToolRuntime`. LangChain leaves them out of the model's schema (`tool.tool_call_schema`); the gateway
fills them in just before the tool runs, after every policy has checked what the model sent — so the model can
neither see nor forge them. Detection reads the tool's annotations as LangGraph's `ToolNode` does, through the
public markers only: `Annotated[..., InjectedToolCallId]`, `Annotated[..., InjectedState("field")]` (or the whole
state), `Annotated[..., InjectedStore()]`, and a `ToolRuntime` parameter. What the running graph offers them is
a `ToolInjection` (the graphs' act node builds it; so does a host `ToolNode`'s runtime, below).

Out: `GatewayTool`, the gateway's tools as LangChain `BaseTool`s, so `create_agent` or any LangChain runner still
goes through the pipeline; a host `ToolNode` hands each its `ToolRuntime`, whose state, store and call id reach
the wrapped tool's injected arguments the same way.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from langchain_core.tools import BaseTool, InjectedToolCallId, ToolException
from langchain_core.utils.pydantic import TypeBaseModel
from pydantic import ConfigDict, create_model

from reactgraph.tools.call import ToolResult, ToolSession
from reactgraph.tools.commands import with_observation

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from reactgraph.tools.meta import ToolMeta


# -- in: a LangChain tool's injected arguments ------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ToolInjection:
    """What the running graph offers the tools of one call (the act node builds it from its state and runtime)."""

    state: Mapping[str, Any] | None = None
    context: Any = None
    config: Mapping[str, Any] | None = None
    store: Any = None
    stream_writer: Callable[[Any], None] | None = None


@dataclass(frozen=True, slots=True)
class InjectedArgs:
    """Which parameters of one tool are injected, and from what."""

    call_id: str | None = None
    state: dict[str, str | None] = field(default_factory=dict)  # parameter → state field (None: the whole state)
    store: str | None = None
    runtime: str | None = None

    @property
    def reads_state(self) -> bool:
        return bool(self.state) or self.runtime is not None

    def values(self, call_id: str, injection: ToolInjection | None, tools: list[BaseTool]) -> dict[str, Any]:
        """The injected parameters' values for this call (a state field the state lacks is left out).

        A tool that reads the state, called with none (outside a graph's act step), is refused in one line: it
        is not the tool's fault, nor the model's to fix, so it never counts against the tool's breaker."""
        injection = injection or ToolInjection()
        if self.state and injection.state is None:
            from reactgraph.tools.call import ToolInputError

            raise ToolInputError(f"this tool reads the graph state ({', '.join(self.state)}: InjectedState); run it "
                                 "in a graph's tool step, where the state is given")
        state = dict(injection.state or {})
        values: dict[str, Any] = {}
        if self.call_id:
            values[self.call_id] = call_id
        for name, state_field in self.state.items():
            if state_field is None:
                values[name] = state
            elif state_field in state:
                values[name] = state[state_field]
        if self.store:
            values[self.store] = injection.store
        if self.runtime:
            from langgraph.prebuilt import ToolRuntime

            values[self.runtime] = ToolRuntime(
                state=state, context=injection.context, config=cast("RunnableConfig", dict(injection.config or {})),
                stream_writer=injection.stream_writer or _no_stream, tool_call_id=call_id, store=injection.store,
                tools=tools)
        return values


def _no_stream(_chunk: Any) -> None:
    """The stream writer outside a streamed run: what is written goes nowhere."""


def injected_args(tool: BaseTool) -> InjectedArgs | None:
    """The tool's injected parameters (None when it has none): those of its input schema that its model-facing
    schema leaves out, each classified by its annotation."""
    shown = set(_fields(tool.tool_call_schema))
    # The function's own parameters too, as LangGraph's ToolNode reads them: a tool made with an explicit
    # `args_schema` (`infer_schema=False`, e.g. TodoListMiddleware's write_todos) has its `runtime` only there.
    hidden = [name for name in dict.fromkeys([*_fields(tool.get_input_schema()), *_parameters(tool)])
              if name not in shown]
    if not hidden:
        return None
    from langgraph.prebuilt import InjectedState, InjectedStore, ToolRuntime

    hints = _annotations(tool)
    found: dict[str, Any] = {"state": {}}
    for name in hidden:
        hint = hints.get(name)
        markers = typing.get_args(hint)[1:] if typing.get_origin(hint) is typing.Annotated else ()
        kind = typing.get_origin(hint) or hint
        if name == "runtime" or (isinstance(kind, type) and issubclass(kind, ToolRuntime)):
            found["runtime"] = name
        elif any(_is(marker, InjectedToolCallId) for marker in markers):
            found["call_id"] = name
        elif state := next((m for m in markers if _is(m, InjectedState)), None):
            found["state"][name] = getattr(state, "field", None) if isinstance(state, InjectedState) else None
        elif any(_is(marker, InjectedStore) for marker in markers):
            found["store"] = name
    return InjectedArgs(**found)


def _parameters(tool: BaseTool) -> list[str]:
    """The named parameters of the tool's function and coroutine (none for a tool without them)."""
    names: list[str] = []
    for function in (getattr(tool, "func", None), getattr(tool, "coroutine", None)):
        if callable(function):
            try:
                parameters = inspect.signature(function).parameters.values()
            except (TypeError, ValueError):  # a builtin or C callable without a signature: nothing to add
                continue
            names += [p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return names


def _is(marker: Any, kind: type) -> bool:
    return isinstance(marker, kind) or (isinstance(marker, type) and issubclass(marker, kind))


def _fields(schema: Any) -> list[str]:
    if isinstance(schema, dict):
        return list((schema.get("properties") or {}).keys())
    return list(getattr(schema, "model_fields", {}) or {})


def _annotations(tool: BaseTool) -> dict[str, Any]:
    """The parameters' annotations, extras kept: the function's where there is one, then the input schema's."""
    hints: dict[str, Any] = {}
    function = getattr(tool, "func", None) or getattr(tool, "coroutine", None)
    schema = tool.get_input_schema()
    for source in (function, schema):
        if source is None:
            continue
        try:
            hints = {**typing.get_type_hints(source, include_extras=True), **hints}
        except (NameError, TypeError):  # an annotation that cannot be resolved: the other source may still tell
            continue
    return hints


# -- out: the gateway's tools as LangChain tools ----------------------------------------------------------------------

class GatewayTool(BaseTool):
    """A LangChain tool whose every call is `gateway.execute`; failures come back as text, never raised.

    A non-ok result is raised as a `ToolException` that the tool handles itself (`handle_tool_error`): LangChain
    then returns its text, as a `ToolMessage` with `status="error"` when called with a tool call.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)
    gateway: Any
    session: ToolSession
    # The host agent's HumanInTheLoopMiddleware (anything with `interrupt_on`), or None: see `host_approved`.
    approved_by: Any = None
    # Sees every call's full result (its status, which the text a runner gets does not carry): e.g. the evals.
    on_result: Callable[[ToolResult], None] | None = None

    def model_post_init(self, context: Any) -> None:
        super().model_post_init(context)
        # LangChain's BaseTool fills a cached property (`_injected_args_keys`) into the tool's `__dict__` at its first
        # call. A host `ToolNode` runs a reply's calls on several threads, and each call's input text is the repr of
        # its ToolRuntime, which lists every tool: one tool's first call grew the dict another call's repr was
        # reading ("dictionary changed size during iteration", a failed run). Filled now, before any call.
        getattr(self, "_injected_args_keys", None)

    @classmethod
    def wrap(cls, gateway: Any, meta: ToolMeta, session: ToolSession, approved_by: Any = None,
             on_result: Callable[[ToolResult], None] | None = None) -> GatewayTool:
        # A JSON-schema dict (not the model): LangChain then passes arguments through unvalidated, so bad ones
        # reach the gateway and come back as its `invalid_args` text instead of a raised ValidationError.
        return cls(name=meta.name, description=meta.description,
                   args_schema=meta.openai_schema()["function"]["parameters"], gateway=gateway, session=session,
                   handle_tool_error=True, approved_by=approved_by, on_result=on_result)

    def host_approved(self) -> bool:
        """Whether the host's HITL middleware asked a person about this tool's calls before they get here: it
        gates this tool's name in its `interrupt_on`. Its approve and edit then reach the tool (reject and respond
        never do), so the gateway takes them as the approval; its `when` predicate, if any, is the host's choice of
        which calls to ask about."""
        gated = getattr(self.approved_by, "interrupt_on", None)
        return isinstance(gated, Mapping) and self.name in gated

    def get_input_schema(self, config: Any = None) -> TypeBaseModel:
        """The input as LangGraph's `ToolNode` reads it to inject arguments: a `runtime` it fills in with its
        `ToolRuntime`, so a wrapped tool's injected arguments (call id, state, store, context, config, stream
        writer) get the host graph's. The model never sees it: its schema is `tool_call_schema`, the JSON schema.
        A tool whose own arguments include one called `runtime` keeps it, and gets no host runtime."""
        properties = self.args_schema.get("properties", {}) if isinstance(self.args_schema, dict) else {}
        if "runtime" in properties:
            return super().get_input_schema(config)
        from langgraph.prebuilt import ToolRuntime

        return create_model(f"{self.name}_input", __config__=ConfigDict(arbitrary_types_allowed=True, extra="allow"),
                            runtime=(ToolRuntime | None, None))

    async def _arun(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("run_manager", None)
        injection, call_id = _host_runtime(kwargs)
        return self._outcome(await self.gateway.execute({"name": self.name, "args": kwargs, "id": call_id},
                                                        self.session, approved=self.host_approved(),
                                                        injection=injection), call_id)

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        # The gateway's blocking path, not asyncio.run: this may be called from code inside a running loop
        # (Jupyter, FastAPI).
        kwargs.pop("run_manager", None)
        injection, call_id = _host_runtime(kwargs)
        return self._outcome(self.gateway.execute_sync({"name": self.name, "args": kwargs, "id": call_id},
                                                       self.session, approved=self.host_approved(),
                                                       injection=injection), call_id)

    def _outcome(self, result: ToolResult, call_id: str) -> Any:
        if self.on_result is not None:
            self.on_result(result)
        if result.command is not None:  # the tool's Command, for the host's ToolNode to apply (its observation cut)
            return with_observation(result.command, call_id, result.content)
        if not result.ok:
            raise ToolException(result.content)
        return result.content


def _host_runtime(kwargs: dict[str, Any]) -> tuple[ToolInjection | None, str]:
    """Take the `ToolRuntime` a host `ToolNode` injected (see `get_input_schema`) out of the arguments: what it
    offers the wrapped tool's injected arguments, and the call's id (empty when called outside a tool node)."""
    from langgraph.prebuilt import ToolRuntime

    runtime = kwargs.get("runtime")
    if not isinstance(runtime, ToolRuntime):  # none given, or the tool's own `runtime` argument: it stays
        return None, ""
    del kwargs["runtime"]
    state = runtime.state if isinstance(runtime.state, Mapping) else None
    injection = ToolInjection(state=state, context=runtime.context, config=runtime.config, store=runtime.store,
                              stream_writer=runtime.stream_writer)
    return injection, str(runtime.tool_call_id or "")
