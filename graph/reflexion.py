"""The Reflexion graph: load_lessons → trial (the ReAct graph) → evaluate → self_reflect → trial … (≤ max_trials).

A failed trial leaves a lesson in the long-term store (namespace ("lessons", session)) and in the next
trial's think prompt. `iteration` and `steps` add up over the trials; `final_answer` and `status` are the
last trial's; `evaluation` says whether it passed and why.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import RetryPolicy

from reactgraph.graph.middleware import AgentHooks
from reactgraph.graph.react import build_react_graph
from reactgraph.graph.routing import reflexion as routing
from reactgraph.graph.structured import ResponseFormat, add_respond, response_format_of, state_schema
from reactgraph.nodes.context import Context
from reactgraph.nodes.driver import AgentServices, edge
from reactgraph.nodes.reflexion import (
    ReflexionInput,
    ReflexionState,
    load_lessons,
    make_evaluate,
    make_self_reflect,
    make_trial,
)
from reactgraph.tools import ToolGateway, gateway_for
from reactgraph.tools.meta import AnyTool

# The compiled graph's types: state, context, input, output.
ReflexionGraph = CompiledStateGraph[ReflexionState, Context, ReflexionInput, ReflexionState]


def build_reflexion_graph(gateway: ToolGateway | Sequence[AnyTool] | None = None,
                          checkpointer: BaseCheckpointSaver | None = None, store: BaseStore | None = None, *,
                          model: BaseChatModel | None = None, max_trials: int = 3,
                          model_retry: RetryPolicy | None = None, tools: Sequence[AnyTool] | None = None,
                          response_format: Any = None, middleware: Sequence[Any] = (),
                          name: str = "reflexion") -> ReflexionGraph:
    """Compile the Reflexion agent: at most `max_trials` ReAct attempts, each failed one followed by a lesson.
    `model_retry` is the nodes' policy for transient model errors (default: `model_retry_policy()`). The tools:
    a `gateway`, or `tools=[...]` as LangChain's `create_agent` takes them (`tools.gateway_for`).
    `response_format`: the last trial's answer also as `state["structured_response"]` (one call, after the
    last trial), as in `build_react_graph`. `middleware`: LangChain agent middleware, run by each trial's ReAct
    actor (each trial is one agent run: `before_agent`/`after_agent` once per trial); the middleware's state
    fields are handed to each trial and taken back (graph/middleware.py)."""
    response = response_format_of(response_format)
    if not isinstance(max_trials, int) or max_trials < 1:
        raise ValueError(f"max_trials must be an integer >= 1, not {max_trials!r}")
    services = AgentServices(gateway_for(gateway, tools), model, model_retry)
    # Compiled without checkpointer or store: run inside `trial`, it uses this graph's, on the same thread.
    actor = build_react_graph(services.gateway, model=model, model_retry=services.retry, middleware=middleware,
                              name="actor")
    hooks = AgentHooks(middleware)
    state = hooks.state(state_schema(ReflexionState, response))
    builder: StateGraph[Any, Context, Any, Any] = StateGraph(state, context_schema=Context,
                                                             input_schema=hooks.input(ReflexionInput))
    builder.add_node("load_lessons", load_lessons)
    # No retry of its own: the actor's nodes retry their calls.
    builder.add_node("trial", make_trial(actor, hooks.fields(ReflexionState)))
    builder.add_node("evaluate", make_evaluate(services), retry_policy=services.retry)
    builder.add_node("self_reflect", make_self_reflect(services), retry_policy=services.retry)

    builder.add_edge(START, "load_lessons")
    builder.add_edge("load_lessons", "trial")
    ends = _ends(builder, services, response)
    builder.add_conditional_edges("trial", edge(routing.after_trial), ends("evaluate"))
    builder.add_conditional_edges("evaluate", edge(routing.after_evaluate), ends("self_reflect"))
    builder.add_conditional_edges("self_reflect", edge(partial(routing.after_self_reflect, max_trials=max_trials)),
                                  ends("trial"))
    return builder.compile(checkpointer=checkpointer, store=store, name=name)


def _ends(builder: StateGraph[Any, Any, Any, Any], services: AgentServices,
          response: ResponseFormat | None) -> Callable[[str], list[str] | dict[Hashable, str]]:
    """The path map of a router that goes on to `target` or ends the run: at END, or, with a response format,
    at the respond node (which then ends it)."""
    if response is None:
        return lambda target: [target, END]
    respond = add_respond(builder, services, response)
    builder.add_edge(respond, END)
    return lambda target: dict[Hashable, str]({target: target, END: respond})
