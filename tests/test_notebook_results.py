"""The notebooks' tables and figures are what their committed results files give (notebooks/results/, read by
evals/runner.py): executed on those files they run nothing new and show the outputs that are committed
(`python .ci/update-notebooks` re-makes them)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from test_notebooks import KERNEL, kernel_dir  # noqa: F401 - the fixture, shared

nbformat = pytest.importorskip("nbformat", reason="the dev extra installs nbformat")
nbclient = pytest.importorskip("nbclient", reason="the dev extra installs nbclient")

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
SHOWN = ("text/markdown", "image/png")


def shown(notebook) -> list[str]:
    """What the code cells display: tables (markdown) and figures (PNG)."""
    return [o["data"][kind] for cell in notebook.cells if cell.cell_type == "code"
            for o in cell.get("outputs", []) if o.get("output_type") == "display_data"
            for kind in SHOWN if kind in o.get("data", {})]


@pytest.mark.timeout(170)
@pytest.mark.parametrize("name", ["01_react_vs_plan_solve.ipynb", "02_robustness.ipynb"])
def test_a_notebooks_outputs_are_its_results_files(name, kernel_dir, monkeypatch, tmp_path):  # noqa: F811
    results = tmp_path / "results"
    shutil.copytree(NOTEBOOKS / "results", results)
    before = {p.relative_to(results): p.read_bytes() for p in results.rglob("*.jsonl")}
    monkeypatch.setenv("JUPYTER_PATH", str(kernel_dir))
    monkeypatch.setenv("REACTGRAPH_MODEL", "offline")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("REACTGRAPH_RESULTS_DIR", str(results))
    monkeypatch.delenv("REACTGRAPH_NOTEBOOK_TASKS", raising=False)
    committed = nbformat.read(NOTEBOOKS / name, as_version=4)
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbclient.NotebookClient(notebook, kernel_name=KERNEL, timeout=150,
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    after = {p.relative_to(results): p.read_bytes() for p in results.rglob("*.jsonl")}
    assert after == before, "the notebook ran comparisons its results files do not hold: run .ci/update-notebooks"
    assert shown(notebook) == shown(committed), "the outputs differ from the results files': run .ci/update-notebooks"
