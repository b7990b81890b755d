"""The Plan-and-Solve graph: load_memory → plan → execute_step ⇄ act → observe … [replan] … → solve → save_memory.

`iteration` counts plan steps begun (each may take up to STEP_TOOL_ROUNDS tool rounds), so
`Context.max_iterations` bounds the steps carried out, as it bounds ReAct's think→act rounds. Tool calls go
through the same gateway, `act` and `observe` as ReAct and leave the same `ExecutionStep` records.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import RetryPolicy

from reactgraph.graph.middleware import AgentHooks, Jumps
from reactgraph.graph.routing import plan_solve as routing
from reactgraph.graph.routing.tool_round import after_approve
from reactgraph.graph.structured import add_respond, response_format_of, state_schema
from reactgraph.nodes.approval import approval_check, make_approve
from reactgraph.nodes.context import Context
from reactgraph.nodes.driver import AgentServices, add_routed_node, edge
from reactgraph.nodes.plan_solve import make_execute_step, make_plan, make_replan, make_solve, observe_step
from reactgraph.nodes.plan_solve_state import PlanSolveState, plan_solve_turn
from reactgraph.nodes.state import InputState
from reactgraph.nodes.tool_commands import PLAN_SOLVE_GOTO, CommandRules
from reactgraph.nodes.tool_round import make_act
from reactgraph.nodes.turn_memory import make_load_memory, save_memory
from reactgraph.tools import ToolGateway, gateway_for
from reactgraph.tools.meta import AnyTool

# The compiled graph's types: state, context, input, output.
PlanSolveGraph = CompiledStateGraph[PlanSolveState, Context, InputState, PlanSolveState]


def build_plan_solve_graph(gateway: ToolGateway | Sequence[AnyTool] | None = None,
                           checkpointer: BaseCheckpointSaver | None = None, store: BaseStore | None = None, *,
                           model: BaseChatModel | None = None, model_retry: RetryPolicy | None = None,
                           tools: Sequence[AnyTool] | None = None, response_format: Any = None,
                           middleware: Sequence[Any] = (), name: str = "plan_solve") -> PlanSolveGraph:
    """Compile the Plan-and-Solve agent. `model` overrides `Context.model`; `Context.replan` turns replanning on;
    `model_retry` is the nodes' policy for transient model errors (default: `model_retry_policy()`). The tools:
    a `gateway`, or `tools=[...]` as LangChain's `create_agent` takes them (`tools.gateway_for`).
    `response_format`: the answer also as `state["structured_response"]`, as in `build_react_graph`.
    `middleware`: LangChain agent middleware; the agent's model request is each step's (graph/middleware.py)."""
    response = response_format_of(response_format)
    hooks = AgentHooks(middleware, agent_request="step")
    services = AgentServices(hooks.add_tools(gateway_for(gateway, tools)), model, model_retry,
                             model_wraps=hooks.model_wraps, tool_wraps=hooks.tool_wraps)
    retry = services.retry
    state = hooks.state(state_schema(PlanSolveState, response))
    builder: StateGraph[Any, Context, Any, Any] = StateGraph(state, context_schema=Context,
                                                             input_schema=hooks.input(InputState))
    reads_state = hooks.reads_state(services.gateway)
    step = hooks.entry("before_model") or "execute_step"  # each step request is the agent's model request
    to_tools = partial(_to_tools, step=step, approval=approval_check(services), reads_state=reads_state)
    tool_paths = ["act", "approve", step, "replan", "solve", *(["observe"] if hooks else [])]
    jumps = Jumps(model=step, tools=to_tools, tools_paths=tuple(tool_paths), end="solve")
    next_step: dict[Hashable, str] = {"execute_step": step, "solve": "solve"}

    # the nodes before a route run it themselves, as ReAct's do (graph/react.py, nodes/driver.py `add_routed_node`)
    builder.add_node("load_memory", make_load_memory(services, plan_solve_turn), retry_policy=retry)
    add_routed_node(builder, "plan", make_plan(services), routing.next_step, next_step, retry_policy=retry)
    if hooks.entry("after_model"):  # its hooks run between the step and its route: the last hook's edge routes
        builder.add_node("execute_step", make_execute_step(services), retry_policy=retry)
    else:
        add_routed_node(builder, "execute_step", make_execute_step(services), to_tools, tool_paths, retry_policy=retry)
    builder.add_node("approve", make_approve(services))  # no retry: it only asks
    # what a tool that returns a Command may set in this state, and where its goto may lead (tool_commands.py)
    commands = CommandRules.of(builder.channels, PLAN_SOLVE_GOTO)
    builder.add_node("act", make_act(services, commands))  # the gateway retries tool calls itself
    add_routed_node(builder, "observe", observe_step, routing.after_observe, {**next_step, "replan": "replan"},
                    input_schema=PlanSolveState)
    add_routed_node(builder, "replan", make_replan(services), routing.next_step, next_step, retry_policy=retry)
    builder.add_node("solve", make_solve(services), retry_policy=retry)
    builder.add_node("save_memory", save_memory)

    builder.add_edge(START, "load_memory")
    builder.add_edge("load_memory", hooks.chain(builder, "before_agent", "plan", [], jumps) or "plan")
    hooks.chain(builder, "before_model", "execute_step", [], jumps)
    if after_model := hooks.chain(builder, "after_model", to_tools, tool_paths, jumps):
        builder.add_edge("execute_step", after_model)
    builder.add_conditional_edges("approve", edge(partial(after_approve, reads_state=reads_state)), ["act", "observe"])
    builder.add_edge("act", "observe")
    closing = "solve"
    if response is not None:
        builder.add_edge(closing, closing := add_respond(builder, services, response))
    builder.add_edge(closing, hooks.chain(builder, "after_agent", "save_memory", [], jumps) or "save_memory")
    builder.add_edge("save_memory", END)
    return builder.compile(checkpointer=checkpointer, store=store, name=name)


def _to_tools(state: Any, runtime: Any, *, step: str, **route: Any) -> Any:
    """After a step's reply: its tool round, or onwards; its next round starts at the step's before_model hooks."""
    target = routing.after_execute(state, runtime, **route)
    return step if target == "execute_step" else target
