"""Public API: compiled graphs, their runtime configuration, and sessions (ids, one turn at a time)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reactgraph._lazy import lazy_attributes

if TYPE_CHECKING:
    from reactgraph.graph.create_agent import create_agent
    from reactgraph.graph.plan_solve import build_plan_solve_graph
    from reactgraph.graph.react import build_react_graph
    from reactgraph.graph.reflexion import build_reflexion_graph
    from reactgraph.memory.session_id import MAX_SESSION_ID, InvalidSessionId, check_session_id
    from reactgraph.memory.session_lease import (
        SessionBusy,
        SessionLease,
        SessionLeaseLost,
        asession_lease,
        session_lease,
    )
    from reactgraph.models.gateway import model_retry_policy
    from reactgraph.models.loader import ModelConfigError, is_transient_model_error, load_chat_model, parse_spec, redact
    from reactgraph.models.prices import register_price
    from reactgraph.nodes.context import Context
    from reactgraph.nodes.reflexion import register_checker
    from reactgraph.nodes.state import AgentState, ExecutionStep

_EXPORTS = {
    "create_agent": "reactgraph.graph.create_agent",
    "build_plan_solve_graph": "reactgraph.graph.plan_solve",
    "build_react_graph": "reactgraph.graph.react",
    "build_reflexion_graph": "reactgraph.graph.reflexion",
    "Context": "reactgraph.nodes.context",
    "register_checker": "reactgraph.nodes.reflexion",
    "ModelConfigError": "reactgraph.models.loader",
    "load_chat_model": "reactgraph.models.loader",
    "parse_spec": "reactgraph.models.loader",
    "redact": "reactgraph.models.loader",
    "is_transient_model_error": "reactgraph.models.loader",
    "model_retry_policy": "reactgraph.models.gateway",
    "register_price": "reactgraph.models.prices",
    "AgentState": "reactgraph.nodes.state",
    "check_session_id": "reactgraph.memory.session_id",
    "InvalidSessionId": "reactgraph.memory.session_id",
    "MAX_SESSION_ID": "reactgraph.memory.session_id",
    "session_lease": "reactgraph.memory.session_lease",
    "asession_lease": "reactgraph.memory.session_lease",
    "SessionBusy": "reactgraph.memory.session_lease",
    "SessionLease": "reactgraph.memory.session_lease",
    "SessionLeaseLost": "reactgraph.memory.session_lease",
    "ExecutionStep": "reactgraph.nodes.state",
}
__all__ = [*_EXPORTS, "GRAPH_BUILDERS", "GRAPH_METADATA", "graph_builder", "session_graph"]
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)

# The paradigms by the name each builder gives its compiled graph (and a session's checkpoints record): what
# `reactgraph ask --graph` offers, and how `history`, `trace` and a resumed turn rebuild a session's graph.
GRAPH_METADATA = "graph"  # the checkpoint metadata key naming the graph that wrote it (graph/sessions.py's run)
GRAPH_BUILDERS = {"react": "build_react_graph", "plan_solve": "build_plan_solve_graph",
                  "reflexion": "build_reflexion_graph"}


def graph_builder(name: str) -> Any:
    """The builder of the graph called `name`; ValueError in one line naming the known ones."""
    if name not in GRAPH_BUILDERS:
        raise ValueError(f"unknown graph {name!r}: choose from {', '.join(GRAPH_BUILDERS)}")
    return __getattr__(GRAPH_BUILDERS[name])


def session_graph(saver: Any, session: str) -> str | None:
    """The name of the graph that ran the session's newest checkpoint (`GRAPH_METADATA`); "react" for a session
    written before graphs were recorded; None for a new session, one whose newest checkpoint cannot be read (the
    turn's own reading then says why), or one that names no graph of `GRAPH_BUILDERS`."""
    try:
        newest = saver.get_tuple({"configurable": {"thread_id": session, "checkpoint_ns": ""}})
    except Exception:  # noqa: BLE001 - a damaged checkpoint is reported where the turn reads it, with a hint
        return None
    if newest is None:
        return None
    name = (newest.metadata or {}).get(GRAPH_METADATA, "react")
    return name if isinstance(name, str) and name in GRAPH_BUILDERS else None  # Redis content: only a known name
