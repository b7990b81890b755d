"""The Plan-and-Solve graph: load_memory → plan → execute_step ⇄ act → observe … [replan] … → solve → save_memory.

`iteration` counts plan steps begun (each may take up to STEP_TOOL_ROUNDS tool rounds), so
`Context.max_iterations` bounds the steps carried out, as it bounds ReAct's think→act rounds. Tool calls go
through the same gateway, `act` and `observe` as ReAct and leave the same `ExecutionStep` records.
"""

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

from reactgraph.graph.routing import plan_solve as routing
from reactgraph.graph.routing.tool_round import after_approve
from reactgraph.graph.structured import add_respond, response_format_of, state_schema
from reactgraph.nodes.approval import approval_check, make_approve
from reactgraph.nodes.context import Context
from reactgraph.nodes.driver import AgentServices, edge
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
                           name: str = "plan_solve") -> PlanSolveGraph:
    """Compile the Plan-and-Solve agent. `model` overrides `Context.model`; `Context.replan` turns replanning on;
    `model_retry` is the nodes' policy for transient model errors (default: `model_retry_policy()`). The tools:
    a `gateway`, or `tools=[...]` as LangChain's `create_agent` takes them (`tools.gateway_for`).
    `response_format`: the answer also as `state["structured_response"]`, as in `build_react_graph`."""
    response = response_format_of(response_format)
    services = AgentServices(gateway_for(gateway, tools), model, model_retry)
    retry = services.retry
    builder = StateGraph(state_schema(PlanSolveState, response), context_schema=Context, input_schema=InputState)
    builder.add_node("load_memory", make_load_memory(services, plan_solve_turn), retry_policy=retry)
    builder.add_node("plan", make_plan(services), retry_policy=retry)
    builder.add_node("execute_step", make_execute_step(services), retry_policy=retry)
    builder.add_node("approve", make_approve(services))  # no retry: it only asks
    # what a tool that returns a Command may set in this state, and where its goto may lead (tool_commands.py)
    commands = CommandRules.of(builder.channels, PLAN_SOLVE_GOTO)
    builder.add_node("act", make_act(services, commands))  # the gateway retries tool calls itself
    builder.add_node("observe", observe_step)
    builder.add_node("replan", make_replan(services), retry_policy=retry)
    builder.add_node("solve", make_solve(services), retry_policy=retry)
    builder.add_node("save_memory", save_memory)

    builder.add_edge(START, "load_memory")
    builder.add_edge("load_memory", "plan")
    builder.add_conditional_edges("plan", edge(routing.next_step), ["execute_step", "solve"])
    builder.add_conditional_edges("execute_step",
                                  edge(partial(routing.after_execute, approval=approval_check(services),
                                                       reads_state=services.gateway.reads_state)),
                                  ["act", "approve", "execute_step", "replan", "solve"])
    builder.add_conditional_edges("approve", edge(partial(after_approve, reads_state=services.gateway.reads_state)),
                                  ["act", "observe"])
    builder.add_edge("act", "observe")
    builder.add_conditional_edges("observe", edge(routing.after_observe), ["execute_step", "replan", "solve"])
    builder.add_conditional_edges("replan", edge(routing.next_step), ["execute_step", "solve"])
    closing = "solve"
    if response is not None:
        builder.add_edge(closing, closing := add_respond(builder, services, response))
    builder.add_edge(closing, "save_memory")
    builder.add_edge("save_memory", END)
    return builder.compile(checkpointer=checkpointer, store=store, name=name)
