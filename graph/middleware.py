"""LangChain agent middleware in the explicit graphs: `middleware=[...]` as `create_agent` takes it.

`create_agent(model, tools, middleware=[...])` is how LangChain 1.x agents are written and extended. The builders
take the same list and put each hook where `create_agent` runs it, on our loop:

| hook | where (ReAct) | order |
| --- | --- | --- |
| `before_agent` | once per turn, after `load_memory` (the turn has begun) and before the loop | as listed |
| `before_model` | before every `think` (the loop's entry: `reflect`'s way back to `think` passes them) | as listed |
| `wrap_model_call` | around `think`'s model request, in the model gateway (models/middleware.py) | first outermost |
| `after_model` | after `think`, before the route to `act`, `approve` or `finalize` | reversed |
| `wrap_tool_call` | each tool call, in the tool gateway past its guards (tools/middleware.py) | first outermost |
| `after_agent` | once per turn, after `finalize` (and `respond`), before `save_memory` | reversed |

Each `before_*`/`after_*` hook is a node of the graph named as `create_agent` names it (`<name>.before_model`), so
it shows in the drawing, the stream and the checkpoints; its update goes through the state's reducers. A hook
whose `hook_config(can_jump_to=[...])` allows it may set `jump_to`: "model" goes to the loop's entry (the
`before_model` hooks, else `think`), "tools" to `act` (the last reply's calls, through approval as any), "end" to
`finalize`, which settles the turn from what it has (in `create_agent`, "end" leaves the loop at once). A hook
defined only as a coroutine runs under `ainvoke`/`astream` and is refused in one line under `invoke`; a sync-only
hook runs under either, on a worker thread when awaited.

A middleware's `state_schema` fields join the graph's state (the graph's own fields win a clash, as
`create_agent`'s base state does) and, unless marked `OmitFromInput`, its input; its `tools` join the graph's
gateway (registered on the gateway object given, if one was).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired, Required, get_args, get_origin, get_type_hints

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.graph import StateGraph
from langgraph.runtime import get_runtime
from typing_extensions import TypedDict

from reactgraph.errors import ReactGraphError
from reactgraph.nodes.driver import edge
from reactgraph.tools import ToolGateway

Hook = Literal["before_agent", "before_model", "after_model", "after_agent"]
_REVERSED: frozenset[Hook] = frozenset({"after_model", "after_agent"})
Next = str | Callable[..., Any]  # the node after a chain of hooks: a name, or a route of (state, runtime)


class MiddlewareError(ReactGraphError, TypeError):
    """A `middleware=` list the graph cannot take (one line says what)."""


@dataclass(frozen=True)
class Jumps:
    """Where a hook's `jump_to` leads in this graph: the loop's entry, the route into the tool round, the end."""

    model: str
    tools: Callable[..., Any]  # a route of (state, runtime)
    tools_paths: tuple[str, ...]
    end: str

    def destinations(self) -> list[str]:
        return list(dict.fromkeys([self.model, *self.tools_paths, self.end]))


class AgentHooks:
    """A graph's middleware, sorted by hook; empty when the graph was given none."""

    def __init__(self, middleware: Sequence[Any] | None, agent_request: str = "think",
                 state_schema: type | None = None) -> None:
        # `agent_request`: the purpose of the graph's "agent's model request" (ReAct's think, Plan-and-Solve's step);
        # `state_schema`: a caller's own state fields (create_agent's `state_schema=`), after the middleware's.
        self.middleware = _checked(middleware or ())
        self.state_schema = state_schema
        self.model_wraps: Any = None
        self.tool_wraps: Any = None
        if self.middleware:  # the wrapping modules load only for a graph with middleware
            from reactgraph.models.middleware import ModelWraps
            from reactgraph.models.middleware import wrappers_of as model_wrappers_of
            from reactgraph.tools.middleware import ToolWraps
            from reactgraph.tools.middleware import wrappers_of as tool_wrappers_of

            self.model_wraps = ModelWraps(model_wrappers_of(self.middleware), frozenset({agent_request}))
            wraps = tool_wrappers_of(self.middleware)
            self.tool_wraps = ToolWraps(wraps) if wraps else None

    def __bool__(self) -> bool:
        return bool(self.middleware)

    def with_hook(self, hook: Hook) -> list[Any]:
        """The middleware that define `hook` (sync or async), in the order the hook runs."""
        if not self.middleware:
            return []  # nor is LangChain's agents package imported for a graph without middleware (≈ 0.2 s)
        from langchain.agents.middleware import AgentMiddleware

        found = [m for m in self.middleware
                 if getattr(type(m), hook) is not getattr(AgentMiddleware, hook)
                 or getattr(type(m), "a" + hook) is not getattr(AgentMiddleware, "a" + hook)]
        return found[::-1] if hook in _REVERSED else found

    def entry(self, hook: Hook) -> str | None:
        """The name of the first node of `hook`'s chain (None: no middleware has it)."""
        found = self.with_hook(hook)
        return f"{found[0].name}.{hook}" if found else None

    def reads_state(self, gateway: ToolGateway) -> Callable[[str], bool]:
        """Which calls' act tasks carry the graph state: the tools that read it, and with wrap_tool_call
        middleware every call (the wrappers' requests carry the state)."""
        return gateway.reads_state if self.tool_wraps is None else (lambda name: True)

    def add_tools(self, gateway: ToolGateway) -> ToolGateway:
        """The gateway with the middleware's own tools registered (e.g. TodoListMiddleware's `write_todos`)."""
        for middleware in self.middleware:
            for tool in getattr(middleware, "tools", None) or ():
                if gateway.registry.get(getattr(tool, "name", "")) is None:
                    gateway.register(tool)
        return gateway

    def state(self, base: type) -> type:
        """The graph's state: the middleware's `state_schema` fields, the caller's, then the graph's own (which win
        a clash)."""
        if not self._schemas():
            return base
        return _merged(f"{base.__name__}WithMiddleware", [*self._schemas(), base], omit=None)

    def input(self, base: type) -> type:
        """The graph's input: the graph's own, and the middleware's and caller's fields not marked `OmitFromInput`."""
        if not self._schemas():
            return base
        return _merged(f"{base.__name__}WithMiddleware", [*self._schemas(), base], omit="input", keep=base)

    def fields(self, base: type) -> tuple[str, ...]:
        """The state fields the middleware add to `base` (LangChain's own bookkeeping, `jump_to`, left out)."""
        own = set(get_type_hints(base, include_extras=True)) | {"jump_to", "messages", "structured_response"}
        return tuple(dict.fromkeys(name for schema in self._schemas()
                                   for name in get_type_hints(schema, include_extras=True) if name not in own))

    def _schemas(self) -> list[type]:
        schemas = [m.state_schema for m in self.middleware if getattr(m, "state_schema", None) is not None]
        return [*schemas, self.state_schema] if self.state_schema is not None else schemas

    def chain(self, builder: StateGraph[Any, Any, Any, Any], hook: Hook, then: Next, then_paths: Sequence[str],
              jumps: Jumps) -> str | None:
        """Add the nodes of `hook`, each leading to the next and the last to `then`; the first node's name (None:
        no middleware has the hook, and nothing was added)."""
        found = self.with_hook(hook)
        names = [f"{m.name}.{hook}" for m in found]
        for middleware, name in zip(found, names, strict=True):
            builder.add_node(name, HookNode(middleware, hook, name))
        for position, (middleware, name) in enumerate(zip(found, names, strict=True)):
            after: Next = names[position + 1] if position + 1 < len(names) else then
            paths = [after] if isinstance(after, str) else list(then_paths)
            allowed = _can_jump_to(middleware, hook)
            if not allowed and isinstance(after, str):
                builder.add_edge(name, after)
                continue
            destinations = list(dict.fromkeys([*paths, *(jumps.destinations() if allowed else ())]))
            builder.add_conditional_edges(name, edge(_jump_route(after, allowed, jumps)), destinations)
        return names[0] if names else None


