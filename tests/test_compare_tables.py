"""The comparison tables in the docs and the report beside them are what the committed results file gives, so
no number there is typed by hand (`python .ci/update-compare-tables` rewrites them; `reactgraph compare --report
RESULTS` gives the same report)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reactgraph.evals.report import load, markdown, render_page, sources

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "evals-and-compare.md"
RESULTS = ROOT / "docs" / "eval-robustness" / "results.jsonl"


def test_the_pages_tables_are_the_results_files():
    text = PAGE.read_text(encoding="utf-8")
    assert sources(text) == ["docs/eval-robustness/results.jsonl"], "the page names no results file"
    assert render_page(text, ROOT) == text, "the tables differ from the results file: run .ci/update-compare-tables"


def test_the_committed_report_is_the_results_files():
    records, settings = load(RESULTS)
    summary = (RESULTS.parent / "summary.md").read_text(encoding="utf-8")
    assert markdown(records, settings) == summary, "summary.md differs: run .ci/update-compare-tables"
    assert "control flow only — the scripted model's rules, not model quality" in summary


@pytest.mark.parametrize("target", ["file", "directory"])
def test_compare_report_rewrites_the_report_of_a_results_file_without_running(tmp_path, cli, target):
    for name in ("results.jsonl", "run.json"):
        shutil.copyfile(RESULTS.parent / name, tmp_path / name)
    code, out, err = cli("compare", "--report", str(tmp_path / "results.jsonl" if target == "file" else tmp_path),
                         "--no-plots")
    assert code == 0, err
    assert out == (RESULTS.parent / "summary.md").read_text(encoding="utf-8")
    assert (tmp_path / "summary.md").read_text(encoding="utf-8") == out


def test_compare_report_of_a_missing_file_is_one_line(tmp_path, cli):
    code, out, err = cli("compare", "--report", str(tmp_path / "nothing.jsonl"))
    missing = tmp_path / "nothing.jsonl"
    assert code == 2 and out == "" and err.strip() == f"error: --report {missing}: no results file there"


def test_compare_at_an_80_column_terminal_fits_its_lines_and_lists_the_wide_tables(tmp_path, cli, monkeypatch):
    """At a terminal the report is wrapped to its width: no line over 80 columns, each too-wide table a list of its
    rows (every value still there), narrow tables kept as tables. A pipe gets summary.md as it is (test above)."""
    for name in ("results.jsonl", "run.json"):
        shutil.copyfile(RESULTS.parent / name, tmp_path / name)
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    code, out, err = cli("compare", "--report", str(tmp_path), "--no-plots")
    assert code == 0, err
    assert max(map(len, out.splitlines())) <= 80
    graph = load(RESULTS)[0][0]["graph"]
    listed = " ".join(out.split())  # the list items' wrapped lines joined back
    assert f"- {graph}: runs " in listed and " · success " in listed and " · 95% interval " in listed
    assert "| --- |" not in out.split("## Per graph")[1].split("\n## ")[0]  # that table is a list now
