"""react-graph: ReAct, Plan-and-Solve and Reflexion agents as explicit LangGraph state machines.

The namespace holds the layers of the project (imports go downward only):

    reactgraph.graph    graph wiring, routing, sessions, Studio entry; reactgraph.graph.cli is the top layer
    reactgraph.evals    task suites, runner, fault injection, reports (on reactgraph.graph's public API)
    reactgraph.nodes    node functions by paradigm (react, plan_solve, reflexion) and what they share
    reactgraph.models   the model loader and the scripted offline model
    reactgraph.tools    the tool gateway, its policies and the built-in tools
    reactgraph.memory   Redis checkpointer and store, embedded Redis, session memory, vector store

Attributes are imported on first use, so `import reactgraph` (and the CLI's start-up) stays cheap; even
`__version__`, whose metadata lookup (about 20 ms) `reactgraph --help` does not need.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reactgraph._version import __version__
    from reactgraph.graph import (
        AgentState,
        Context,
        ExecutionStep,
        build_plan_solve_graph,
        build_react_graph,
        build_reflexion_graph,
    )
    from reactgraph.tools import ToolGateway, ToolMeta, default_gateway

_LAZY = {
    "__version__": "reactgraph._version",
    "AgentState": "reactgraph.graph", "Context": "reactgraph.graph", "ExecutionStep": "reactgraph.graph",
    "build_plan_solve_graph": "reactgraph.graph", "build_react_graph": "reactgraph.graph",
    "build_reflexion_graph": "reactgraph.graph",
    "ToolGateway": "reactgraph.tools", "ToolMeta": "reactgraph.tools", "default_gateway": "reactgraph.tools",
}

__all__ = [*_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'reactgraph' has no attribute {name!r}")
