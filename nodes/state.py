"""The agent's state in one place: `AgentState`, its records and words, the reflection verdict, the start of
a turn, and each optional field read with its default.

`AgentState` holds the conversation, the typed step records (`ExecutionStep`) and the loop's bookkeeping; its
records (usage, budget, coverage, approvals, the fallback model) are TypedDicts, so at run time they are plain
dicts of str, int, float, bool and lists: the checkpoint serialisers (JSON, msgpack; the Redis saver's
allow-list) store and load them unchanged, and checkpoints written before these types existed read back as the
same records. The words its fields take (statuses, stop and close reasons, budget kinds) are Literals here. The
reflection verdict is a structured self-check after every round of tool calls: `ReflectionVerdict` is what the
model fills in (structured output), `Verdict` the same verdict as the state holds it (the `reflection` field).

Every field but `messages` may be absent (a new thread, a caller's bare input, a checkpoint from an older version)
or None (a turn's reset). Nodes and routers read them through the `…_of` functions at the end instead of each
writing its own `state.get(key, default)`; they take any mapping (`AgentState`, `PlanSolveState`,
`ReflexionState`, a subgraph's result). Plan-and-Solve's and Reflexion's own fields have theirs beside their
states (nodes/plan_solve_state.py, nodes/reflexion.py).
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, NotRequired, cast

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from langgraph.types import Overwrite
from pydantic import BaseModel, Field, JsonValue
from typing_extensions import TypedDict

from reactgraph.models.gateway import Usage, add_usage
from reactgraph.nodes.conversation import current_question

# --- the records a checkpoint holds, and the words its fields take ----------------------------------------------------

# How a turn ended (the `status` field; nodes/closing.py picks it).
RunStatus = Literal["answered", "partial", "no_answer", "limit_reached", "budget_exhausted", "failed"]
# Why a loop stopped early (the `stop_reason` field; the budget checks set "budget", a text-protocol reply past the
# format-error budget "format"); each maps to a status.
StopReason = Literal["budget", "limit", "repeated", "format"]
# Why a closing node wrote the answer now: an early stop, the loop's or plan's own end, the model's own answer,
# or a failed run. ReAct's finalize words its six in its prompt (`prompts.FINALIZE_REASONS`), Plan-and-Solve's
# solve "budget", "limit", "done", "empty", "format" and "tool" (`prompts.SOLVE_REASONS`); "tool": a tool's Command
# named the closing node as the next (nodes/tool_commands.py).
FinalizeReason = Literal["budget", "limit", "repeated", "enough", "format", "tool"]
SolveReason = Literal["budget", "limit", "done", "empty", "format", "tool"]
CloseReason = Literal[FinalizeReason, SolveReason, "model answered", "failure"]
# Which budget ran out.
BudgetKind = Literal["max_tool_calls", "max_model_tokens", "max_cost_usd", "max_model_seconds"]
# Who gave the coverage account: the model (its reflection verdict, its plan, or the closing self-check), or
# nobody ("unchecked": the check was off, or the model's check failed or could not be read).
CoverageJudge = Literal["model", "unchecked"]


class Budget(TypedDict):
    """The budget that ran out: which one, its limit, and how much was used."""

    kind: BudgetKind
    limit: float
    used: float


class CoverageRecord(TypedDict):
    """The closing step's check (the `coverage` field): the question's parts, those left unanswered, who said so."""

    parts: list[str]
    missing: list[str]
    by: CoverageJudge


class Approvals(TypedDict):
    """The approval step's outcome for the reply it decided on (the `approvals` field; nodes/approval.py):
    the calls let through, and what a person changed in each edited call."""

    message_id: str | None  # the reply's id: the outcome holds for that reply only
    approved: list[str]  # call ids
    notes: dict[str, str]  # call id → what a person changed


class ActiveModel(TypedDict):
    """The fallback model a turn switched to (the `active_model` field): its spec and the turn's question id."""

    model: str
    question: str | None



# --- the reflection verdict -------------------------------------------------------------------------------------------

class Verdict(TypedDict):
    """The reflection verdict as the state holds it; the fields of `ReflectionVerdict`."""

    enough_information: bool
    tool_error: bool
    need_other_tool: bool
    repeated_call: bool
    note: str
    parts: list[str]
    missing: list[str]


class ReflectionVerdict(BaseModel):
    """Self-check after observing tool results; decides whether the loop should go on."""

    enough_information: bool = Field(
        description="True if the observations so far are sufficient to answer the question.")
    tool_error: bool = Field(description="True if the latest tool call(s) failed or returned an error.")
    need_other_tool: bool = Field(
        description="True if a different tool (or different arguments) is needed to make progress.")
    repeated_call: bool = Field(
        description="True if the latest call repeats an earlier one (same tool, same arguments) "
                    "without yielding new information.")
    note: str = Field(default="", description="One or two sentences of advice for the next step.")
    parts: list[str] = Field(default_factory=list, description=(
        "Every distinct thing the question asks for, one short phrase each (a compound question has several)."))
    missing: list[str] = Field(default_factory=list, description=(
        "The parts (copied from `parts`) that the observations so far do not answer."))

    def record(self) -> Verdict:
        """The verdict as the state holds it."""
        return cast(Verdict, self.model_dump())


# The check's lists as its schema bounds them: a server that constrains the reply to the schema (llama.cpp's grammar,
# OpenAI's strict mode) then closes the object within the reply's tokens, where a small model would otherwise
# repeat one phrase until it is cut off and the check could not be read. Only the schema says it: a longer reply
# (from a server that does not apply the schema) is still read, and cut to the account's bounds (nodes/closing.py).
CHECK_LIST_BOUNDS: dict[str, JsonValue] = {"maxItems": 5, "items": {"type": "string", "pattern": "^.{1,40}$"}}


class ClosingCheck(BaseModel):
    """Closing self-check: the question's parts, and those the final answer leaves unanswered."""

    parts: list[str] = Field(json_schema_extra=CHECK_LIST_BOUNDS, description=(
        "Every distinct thing the question asks for, one short phrase each (a compound question has several)."))
    missing: list[str] = Field(default_factory=list, json_schema_extra=CHECK_LIST_BOUNDS, description=(
        "The parts (copied from `parts`) that the final answer does not answer from the observations or from "
        "what the user said."))


def parts_verdict(*, parts: list[str] | None = None, missing: list[str] | None = None) -> Verdict:
    """A verdict that only names the question's parts (e.g. the plan's account of them); every flag False."""
    return Verdict(enough_information=False, tool_error=False, need_other_tool=False, repeated_call=False,
                   note="", parts=list(parts or []), missing=list(missing or []))


def as_verdict(raw: Mapping[str, Any] | None) -> Verdict | None:
    """A stored verdict as the record, a field it lacks (a checkpoint from an older version) at its default."""
    if raw is None:
        return None
    return cast(Verdict, {**parts_verdict(), **{key: value for key, value in raw.items() if value is not None}})



# --- the agent state and the turn -------------------------------------------------------------------------------------

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
    # The latest reflection verdict (`Verdict`, above); None when reflection is off or none yet this turn.
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
    # What this turn has used (tool calls, model tokens, cost), added up per node; see nodes/budget.py.
    usage: NotRequired[Annotated[Usage, add_usage]]
    # Which budget ran out when `stop_reason` is "budget".
    budget: NotRequired[Budget | None]
    # The approval step's outcome for the reply it decided on; see nodes/approval.py.
    approvals: NotRequired[Approvals | None]
    # The answer in the graph's `response_format` (nodes/closing.py): the pydantic or dataclass instance,
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



# --- each optional field, read with its default -----------------------------------------------------------------------

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
