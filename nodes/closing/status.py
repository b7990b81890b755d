"""A run's status, defined once, and the one function every graph's closing node picks it with."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from reactgraph.models.offline.coverage import coverage_args
from reactgraph.nodes.prompting.framing import summary_section, with_notes
from reactgraph.nodes.state.fields import has_failed, messages_of, stop_reason_of, summary_of, verdict_of
from reactgraph.nodes.state.records import CloseReason, CoverageJudge, CoverageRecord, RunStatus

RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
# The statuses a caller may rely on as an answer (CLI exit code 0); every other one is a failure to answer.
SUCCESS_STATUSES: frozenset[str] = frozenset({"answered", "partial"})
# Why a loop stopped early → the status it ends with (`stop_reason` "budget" is set by the budget checks).
_STOPPED: dict[str, RunStatus] = {"budget": "budget_exhausted", "limit": "limit_reached",
                                  "repeated": "limit_reached", "format": "limit_reached"}
_MISSING_MARKERS = ("还缺少", "missing:", "无法由离线脚本模型回答", "cannot be answered by the scripted",
                    "无法离线回答", "cannot answer this offline")


@dataclass(frozen=True)
class Coverage:
    """The parts of the question and those the observations (or the model's own knowledge) leave unanswered."""

    parts: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    by: CoverageJudge = "rules"  # model (the reflection verdict or the plan said) | rules (the scripted decomposition)

    def record(self) -> CoverageRecord:
        """The check as the state holds it (the `coverage` field)."""
        return CoverageRecord(parts=self.parts, missing=self.missing, by=self.by)


def coverage_of(state: Mapping[str, Any], *, scripted: bool) -> Coverage:
    """The model's own account (the latest verdict's `parts`/`missing`), else the rules' over the observations.

    The rules count a part missing when its tools were tried and found nothing; for the scripted model, which
    knows nothing beyond its tools, also when it was never looked up."""
    verdict = verdict_of(state)
    parts = [str(p) for p in (verdict["parts"] if verdict else []) if str(p).strip()]
    if verdict and parts:
        missing = [str(m) for m in verdict["missing"] if str(m).strip()]
        return Coverage(parts, missing, "model")
    # the messages as the model read them: facts folded into the running summary count as remembered
    messages = with_notes(messages_of(state), summary_section(summary_of(state)))
    rule_parts, rule_missing = coverage_args(messages, untried_missing=scripted)
    return Coverage(rule_parts, rule_missing, "rules")


def pick_status(state: Mapping[str, Any], reason: CloseReason, coverage: Coverage) -> RunStatus:
    """The turn's status: a failure, then an early stop (budget, limit, repeat), then how much was answered."""
    if has_failed(state) or reason == "failure":
        return "failed"
    stopped = _STOPPED.get(stop_reason_of(state) or "") or _STOPPED.get(reason)
    if stopped is not None:
        return stopped
    if coverage.parts and coverage.missing:
        return "no_answer" if set(coverage.parts) <= set(coverage.missing) else "partial"
    return "answered"


def naming_missing(answer: str, status: str, missing: Sequence[str], lang_zh: bool) -> str:
    """The answer, with a line naming the missing parts unless it already says what is missing."""
    if status not in ("partial", "no_answer") or not missing:
        return answer
    lowered = answer.lower()
    if any(marker in lowered for marker in _MISSING_MARKERS):
        return answer
    line = ("还缺少：" + "；".join(missing) + "。") if lang_zh else ("Missing: " + "; ".join(missing) + ".")
    return f"{answer}\n{line}" if answer else line
