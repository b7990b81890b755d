"""The state's vocabulary: the records a checkpoint holds and the words (statuses, reasons) its fields take.

Records are TypedDicts, so at run time they are plain dicts of str, int, float, bool and lists: the checkpoint
serialisers (JSON, msgpack; the Redis saver's allow-list) store and load them unchanged, and checkpoints
written before these types existed read back as the same records.
"""

from __future__ import annotations

from typing import Literal

from typing_extensions import TypedDict

# How a turn ended (the `status` field; nodes/closing/status.py picks it).
RunStatus = Literal["answered", "partial", "no_answer", "limit_reached", "budget_exhausted", "failed"]
# Why a loop stopped early (the `stop_reason` field; the budget checks set "budget", a text-protocol reply past the
# format-error budget "format"); each maps to a status.
StopReason = Literal["budget", "limit", "repeated", "format"]
# Why a closing node wrote the answer now: an early stop, the loop's or plan's own end, the model's own answer,
# or a failed run. ReAct's finalize words its five in its prompt (`prompts.FINALIZE_REASONS`), Plan-and-Solve's
# solve "budget", "limit", "done", "empty" and "format" (`prompts.SOLVE_REASONS`).
FinalizeReason = Literal["budget", "limit", "repeated", "enough", "format"]
SolveReason = Literal["budget", "limit", "done", "empty", "format"]
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
    """The approval step's outcome for the reply it decided on (the `approvals` field; nodes/tool_round/approve.py):
    the calls let through, and what a person changed in each edited call."""

    message_id: str | None  # the reply's id: the outcome holds for that reply only
    approved: list[str]  # call ids
    notes: dict[str, str]  # call id → what a person changed


class ActiveModel(TypedDict):
    """The fallback model a turn switched to (the `active_model` field): its spec and the turn's question id."""

    model: str
    question: str | None
