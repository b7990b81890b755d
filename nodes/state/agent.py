"""The agent's state: the conversation, the typed step records and the loop's bookkeeping.

Its records and words are in records.py and verdict.py; reading a field with its default is in fields.py."""

from __future__ import annotations

import copy
import operator
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, NotRequired

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from langgraph.types import Overwrite

# typing_extensions' TypedDict: pydantic (Studio's schemas, the API server) rejects typing's on Python < 3.12.
from typing_extensions import TypedDict

from reactgraph.models.gateway import Usage, add_usage
from reactgraph.nodes.conversation import current_question
from reactgraph.nodes.state.records import ActiveModel, Approvals, Budget, CoverageRecord, RunStatus, StopReason
from reactgraph.nodes.state.verdict import Verdict


class ExecutionStep(TypedDict):
    """One record of what the agent did; the single source for logs, CLI output, notebooks and evals.

    Plain dicts (not classes) so they checkpoint, serialise to JSON and compare in tests unchanged.
    """

    step: int  # the loop iteration this record belongs to (1-based)
    node: str  # think | act | reflect | finalize | ...
    thought: str
    action: str | None  # tool name, or None for non-tool records
    action_input: dict[str, Any] | None
    observation: str
    status: str  # a ToolStatus value for tool records; answer | tool_calls | reflection | ...
    latency_ms: float
    tokens: int
    timestamp: str


def make_step(*, step: int, node: str, status: str, thought: str = "", action: str | None = None,
              action_input: dict[str, Any] | None = None, observation: str = "",
              latency_ms: float = 0.0, tokens: int = 0) -> ExecutionStep:
    """An `ExecutionStep` stamped with the current UTC time."""
    return ExecutionStep(
        step=step, node=node, thought=thought, action=action, action_input=action_input,
        observation=observation, status=status, latency_ms=round(latency_ms, 3), tokens=tokens,
        timestamp=datetime.now(UTC).isoformat(timespec="milliseconds"),
    )


class AgentState(TypedDict):
    """State of one session (thread). Per-turn fields are reset when a new question arrives."""

    messages: Annotated[list[AnyMessage], add_messages]
    # Running summary of the messages folded out of the window by load_memory.
    summary: NotRequired[str]
    # Id of the human message that opened the current turn; a different one means a new turn.
    turn_id: NotRequired[str | None]
    iteration: NotRequired[int]
    steps: NotRequired[Annotated[list[ExecutionStep], operator.add]]
    # The latest reflection verdict (nodes/state/verdict.py); None when reflection is off or none yet this turn.
    reflection: NotRequired[Verdict | None]
    final_answer: NotRequired[str | None]
    status: NotRequired[RunStatus | None]
    # Why a loop stopped early, when a check (the budgets) stopped it: "budget" ends the turn budget_exhausted.
    stop_reason: NotRequired[StopReason | None]
    # The closing step's check: the question's parts, those left unanswered, and who said so (model | rules).
    coverage: NotRequired[CoverageRecord | None]
    # Reflexion: lessons from earlier failed attempts at this question, shown in think's system prompt.
    # Supplied with the input (the Reflexion graph's trial passes them); kept until a caller replaces them.
    lessons: NotRequired[list[str]]
    # What this turn has used (tool calls, model tokens, cost), added up per node; see nodes/runtime/budget.py.
    usage: NotRequired[Annotated[Usage, add_usage]]
    # Which budget ran out when `stop_reason` is "budget".
    budget: NotRequired[Budget | None]
    # The approval step's outcome for the reply it decided on; see nodes/tool_round/approve.py.
    approvals: NotRequired[Approvals | None]
    # The answer in the graph's `response_format` (nodes/closing/respond.py): the pydantic or dataclass instance,
    # a dict for a TypedDict or JSON schema; None when it could not be had. Absent without a response format.
    structured_response: NotRequired[Any]
    # The fallback model (`Context.fallback_models`) that stands in for the failed model(s) of this turn:
    # {"model": its spec, "question": the id of the question it took over for} (models/gateway.py).
    active_model: NotRequired[ActiveModel | None]


class InputState(TypedDict):
    """What a caller passes in: new messages (usually one human question)."""

    messages: Annotated[list[AnyMessage], add_messages]
    lessons: NotRequired[list[str]]  # see AgentState.lessons


# AgentState's per-turn fields and their values when a question arrives; a graph's state adds its own
# (Plan-and-Solve's plan, Reflexion's trials). `begin_turn` in a graph's first node sets them, once per turn:
# every model call of the turn, the memory summary included, then adds to the same `usage`.
AGENT_TURN: Mapping[str, Any] = {
    "iteration": 0, "steps": [], "reflection": None, "final_answer": None, "status": None, "coverage": None,
    "structured_response": None, "usage": {}, "stop_reason": None, "budget": None}
# Channels with a reducer: a new turn replaces what the last one added up.
_REPLACED = frozenset({"steps", "usage"})


def begin_turn(state: Mapping[str, Any], fields: Mapping[str, Any] = AGENT_TURN) -> dict[str, Any]:
    """The update that starts the current question's turn: its id, and each per-turn field in `fields` afresh."""
    question = current_question(state.get("messages") or [])
    update: dict[str, Any] = {"turn_id": question.id if question is not None else None}
    for name, value in fields.items():
        fresh = copy.deepcopy(value)
        update[name] = Overwrite(fresh) if name in _REPLACED else fresh
    return update


def in_turn(state: Mapping[str, Any]) -> bool:
    """Whether the state's turn is the current question's (a run resumed or re-entered mid-turn)."""
    question = current_question(state.get("messages") or [])
    return question is not None and question.id is not None and question.id == state.get("turn_id")
