"""`bfcl:<category>` suites: BFCL's Python function-calling tasks as eval tasks.

    tasks = load_bfcl("bfcl:simple", limit=3)             # also "bfcl:simple,parallel" and "bfcl:all"
    records = run_comparison(tasks, RunConfig(graphs=("react",)))

Each task offers its function docs as schema-only tools (evals/recorded_tools.py: the call is recorded, not run)
instead of the built-in tools, and succeeds when the calls the run made match BFCL's possible answers under its
AST checker's rules (evals/bfcl_score.py); the answer text is not judged. Tasks are tagged `bfcl:<category>`,
so the report shows the tool-call accuracy per graph and per category, and carry the data's notice.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from reactgraph.evals.bfcl_data import CATEGORIES, BfclWheel, find_wheel
from reactgraph.evals.tasks import SuiteError, Task

PREFIX = "bfcl:"
MAX_QUESTION_CHARS = 20_000  # BFCL's longest question is a few hundred characters


def is_bfcl(suite: str) -> bool:
    return str(suite).startswith(PREFIX)


def categories(suite: str) -> list[str]:
    """`bfcl:simple,parallel` → ["simple", "parallel"]; `bfcl:all` → every category."""
    names = [n.strip() for n in str(suite).removeprefix(PREFIX).split(",") if n.strip()]
    if names == ["all"]:
        return list(CATEGORIES)
    unknown = [n for n in names if n not in CATEGORIES]
    if unknown or not names:
        raise SuiteError(f"unknown BFCL category {', '.join(unknown) or '(none)'}: use bfcl:<category> with one or "
                         f"more of {', '.join(CATEGORIES)} (comma-separated), or bfcl:all")
    return list(dict.fromkeys(names))


@cache
def _wheel(path: Path) -> BfclWheel:
    return BfclWheel(path)


def _question(entry: dict[str, Any]) -> str:
    turns = entry.get("question")
    first = turns[0] if isinstance(turns, list) and turns and isinstance(turns[0], list) else []
    text = "\n".join(str(m.get("content") or "") for m in first if isinstance(m, dict) and m.get("role") == "user")
    if not text.strip():
        raise SuiteError(f"BFCL task {entry['id']} has no user question")
    return text.strip()[:MAX_QUESTION_CHARS]


def to_task(category: str, entry: dict[str, Any], answer: dict[str, Any], notice: str) -> Task:
    functions, expected = entry.get("function"), answer.get("ground_truth")
    if not isinstance(functions, list) or not isinstance(expected, list) or not expected:
        raise SuiteError(f"BFCL task {entry['id']}: no function docs or no possible answer")
    return Task(id=entry["id"], question=_question(entry), tags=(f"{PREFIX}{category}",), lang="en",
                tools=tuple(functions), expected_calls=tuple(expected), source=notice)


def load_bfcl(suite: str, limit: int | None = None, wheel: str | Path | None = None) -> list[Task]:
    """The tasks of `bfcl:<category>[,<category>…]`, at most `limit` per category, in BFCL's order."""
    names = categories(suite)
    data = _wheel(find_wheel(wheel))
    notice = data.notice()
    tasks = []
    for name in names:
        pairs = data.category(name)
        tasks += [to_task(name, entry, answer, notice) for entry, answer in pairs[:limit or None]]
    return tasks
