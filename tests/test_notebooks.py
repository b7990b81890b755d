"""Every notebook runs top to bottom without a cell error, on this venv's Python, with the offline model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the dev extra installs nbformat")
nbclient = pytest.importorskip("nbclient", reason="the dev extra installs nbclient")
pytest.importorskip("ipykernel", reason="the dev extra installs ipykernel")

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
KERNEL = "reactgraph-tests"


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory) -> Path:
    """A kernel spec that runs this interpreter, whatever kernels the machine has installed."""
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "react-graph tests", "language": "python"}))
    return root


def test_there_are_three_notebooks():
    assert [p.name for p in NOTEBOOKS] == ["01_react_vs_plan_solve.ipynb", "02_robustness.ipynb",
                                           "03_anatomy_of_a_run.ipynb"]


@pytest.mark.timeout(170)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_without_errors(path, kernel_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("JUPYTER_PATH", str(kernel_dir))
    monkeypatch.setenv("REACTGRAPH_MODEL", "offline")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    # One task, not the whole suite: the test is that every cell runs on a fresh comparison (the replay of the
    # committed results is test_notebook_results.py's); the evals' own tests cover the suite.
    monkeypatch.setenv("REACTGRAPH_NOTEBOOK_TASKS", "1")
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(notebook, kernel_name=KERNEL, timeout=120,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError, naming the cell, on the first error
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    texts = [o.get("text") or o.get("data", {}).get("text/markdown", "") for o in outputs]
    text = json.dumps(texts, ensure_ascii=False)
    assert "model: offline" in text  # every result names the model it came from
