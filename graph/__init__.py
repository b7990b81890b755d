"""Public API: compiled graphs, their runtime configuration, and sessions (ids, one turn at a time)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reactgraph._lazy import lazy_attributes

if TYPE_CHECKING:
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
    from reactgraph.models.gateway import model_retry_policy, register_price
    from reactgraph.models.loader import ModelConfigError, is_transient_model_error, load_chat_model, parse_spec, redact
    from reactgraph.nodes.context import Context
    from reactgraph.nodes.reflexion import register_checker
    from reactgraph.nodes.state import AgentState, ExecutionStep

_EXPORTS = {
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
    "register_price": "reactgraph.models.gateway",
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
__all__ = [*_EXPORTS]
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