def _jump_route(after: Next, allowed: Sequence[str], jumps: Jumps) -> Callable[..., Any]:
    def route(state: Any, runtime: Any) -> Any:
        jump = state.get("jump_to") if isinstance(state, dict) else None
        if jump in allowed:
            if jump == "model":
                return jumps.model
            if jump == "end":
                return jumps.end
            if jump == "tools":
                return jumps.tools(state, runtime)
        return after if isinstance(after, str) else after(state, runtime)
    route.__name__ = "after_hook"
    return route


def _can_jump_to(middleware: Any, hook: Hook) -> list[str]:
    for method in (getattr(type(middleware), hook), getattr(type(middleware), "a" + hook)):
        allowed = getattr(method, "__can_jump_to__", None)
        if allowed:
            return list(allowed)
    return []


class HookNode(Runnable[Any, Any]):
    """One middleware's `before_*`/`after_*` hook as a node: `hook(state, runtime)` under `invoke`, `ahook` awaited
    under `ainvoke`; its dict is the node's update (None: no change)."""

    def __init__(self, middleware: Any, hook: Hook, name: str) -> None:
        from langchain.agents.middleware import AgentMiddleware

        self.name = name
        self._sync = getattr(middleware, hook) if getattr(type(middleware), hook) is not getattr(
            AgentMiddleware, hook) else None
        self._async = getattr(middleware, "a" + hook) if getattr(type(middleware), "a" + hook) is not getattr(
            AgentMiddleware, "a" + hook) else None

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if self._sync is None:
            raise MiddlewareError(f"{self.name} is defined only as a coroutine: run the graph with ainvoke or astream")
        return self._sync(input, get_runtime()) or {}

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        runtime = get_runtime()
        if self._async is not None:
            return await self._async(input, runtime) or {}
        assert self._sync is not None
        return await asyncio.to_thread(self._sync, input, runtime) or {}


