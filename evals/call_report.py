"""The report's parts for tasks scored on their tool calls (BFCL's): tool-call accuracy per graph and per
category, and the notices of the data the tasks came from."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

ALL = "all"


def call_accuracy(records: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """graph → category (each tag of the scored tasks, and "all") → runs, correct, accuracy."""
    counts: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for record in records:
        if record.get("calls_correct") is None:
            continue
        for group in (ALL, *record.get("tags", ())):
            cell = counts[record["graph"]][group]
            cell[0] += 1
            cell[1] += bool(record["calls_correct"])
    return {graph: {group: {"runs": runs, "correct": correct, "accuracy": correct / runs}
                    for group, (runs, correct) in groups.items()}
            for graph, groups in counts.items()}


def accuracy_table(accuracy: dict[str, dict[str, dict[str, Any]]]) -> str:
    """Rows: graphs; columns: all, then each category; cells: accuracy (correct/runs)."""
    groups = [ALL, *sorted({g for cells in accuracy.values() for g in cells} - {ALL})]
    lines = ["| graph | " + " | ".join(groups) + " |", "| --- |" + " ---: |" * len(groups)]
    for graph, cells in accuracy.items():
        row = [f"{cells[g]['accuracy'] * 100:.0f}% ({cells[g]['correct']}/{cells[g]['runs']})" if g in cells else "-"
               for g in groups]
        lines.append(f"| {graph} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def notices(records: list[dict[str, Any]]) -> list[str]:
    """The distinct notices (data sources and their licences) of the tasks that ran."""
    return sorted({str(r["source"]) for r in records if r.get("source")})


def call_section(records: list[dict[str, Any]]) -> list[str]:
    """The markdown lines of the tool-call section (none when no task was scored on its calls)."""
    accuracy = call_accuracy(records)
    if not accuracy:
        return []
    return ["## Tool-call accuracy (BFCL's AST checker: name, arguments, types, allowed values)", "",
            accuracy_table(accuracy), "",
            "A run counts when the calls the gateway recorded match a possible answer; the answer text is not "
            "judged (see evals/README.md).", ""]
