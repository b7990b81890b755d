"""A run's status, defined once, and the functions every graph's closing node picks it with.

The status comes from the run's evidence, the same for every model: a failure or an early stop first, then
what the closing reply shows (cut off at the output limit, no final answer in the protocol), then whether
anything the run tried worked, and last the model's own account of the question's parts (`Coverage`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from langchain_core.messages import BaseMessage

from reactgraph.nodes.state import (
    CloseReason,
    CoverageJudge,
    CoverageRecord,
    ExecutionStep,
    RunStatus,
    has_failed,
    steps_of,
    stop_reason_of,
    verdict_of,
)

RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
# The statuses a caller may rely on as an answer (CLI exit code 0); every other one is a failure to answer.
SUCCESS_STATUSES: frozenset[str] = frozenset({"answered", "partial"})
# Why a loop stopped early → the status it ends with (`stop_reason` "budget" is set by the budget checks).
_STOPPED: dict[str, RunStatus] = {"budget": "budget_exhausted", "limit": "limit_reached",
                                  "repeated": "limit_reached", "format": "limit_reached"}
# The line each evidence-settled ending adds to the answer (English, Chinese): what the status rests on.
_EVIDENCE_LINES: dict[str, tuple[str, str]] = {
    "truncated": ("(The answer was cut off at the model's output limit.)", "（回答在模型的输出上限处被截断。）"),
    "not_given": ("(The model gave no final answer.)", "（模型没有给出最终答案。）"),
    "tools_failed": ("(Every tool call failed: no tool result backs this answer.)",
                     "（所有工具调用都失败了：这个回答没有任何工具结果支持。）"),
    "steps_failed": ("(Every step of the plan failed.)", "（计划的每一步都失败了。）"),
}


@dataclass(frozen=True)
class Coverage:
    """The parts of the question and those the answer leaves unanswered, and who gave that account."""

    parts: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    by: CoverageJudge = "unchecked"  # model (its verdict, its plan, its closing self-check) | unchecked (none)

    def record(self) -> CoverageRecord:
        """The account as the state holds it (the `coverage` field)."""
        return CoverageRecord(parts=self.parts, missing=self.missing, by=self.by)


UNCHECKED = Coverage()


# A model's account is its output (untrusted): it reaches the state, every output and the answer's Missing line
# within these bounds.
MAX_PARTS = 20
MAX_PART_CHARS = 200


def _texts(items: Sequence[Any]) -> list[str]:
    texts = (" ".join(str(item).split()) for item in list(items)[:MAX_PARTS * 2])
    return [text if len(text) <= MAX_PART_CHARS else text[:MAX_PART_CHARS - 1] + "…" for text in texts if text][
        :MAX_PARTS]


def model_account(parts: Sequence[Any], missing: Sequence[Any]) -> Coverage:
    """The model's account (a verdict's or a self-check's `parts`/`missing`), blank entries dropped."""
    return Coverage(_texts(parts), _texts(missing), "model")


def verdict_coverage(state: Mapping[str, Any]) -> Coverage | None:
    """The account the latest verdict already gives (the model's reflection, or its plan); None without parts."""
    verdict = verdict_of(state)
    if verdict is None or not _texts(verdict["parts"]):
        return None
    return model_account(verdict["parts"], verdict["missing"])


@dataclass(frozen=True)
class Evidence:
    """What the closing reply shows: a final answer given in the protocol, and whether it was cut off."""

    given: bool = True
    truncated: bool = False


def cut_off(reply: BaseMessage | None) -> bool:
    """The reply stopped at the output-token limit (OpenAI `finish_reason` "length", Anthropic `stop_reason`
    "max_tokens"), as the provider reported it."""
    metadata = getattr(reply, "response_metadata", None) or {}
    return metadata.get("finish_reason") == "length" or metadata.get("stop_reason") == "max_tokens"


def nothing_worked(steps: Sequence[ExecutionStep]) -> str | None:
    """Why nothing the run tried worked: every tool call failed ("tools_failed"; a call that found nothing did
    not fail, nor did one a person rejected or answered: that is a decision, not a failure), or every plan step
    ("steps_failed"); None when something worked or nothing was tried."""
    calls = [s for s in steps if s["node"] == "act" and s["status"] not in ("rejected", "responded")]
    if calls and all(s["status"] != "ok" for s in calls):
        return "tools_failed"
    plan_steps = [s for s in steps if s["node"] == "execute_step"]
    if plan_steps and all(s["status"] in ("failed", "model_error") for s in plan_steps):
        return "steps_failed"
    return None


def settled_by_evidence(state: Mapping[str, Any], reason: CloseReason,
                        evidence: Evidence) -> tuple[RunStatus, str] | None:
    """The status the run's evidence settles without a coverage account, with the key of the line that says so
    ("" for none); None when the account decides. A failure, then an early stop (budget, limit, repeat), then a
    reply cut off at the output limit (a limit too), then no final answer, or nothing the run tried worked."""
    if has_failed(state) or reason == "failure":
        return "failed", ""
    stopped = _STOPPED.get(stop_reason_of(state) or "") or _STOPPED.get(reason)
    if stopped is not None:
        return stopped, ""
    if evidence.truncated:
        return "limit_reached", "truncated"
    if not evidence.given:
        return "no_answer", "not_given"
    if why := nothing_worked(steps_of(state)):
        return "no_answer", why
    return None


def by_coverage(coverage: Coverage) -> RunStatus:
    """How much of the question the account says is answered: all, some (partial) or none (no_answer)."""
    if coverage.parts and coverage.missing:
        return "no_answer" if set(coverage.parts) <= set(coverage.missing) else "partial"
    return "answered"


def pick_status(state: Mapping[str, Any], reason: CloseReason, coverage: Coverage,
                evidence: Evidence = Evidence()) -> RunStatus:
    """The turn's status: what the evidence settles, else how much of the question the account says is answered."""
    settled = settled_by_evidence(state, reason, evidence)
    return settled[0] if settled is not None else by_coverage(coverage)


def annotated(answer: str, status: str, coverage: Coverage, why: str, lang_zh: bool) -> str:
    """The answer with what its status rests on: the evidence line (`why`), and for partial / no_answer a line
    naming the missing parts unless the answer already names each of them."""
    lines = [answer] if answer else []
    if why in _EVIDENCE_LINES:
        lines.append(_EVIDENCE_LINES[why][1 if lang_zh else 0])
    missing, lowered = coverage.missing, answer.casefold()
    if status in ("partial", "no_answer") and any(part.casefold() not in lowered for part in missing):
        lines.append(("还缺少：" + "；".join(missing) + "。") if lang_zh else ("Missing: " + "; ".join(missing) + "."))
    return "\n".join(lines)
