"""react-graph: ReAct, Plan-and-Solve and Reflexion agents as explicit LangGraph state machines.

The namespace holds the layers of the project (imports go downward only):

    reactgraph.cli      the application shell: the `reactgraph` command line,
    reactgraph.service  the HTTP service (Agent Server API and workers),
    reactgraph.studio   and the LangGraph Studio launcher
    reactgraph.graph    graph wiring, routing, sessions, tracing, the graphs langgraph.json exports
    reactgraph.evals    task suites, runner, fault injection, reports (on reactgraph.graph's public API)
    reactgraph.nodes    node functions by paradigm (react, plan_solve, reflexion) and what they share
    reactgraph.models   the model loader and the scripted offline model
    reactgraph.tools    the tool gateway, its policies and the built-in tools
    reactgraph.memory   Redis checkpointer and store, embedded Redis, session memory, vector store

Attributes are imported on first use, so `import reactgraph` (and the CLI's start-up) stays cheap; even
`__version__`, whose metadata lookup (about 20 ms) `reactgraph --help` does not need.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from reactgraph._lazy import lazy_attributes

# In a source checkout the layers are the repository's top-level folders (graph/, nodes/, …) beside this one;
# installed, they sit inside it. Looking in the parent too makes a checkout importable as it is (and keeps
# this folder from hiding the installed subpackages when Python runs from the repository root).
_HERE = Path(__file__).resolve().parent
if not (_HERE / "graph").is_dir() and (_HERE.parent / "graph" / "react.py").is_file():
    __path__.append(str(_HERE.parent))

if TYPE_CHECKING:
    from reactgraph._version import __version__
    from reactgraph.errors import ReactGraphError
    from reactgraph.graph import (
        AgentState,
        Context,
        ExecutionStep,
        build_plan_solve_graph,
        build_react_graph,
        build_reflexion_graph,
        create_agent,
    )
    from reactgraph.tools import ToolGateway, ToolMeta, default_gateway

_EXPORTS = {
    "__version__": "reactgraph._version",
    "ReactGraphError": "reactgraph.errors",
    "AgentState": "reactgraph.graph", "Context": "reactgraph.graph", "ExecutionStep": "reactgraph.graph",
    "build_plan_solve_graph": "reactgraph.graph", "build_react_graph": "reactgraph.graph",
    "build_reflexion_graph": "reactgraph.graph", "create_agent": "reactgraph.graph",
    "ToolGateway": "reactgraph.tools", "ToolMeta": "reactgraph.tools", "default_gateway": "reactgraph.tools",
}

__all__ = [*_EXPORTS]
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
