"""The ReAct graph: load_memory → think → [approve] → act → observe → reflect → think … → finalize → save_memory.

`approve` is visited only when a call of the model's reply needs a person's approval (nodes/approval.py)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import RetryPolicy

from reactgraph.graph.middleware import AgentHooks, Jumps
from reactgraph.graph.routing import react as routing
from reactgraph.graph.routing.tool_round import after_approve
from reactgraph.graph.structured import add_respond, response_format_of
from reactgraph.graph.structured import state_schema as with_response
from reactgraph.nodes.approval import approval_check, make_approve
from reactgraph.nodes.context import Context
from reactgraph.nodes.driver import AgentServices, add_routed_node, edge
from reactgraph.nodes.react import make_finalize, make_reflect, make_think
from reactgraph.nodes.state import AgentState, InputState
from reactgraph.nodes.tool_commands import REACT_GOTO, CommandRules
from reactgraph.nodes.tool_round import make_act, observe
from reactgraph.nodes.turn_memory import make_load_memory, save_memory
from reactgraph.tools import ToolGateway, gateway_for
from reactgraph.tools.meta import AnyTool

# The compiled graph's types: state, context, input, output.
ReactGraph = CompiledStateGraph[AgentState, Context, InputState, AgentState]


def build_react_graph(gateway: ToolGateway | Sequence[AnyTool] | None = None,
                      checkpointer: BaseCheckpointSaver | None = None, store: BaseStore | None = None, *,
                      model: BaseChatModel | None = None, model_retry: RetryPolicy | None = None,
                      tools: Sequence[AnyTool] | None = None, response_format: Any = None,
                      middleware: Sequence[Any] = (), state_schema: type | None = None,
                      context_schema: type[Context] = Context, name: str = "react") -> ReactGraph:
    """Compile the ReAct agent. `model` overrides `Context.model` (e.g. a scripted chat model in tests);
    `model_retry` is the nodes' policy for transient model errors (default: `model_retry_policy()`). The tools:
    a `gateway`, or `tools=[...]` as LangChain's `create_agent` takes them (`tools.gateway_for`).
    `response_format` (a pydantic model, TypedDict, dataclass or JSON schema, or LangChain's ToolStrategy /
    ProviderStrategy / AutoStrategy of one): the answer also as `state["structured_response"]` (graph/structured.py).
    `middleware`: LangChain agent middleware, as `create_agent` takes it; where each hook runs: graph/middleware.py.
    `state_schema`: a TypedDict of your own state fields, joined to the graph's (its own win a clash);
    `context_schema`: the runtime context's type, `Context` or a subclass of it with your fields."""
    response = response_format_of(response_format)
    hooks = AgentHooks(middleware, state_schema=state_schema)
    services = AgentServices(hooks.add_tools(gateway_for(gateway, tools)), model, model_retry,
                             model_wraps=hooks.model_wraps, tool_wraps=hooks.tool_wraps)
    retry = services.retry
    state = hooks.state(with_response(AgentState, response))
    builder: StateGraph[Any, Context, Any, Any] = StateGraph(state, context_schema=_context(context_schema),
                                                             input_schema=hooks.input(InputState))
    reads_state = hooks.reads_state(services.gateway)
    to_tools = partial(routing.after_think, approval=approval_check(services), reads_state=reads_state)
    tool_paths = ("act", "approve", "observe", "finalize") if hooks else ("act", "approve", "finalize")
    loop_entry = hooks.entry("before_model") or "think"
    jumps = Jumps(model=loop_entry, tools=to_tools, tools_paths=tool_paths, end="finalize")
    to_loop = {"think": loop_entry, "finalize": "finalize"}

    # think, observe and reflect run their routes themselves (nodes/driver.py `add_routed_node`), for less of
    # LangGraph's work per step; not think when after_model hooks come between: the last hook's edge routes
    builder.add_node("load_memory", make_load_memory(services), retry_policy=retry)
    if hooks.entry("after_model"):
        builder.add_node("think", make_think(services), retry_policy=retry)
    else:
        add_routed_node(builder, "think", make_think(services), to_tools, tool_paths, retry_policy=retry)
    builder.add_node("approve", make_approve(services))  # no retry: it only asks
    # what a tool that returns a Command may set in this state, and where its goto may lead (tool_commands.py)
    commands = CommandRules.of(builder.channels, REACT_GOTO)
    builder.add_node("act", make_act(services, commands))  # the gateway retries tool calls itself
    add_routed_node(builder, "observe", observe, routing.after_round, {"reflect": "reflect", **to_loop},
                    input_schema=AgentState)
    add_routed_node(builder, "reflect", make_reflect(services), routing.after_reflect, to_loop, retry_policy=retry)
    builder.add_node("finalize", make_finalize(services), retry_policy=retry)
    builder.add_node("save_memory", save_memory)

    builder.add_edge(START, "load_memory")
    builder.add_edge("load_memory", hooks.chain(builder, "before_agent", loop_entry, [], jumps) or loop_entry)
    hooks.chain(builder, "before_model", "think", [], jumps)
    if after_model := hooks.chain(builder, "after_model", to_tools, tool_paths, jumps):
        builder.add_edge("think", after_model)
    builder.add_conditional_edges("approve", edge(partial(after_approve, reads_state=reads_state)),
                                  ["act", "observe"])
    builder.add_edge("act", "observe")
    closing = "finalize"
    if response is not None:
        builder.add_edge(closing, closing := add_respond(builder, services, response))
    builder.add_edge(closing, hooks.chain(builder, "after_agent", "save_memory", [], jumps) or "save_memory")
    builder.add_edge("save_memory", END)
    return builder.compile(checkpointer=checkpointer, store=store, name=name)


def _context(schema: type[Context]) -> type[Context]:
    if not (isinstance(schema, type) and issubclass(schema, Context)):
        raise TypeError(f"context_schema={getattr(schema, '__name__', schema)!s}: the nodes read reactgraph.Context's "
                        "fields; give Context or a subclass of it with your own")
    return schema
