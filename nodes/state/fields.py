"""Reading the agent state: each optional field's default, in one place.

Every `AgentState` field but `messages` may be absent (a new thread, a caller's bare input, a checkpoint from an
older version) or None (a turn's reset). Nodes and routers read them through these functions instead of each
writing its own `state.get(key, default)`. They take any mapping (`AgentState`, `PlanSolveState`,
`ReflexionState`, a subgraph's result); Plan-and-Solve's and Reflexion's own fields have theirs beside their
states (nodes/plan_solve/state.py, nodes/reflexion/state.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from langchain_core.messages import AnyMessage

from reactgraph.models.gateway import Usage
from reactgraph.nodes.state.agent import ExecutionStep
from reactgraph.nodes.state.records import Approvals, RunStatus, StopReason
from reactgraph.nodes.state.verdict import Verdict, as_verdict

State = Mapping[str, Any]


def messages_of(state: State) -> Sequence[AnyMessage]:
    return state.get("messages") or []


def iteration_of(state: State) -> int:
    """The loop iteration under way (0 before the first think of a turn)."""
    return state.get("iteration") or 0


def steps_of(state: State) -> list[ExecutionStep]:
    """The turn's step records (`ExecutionStep`s), oldest first."""
    return state.get("steps") or []


def usage_of(state: State) -> Usage:
    """What the turn has used so far (nothing yet: an empty `Usage`)."""
    return state.get("usage") or Usage()


def verdict_of(state: State) -> Verdict | None:
    """The latest reflection verdict, or None (reflection off, or none yet this turn)."""
    return as_verdict(state.get("reflection"))


def approvals_of(state: State) -> Approvals | None:
    """The approval step's latest outcome, or None (nothing was asked this turn)."""
    return state.get("approvals") or None


def status_of(state: State) -> RunStatus | None:
    """The turn's status once settled (or failed); None while the turn runs."""
    return cast("RunStatus | None", state.get("status") or None)


def has_failed(state: State) -> bool:
    """The turn failed (a model that did not answer, a broken tool round): it ends without another call."""
    return status_of(state) == "failed"


def stop_reason_of(state: State) -> StopReason | None:
    """Why the loop stopped early, when a check stopped it (the budget checks set "budget")."""
    return cast("StopReason | None", state.get("stop_reason") or None)


def budget_stopped(state: State) -> bool:
    """A budget ran out and stopped the loop (`stop_reason` "budget")."""
    return stop_reason_of(state) == "budget"


def final_answer_of(state: State) -> str:
    """The turn's answer so far ("" before one is settled)."""
    return state.get("final_answer") or ""


def turn_id_of(state: State) -> str | None:
    """The id of the human message that opened the current turn."""
    return state.get("turn_id")


def summary_of(state: State) -> str:
    """The running summary of the messages folded out of the window ("" before any was folded)."""
    return state.get("summary") or ""


def lessons_of(state: State) -> list[str]:
    """Reflexion's lessons shown in think's system prompt (a fresh list: callers may extend it)."""
    return list(state.get("lessons") or [])
