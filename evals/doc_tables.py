"""The comparison tables the docs show, made from a results file, never typed: `.ci/update-compare-tables`
rewrites each block between `<!-- compare-tables: RESULTS -->` and `<!-- /compare-tables -->` in the docs (and
the full report and figure beside RESULTS), and tests/test_compare_tables.py fails when a page differs from what
the results file gives."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from reactgraph.evals.labels import what_it_measures
from reactgraph.evals.metrics import summarize
from reactgraph.evals.report import pair_table, status_table, verdicts, write_report
from reactgraph.evals.results_file import RESULTS, SETTINGS, ordered, read_records

BLOCK = re.compile(r"(^<!-- compare-tables: (?P<source>\S+) -->\n)(?P<body>.*?)(^<!-- /compare-tables -->$)",
                   re.M | re.S)
FIGURES = ("success.png",)  # the figures the docs show; the others stay out of the repository


def load(results: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A results file's records, in report order, and its run's settings (run.json beside it, if any)."""
    import json

    settings_path = results.parent / SETTINGS
    settings = json.loads(settings_path.read_text(encoding="utf-8")) if settings_path.is_file() else {}
    records, _ = read_records(results)
    return ordered(records, settings.get("graphs")), settings


def _compact_table(summary: dict[str, Any]) -> str:
    """Per graph: success with its interval, success on the compound tasks, mean calls, tokens, failure modes."""
    lines = ["| graph | success | 95% interval | compound tasks | model calls | tool calls | tokens in | "
             "failure modes |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    compound = summary["tags"].get("compound", {})
    for name, a in summary["graphs"].items():
        part = f"{compound[name]['success_rate'] * 100:.0f}%" if name in compound else "-"
        modes = ", ".join(f"{k} {v}" for k, v in a["failure_modes"].items()) or "-"
        lines.append(f"| {name} | {a['success_rate'] * 100:.0f}% | {a['success_low'] * 100:.0f}–"
                     f"{a['success_high'] * 100:.0f}% | {part} | {a['model_calls']:.1f} | {a['tool_calls']:.1f} | "
                     f"{a['tokens_in']:.0f} | {modes} |")
    return "\n".join(lines)


def tables(records: list[dict[str, Any]], settings: dict[str, Any], source: str) -> str:
    """The block's markdown: what was measured, per graph, how the runs ended, and which gaps are real."""
    summary = summarize(records)
    return "\n".join([
        f"Generated from `{source}` by `python .ci/update-compare-tables` (do not edit by hand):", "",
        *what_it_measures(records, settings), "",
        _compact_table(summary), "", "How the same runs ended (`status`):", "", status_table(summary), "",
        "Which gaps are more than noise (paired on the same tasks and faults):", "", pair_table(summary), "",
        verdicts(summary), ""])


def render_page(text: str, root: Path) -> str:
    """The page with every compare-tables block made anew from the results file it names (relative to `root`)."""
    def block(match: re.Match[str]) -> str:
        source = match.group("source")
        records, settings = load(root / source)
        return match.group(1) + tables(records, settings, source) + match.group(4)

    return BLOCK.sub(block, text)


def write_reports(results: Path) -> list[Path]:
    """summary.md and the figures the docs show, beside the results file, made from it."""
    records, settings = load(results)
    with tempfile.TemporaryDirectory() as scratch:
        written = write_report(records, scratch, settings, plots=True, results=False)
        outputs = [results.parent / "summary.md"]
        shutil.copyfile(written["summary"], outputs[0])
        for name in FIGURES:
            shutil.copyfile(Path(scratch) / name, results.parent / name)
            outputs.append(results.parent / name)
    return outputs


def sources(text: str) -> list[str]:
    return [m.group("source") for m in BLOCK.finditer(text)]


__all__ = ["RESULTS", "load", "render_page", "sources", "tables", "write_reports"]
