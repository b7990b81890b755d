"""Arguments a LangChain tool asks the runtime for, not the model: the call's id, the graph state, the store,
LangGraph's `ToolRuntime`. LangChain leaves them out of the model's schema (`tool.tool_call_schema`); the gateway
fills them in just before the tool runs, after every policy has checked what the model sent — so the model can
neither see nor forge them.

Detection reads the tool's annotations as LangGraph's `ToolNode` does, through the public markers only:
`Annotated[..., InjectedToolCallId]`, `Annotated[..., InjectedState("field")]` (or the whole state),
`Annotated[..., InjectedStore()]`, and a `ToolRuntime` parameter.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from langchain_core.tools import BaseTool, InjectedToolCallId

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig


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
    hidden = [name for name in _fields(tool.get_input_schema()) if name not in shown]
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
