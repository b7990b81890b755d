"""Eval tasks: the JSONL format, loading a suite by name or path, and deciding whether an answer is right.

One task per line:

    {"id": "calc-paren", "question": "计算 (15 + 27) * 3 等于多少", "lang": "zh", "tags": ["calc"],
     "expected": ["126"]}

Criteria (all that are given must hold; at least one must be given):
- `expected`: a string or list of strings that must all appear in the answer (case-insensitive; thousands
  separators between digits are ignored, so "127,750" matches "127750");
- `expected_any`: a list of strings, at least one of which must appear;
- `pattern`: a regular expression the answer must match (searched, case-insensitive);
- `number` (+ `tolerance`, absolute, default 1e-6): some number in the answer equals it within the tolerance;
- `checker` (+ `params`): a named function from `reactgraph.evals.checks.CHECKERS`, for answers that depend on the day
  (the current time, a person's age) or on what the tools returned, or `trajectory`: the run's tool calls against
  a reference trajectory, judged by LangChain's agentevals (evals/trajectory.py).

- `expected_calls` (+ `tools`): the tool calls the run must make, in BFCL's possible-answer format
  (`[{"fn": {"param": [allowed values]}}]`), scored by BFCL's AST rules (evals/bfcl.py); `tools` are the
  function docs the task offers instead of the built-in tools, as schema-only tools (evals/bfcl.py).
  With no answer criterion beside it, the answer text is not judged.

`expect_status` (optional, with the criteria above): the run's status must also be this one (e.g. `partial` for a
compound question with a part no tool can answer, whose `expected` then names the missing part).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reactgraph.errors import ReactGraphError

SUITES_DIR = Path(__file__).parent / "suites"
ANSWER_CRITERIA = ("expected", "expected_any", "pattern", "number", "checker")
CRITERIA = (*ANSWER_CRITERIA, "expected_calls")
SCRIPTED_FAULTS = ("first", "down")
STATUSES = ("answered", "partial", "no_answer", "limit_reached", "budget_exhausted", "failed")
KNOWN_FIELDS = {"id", "question", "lang", "tags", "tolerance", "params", "note", "expect_status", "tools", "source",
                "faults",
                *CRITERIA}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


class SuiteError(ReactGraphError, ValueError):
    """A suite that cannot be used (missing, malformed line, unknown checker); the message is one line."""


@dataclass(frozen=True)
class Task:
    """One question with a way to tell a right answer from a wrong one."""

    id: str
    question: str
    tags: tuple[str, ...] = ()
    lang: str = ""
    expected: tuple[str, ...] = ()
    expected_any: tuple[str, ...] = ()
    pattern: str | None = None
    number: float | None = None
    tolerance: float = 1e-6
    checker: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    expect_status: str | None = None
    tools: tuple[dict[str, Any], ...] = ()  # function docs offered as schema-only tools instead of the built-ins
    expected_calls: tuple[dict[str, Any], ...] = ()  # BFCL possible answers: one {name: {param: [values]}} a call
    source: str = ""  # where the task comes from and under which licence; reports that use it print it
    # Faults the task itself arranges, tool name -> "first" (its first call in the run fails) or "down" (every
    # call fails): how a family of tasks makes the first tool fail whatever the comparison's fault rate.
    faults: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Task:
        unknown = set(data) - KNOWN_FIELDS
        if unknown:
            raise ValueError(f"unknown field(s) {', '.join(sorted(unknown))}")
        if not isinstance(data.get("id"), str) or not data["id"].strip():
            raise ValueError("'id' must be a non-empty string")
        if not isinstance(data.get("question"), str) or not data["question"].strip():
            raise ValueError("'question' must be a non-empty string")
        if not any(data.get(c) not in (None, "", []) for c in CRITERIA):
            raise ValueError(f"give at least one of {', '.join(CRITERIA)}")
        if data.get("expect_status") is not None and data["expect_status"] not in STATUSES:
            raise ValueError(f"'expect_status' must be one of {', '.join(STATUSES)}")
        expected = data.get("expected") or ()
        tags = data.get("tags") or ()
        return cls(id=data["id"].strip(), question=data["question"].strip(),
                   tags=(tags,) if isinstance(tags, str) else tuple(tags), lang=data.get("lang") or "",
                   expected=(expected,) if isinstance(expected, str) else tuple(expected),
                   expected_any=tuple(data.get("expected_any") or ()), pattern=data.get("pattern"),
                   number=None if data.get("number") is None else float(data["number"]),
                   tolerance=float(data.get("tolerance", 1e-6)), checker=data.get("checker"),
                   params=dict(data.get("params") or {}), note=data.get("note") or "",
                   expect_status=data.get("expect_status"), tools=_objects(data, "tools"),
                   expected_calls=_objects(data, "expected_calls"), source=str(data.get("source") or ""),
                   faults=_faults(data))


def _faults(data: dict[str, Any]) -> dict[str, str]:
    faults = data.get("faults") or {}
    if not isinstance(faults, dict) or not all(isinstance(k, str) and v in SCRIPTED_FAULTS for k, v in faults.items()):
        raise ValueError(f"'faults' must map tool names to one of {', '.join(SCRIPTED_FAULTS)}")
    return dict(faults)


def _objects(data: dict[str, Any], name: str) -> tuple[dict[str, Any], ...]:
    value = data.get(name) or []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ValueError(f"'{name}' must be a list of objects")
    if name == "expected_calls" and not all(len(v) == 1 for v in value):
        raise ValueError("each of 'expected_calls' must be one {function name: {parameter: [values]}}")
    return tuple(value)


def normalise(text: str) -> str:
    """Casefolded, with thousands separators inside numbers removed ("127,750" → "127750")."""
    return re.sub(r"(?<=\d)[,，](?=\d{3}\b)", "", text or "").casefold()


def numbers_in(text: str) -> list[float]:
    return [float(n) for n in _NUMBER.findall(normalise(text))]


def check(task: Task, answer: str, steps: list[dict[str, Any]] | None = None, status: str | None = None) -> bool:
    """Whether `answer` satisfies every criterion of the task (`steps`: the run's ExecutionStep records; `status`:
    the run's status, judged when the task has `expect_status`)."""
    from reactgraph.evals.checks import CHECKERS

    if task.expected_calls and not calls_score(task, steps or []).correct:
        return False
    if task.expected_calls and not any(getattr(task, c) not in (None, "", ()) for c in ANSWER_CRITERIA):
        return not task.expect_status or status == task.expect_status  # only the calls are judged
    text = normalise(answer)
    if not text.strip():
        return False
    if task.expect_status and status != task.expect_status:
        return False
    if any(normalise(s) not in text for s in task.expected):
        return False
    if task.expected_any and not any(normalise(s) in text for s in task.expected_any):
        return False
    if task.pattern and not re.search(task.pattern, answer or "", re.IGNORECASE):
        return False
    if task.number is not None and not any(abs(n - task.number) <= task.tolerance for n in numbers_in(answer)):
        return False
    if task.checker:
        return bool(CHECKERS[task.checker](answer, steps or [], **task.params))
    return True


def calls_score(task: Task, steps: list[dict[str, Any]]) -> Any:
    """The run's recorded calls scored against `task.expected_calls` (a `bfcl.CallScore`)."""
    from reactgraph.evals.bfcl import CallScore, recorded_calls, score_calls

    calls, refused = recorded_calls(steps)
    score = score_calls(list(task.tools), list(task.expected_calls), calls)
    if score.correct or not refused:
        return score
    return CallScore(False, f"{score.reason} ({refused} call(s) refused by the gateway)")


def task_fields(task: Task, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """A run record's task-specific fields: the calls' score for a task that expects calls, the task's source."""
    fields: dict[str, Any] = {"source": task.source} if task.source else {}
    if task.expected_calls:
        score = calls_score(task, steps)
        fields.update(calls_correct=score.correct, call_error=score.reason)
    return fields


def _parse_lines(lines: list[str], source: str) -> list[Task]:
    from reactgraph.evals.bfcl import recorded_gateway
    from reactgraph.evals.checks import CHECKERS, PARAM_CHECKS

    tasks: list[Task] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        try:
            task = Task.from_dict(json.loads(line))
        except (ValueError, TypeError) as exc:
            raise SuiteError(f"{source}, line {number}: {exc}") from None
        if task.checker and task.checker not in CHECKERS:
            raise SuiteError(f"{source}, line {number}: unknown checker {task.checker!r} "
                             f"(known: {', '.join(sorted(CHECKERS))})")
        try:
            PARAM_CHECKS.get(task.checker or "", lambda params: None)(task.params)
            if task.tools:
                recorded_gateway(task.tools)  # every function doc must make a valid schema-only tool
        except ValueError as exc:
            raise SuiteError(f"{source}, line {number}: {exc}") from None
        if task.pattern:
            try:
                re.compile(task.pattern)
            except re.error as exc:
                raise SuiteError(f"{source}, line {number}: bad pattern: {exc}") from None
        if task.id in seen:
            raise SuiteError(f"{source}, line {number}: duplicate task id {task.id!r}")
        seen.add(task.id)
        tasks.append(task)
    if not tasks:
        raise SuiteError(f"{source} has no tasks")
    return tasks


def suite_names() -> list[str]:
    """The suites that ship with the package (evals/suites/*.jsonl)."""
    return sorted(p.stem for p in SUITES_DIR.glob("*.jsonl"))


def load_suite(name_or_path: str | Path) -> list[Task]:
    """The tasks of a bundled suite (by name, e.g. "default"), of BFCL (`bfcl:<category>`) or of a JSONL file."""
    text = str(name_or_path)
    if text.startswith("bfcl:"):  # BFCL's data, read from the bfcl-eval wheel (evals/bfcl.py)
        from reactgraph.evals.bfcl import load_bfcl

        return load_bfcl(text)
    path = Path(text)
    if not (text.endswith(".jsonl") or "/" in text or path.exists()):
        path = SUITES_DIR / f"{text}.jsonl"
        if not path.exists():
            raise SuiteError(f"unknown suite {text!r}: use one of {', '.join(suite_names())} "
                             "or a path to a .jsonl file")
    if not path.is_file():
        raise SuiteError(f"suite file {text} does not exist")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"cannot read suite {text}: {exc}") from None
    return _parse_lines(lines, path.name)


def select(tasks: list[Task], tags: list[str] | None = None, limit: int | None = None) -> list[Task]:
    """Tasks carrying any of `tags` (all when none are given), at most `limit` of them, in suite order."""
    chosen = [t for t in tasks if not tags or set(tags) & set(t.tags)]
    return chosen[:limit] if limit else chosen