def _checked(middleware: Sequence[Any]) -> tuple[Any, ...]:
    if not middleware:
        return ()
    from langchain.agents.middleware import AgentMiddleware

    if isinstance(middleware, AgentMiddleware) or not isinstance(middleware, Sequence):
        raise MiddlewareError("middleware= takes a list of LangChain AgentMiddleware, as create_agent does")
    names: set[str] = set()
    for item in middleware:
        if not isinstance(item, AgentMiddleware):
            raise MiddlewareError(f"middleware= holds a {type(item).__name__}: give LangChain AgentMiddleware "
                                  "instances (a class, or a hook made with @before_model, @wrap_tool_call, …)")
        if item.name in names:
            raise MiddlewareError(f"two middleware are named {item.name!r}: give each its own name (their hooks are "
                                  "nodes named after them)")
        names.add(item.name)
    return tuple(middleware)


# --- state schemas --------------------------------------------------------------------------------------------

def _merged(name: str, schemas: Sequence[type], omit: str | None, keep: type | None = None) -> type:
    """One TypedDict of `schemas`' fields (later ones win); with `omit`, fields marked `OmitFromSchema(<omit>)` are
    left out, except those of `keep` (the graph's own input)."""
    kept = set(get_type_hints(keep, include_extras=True)) if keep is not None else set()
    fields: dict[str, Any] = {}
    for schema in schemas:
        for field_name, hint in get_type_hints(schema, include_extras=True).items():
            if omit is not None and field_name not in kept and _omitted(hint, omit):
                continue
            fields[field_name] = hint if get_origin(hint) is NotRequired or field_name == "messages" \
                else NotRequired[hint]
    return TypedDict(name, fields)  # type: ignore[operator]


def _omitted(hint: Any, flag: str) -> bool:
    from langchain.agents.middleware.types import OmitFromSchema

    if get_origin(hint) in (NotRequired, Required):
        hint = get_args(hint)[0]
    if get_origin(hint) is not Annotated:
        return False
    return any(isinstance(meta, OmitFromSchema) and getattr(meta, flag, False) for meta in get_args(hint)[1:])
