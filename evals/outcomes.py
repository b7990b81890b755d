"""Whose end a run's end is: the model's, judged by the task's checker, or the plumbing's, left out of the judging.

- **Infrastructure outcomes** (`infra` in a record): the provider or the transport failed the run — a request
  with no reply in time (`request_timeout`), the run's `--task-timeout` (`task_timeout`), 429s past the retries
  (`rate_limit`), 5xx past the retries (`server_error`), a prompt over the model's context (`context_exceeded`),
  a server that cannot be reached (`connection`), a stream that closed with no reply (`empty_reply`). Read from
  the recorded error line (the model layer's `model provider error: …`, models/loader.describe_model_error, or
  the SDK's exception), never from what the model did.
- **Cut runs** (status `cut`): stopped by the comparison's total cost cap before they ended.

Both are counted per graph beside success and left out of the success rates and the paired tests (the report
says how many); `compare --resume` makes a cut run again, `compare --resume DIR --retry-infra` the
infrastructure outcomes. Also counted per graph, as what the model's runs went through: fallback plans
(Plan-and-Solve planned the whole question as one step), unreadable checks (coverage `unchecked`) and format
errors (unusable text-protocol replies, and the runs their budget stopped).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

INFRA_KINDS = ("task_timeout", "request_timeout", "rate_limit", "server_error", "context_exceeded", "connection",
               "empty_reply")
TIMED_OUT = "timed_out"  # the status and failure mode of a run past its time limit
CUT = "cut"  # the status and failure mode of a run the total cost cap stopped

# A failure of the provider or the transport: our one line for it, or the SDK's own exception (a run that raised).
_PROVIDER = re.compile(r"model provider error:|Error code: \d{3}|API(?:Timeout|Connection)Error|RateLimitError|"
                       r"InternalServerError|No generations found in stream")
_KINDS = (
    ("context_exceeded", re.compile(r"context (?:size|length|window)|maximum context|context_length_exceeded|"
                                    r"prompt is too long|exceeds? the (?:available )?context", re.I)),
    ("rate_limit", re.compile(r"model provider error: 429\b|RateLimitError|Error code: 429")),
    ("request_timeout", re.compile(r"model provider error: (?:no reply|408\b)|APITimeoutError|Error code: 408")),
    ("server_error", re.compile(r"model provider error: (?:409|5\d\d)\b|InternalServerError|"
                                r"Error code: (?:409|5\d\d)")),
    ("connection", re.compile(r"model provider error: cannot connect|APIConnectionError")),
    ("empty_reply", re.compile(r"No generations found in stream")),
)


def infra_cause(error: str | None, status: str | None = None) -> str | None:
    """The infrastructure kind of a run's end (one of INFRA_KINDS), or None when the end is the model's run's."""
    if status == TIMED_OUT:
        return "task_timeout"
    text = str(error or "")
    if not _PROVIDER.search(text):
        return None
    return next((kind for kind, pattern in _KINDS if pattern.search(text)), None)


def infra_of(record: dict[str, Any]) -> str | None:
    """A record's infrastructure kind: its `infra` field, or for a record written before it, read from its error."""
    if "infra" in record:
        return record["infra"] or None
    return infra_cause(record.get("error"), record.get("status"))


def left_out(record: dict[str, Any]) -> bool:
    """Not the model's run to judge: an infrastructure outcome, or cut by the cost cap."""
    return infra_of(record) is not None or record.get("status") == CUT


def judged(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs the checkers judge: every run but those left out."""
    return [r for r in records if not left_out(r)]


def mark_timed_out(record: dict[str, Any], limit_s: float) -> dict[str, Any]:
    """The record of a run that its time limit stopped: an infrastructure outcome, status `timed_out`."""
    return {**record, "status": TIMED_OUT, "success": False, "failure_mode": TIMED_OUT, "infra": "task_timeout",
            "error": f"task timed out after {limit_s:g} s"}


def mark_cut(record: dict[str, Any], line: str) -> dict[str, Any]:
    """The record of a run the total cost cap stopped: status `cut`, `--resume` makes it again."""
    return {**record, "status": CUT, "success": False, "failure_mode": CUT, "infra": None, "error": line}


def plumbing(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per set of runs: how many were judged and left out (infrastructure by kind, cut), and what the judged and
    the rest went through — runs on a fallback plan, unreadable checks, format errors and the runs they stopped."""
    kinds = Counter(kind for r in records if (kind := infra_of(r)))
    return {
        "judged": sum(not left_out(r) for r in records),
        "left_out": sum(left_out(r) for r in records),
        "infra": {kind: kinds[kind] for kind in INFRA_KINDS if kinds[kind]},
        "cut": sum(r.get("status") == CUT for r in records),
        "fallback_plans": sum(int(r.get("fallback_plans") or 0) > 0 for r in records),
        "unchecked": sum(r.get("coverage_by") == "unchecked" for r in records),
        "format_errors": sum(int(r.get("format_errors") or 0) for r in records),
        "format_stops": sum(r.get("stop_reason") == "format" for r in records),
    }


def pair_left_out(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> int:
    """Runs both graphs made that the paired test leaves out, because either graph's run is left out."""
    def key(r: dict[str, Any]) -> tuple[str, int, int]:
        return r["task"], int(r.get("seed") or 0), int(r.get("repeat") or 0)

    out_a = {key(r): left_out(r) for r in a}
    out_b = {key(r): left_out(r) for r in b}
    return sum(out_a[k] or out_b[k] for k in out_a.keys() & out_b.keys())
