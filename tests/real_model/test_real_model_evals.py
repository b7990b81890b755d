"""The evals on the real small model: `reactgraph compare` with the baselines end to end, and notebook 01 with
its cells unchanged. Behaviour only — every run is recorded, the reports say which model, provider (and its
server), day and cost they measure, and never that they are the scripted model's control flow. Whether the 135M
model is right is not checked: it mostly is not."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli_env import clean_env
from test_notebooks import KERNEL, kernel_dir  # noqa: F401 - the fixture, shared

pytestmark = [pytest.mark.real_model]
REACTGRAPH = str(Path(sys.executable).parent / "reactgraph")
NOTEBOOKS = Path(__file__).resolve().parent.parent.parent / "notebooks"
SCRIPTED = "control flow only"
# A local server costs nothing: priced at 0, so the reports show a total cost rather than "unknown".
FREE = {"input": 0, "output": 0}
# Each run's limits, so that a rambling reply (the model's replies run on to the limit) cannot hold the tier.
TASK_TIMEOUT_S = 60
REPLY_TOKENS = 128


@pytest.fixture
def local_prices(model_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({model_env["REACTGRAPH_MODEL"]: FREE}))
    monkeypatch.setenv("REACTGRAPH_PRICES", str(prices))
    return {**model_env, "REACTGRAPH_PRICES": str(prices)}


@pytest.mark.timeout(3 * TASK_TIMEOUT_S + 60)
def test_compare_runs_the_baselines_on_the_real_model_and_labels_the_report(real_model, local_prices, tmp_path):
    model = local_prices["REACTGRAPH_MODEL"]
    out = tmp_path / "run"
    done = subprocess.run([REACTGRAPH, "compare", "--model", model, "--graphs", "react,react_inline,create_agent",
                           "--limit", "1", "--concurrency", "1", "--task-timeout", str(TASK_TIMEOUT_S),
                           "--max-output-tokens", str(REPLY_TOKENS), "--max-iterations", "2", "--out", str(out),
                           "--no-plots", "--quiet"],
                          env=clean_env(**local_prices), capture_output=True, text=True,
                          timeout=3 * TASK_TIMEOUT_S + 50)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["graph"] for r in records] == ["react", "react_inline", "create_agent"]
    # each run either made model calls (tokens counted) or was stopped at its time limit
    assert all(r["status"] == "timed_out" or (r["model_calls"] > 0 and r["tokens"] > 0) for r in records), records
    assert all(r["error"] is None or r["status"] in ("timed_out", "failed") for r in records), records
    summary = (out / "summary.md").read_text()
    head = summary.split("## Per graph", 1)[0]
    assert f"model: {model}" in head
    assert "provider: openai at 127.0.0.1:" in head and "total cost: $0.0000" in head
    assert " (UTC)" in head and SCRIPTED not in summary


@pytest.mark.timeout(600)
def test_notebook_01_runs_unchanged_on_the_real_model(real_model, local_prices, kernel_dir, monkeypatch,  # noqa: F811
                                                       tmp_path):
    nbformat = pytest.importorskip("nbformat", reason="the dev extra installs nbformat")
    nbclient = pytest.importorskip("nbclient", reason="the dev extra installs nbclient")
    monkeypatch.setenv("JUPYTER_PATH", str(kernel_dir))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.delenv("REACTGRAPH_RESULTS_DIR", raising=False)
    monkeypatch.setenv("REACTGRAPH_NOTEBOOK_TASKS", "1")
    monkeypatch.setenv("REACTGRAPH_NOTEBOOK_MAX_COST", "1")  # the provider section runs under a cap (local: $0)
    monkeypatch.setenv("REACTGRAPH_NOTEBOOK_TASK_TIMEOUT", str(TASK_TIMEOUT_S))
    monkeypatch.setenv("REACTGRAPH_NOTEBOOK_MAX_OUTPUT_TOKENS", str(REPLY_TOKENS))
    notebook = nbformat.read(NOTEBOOKS / "01_react_vs_plan_solve.ipynb", as_version=4)
    nbclient.NotebookClient(notebook, kernel_name=KERNEL, timeout=540,
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    tables = [o["data"]["text/markdown"] for o in outputs if "text/markdown" in o.get("data", {})]
    model = local_prices["REACTGRAPH_MODEL"]
    # The families' control flow on the scripted model first, labelled so; then the provider section on the real
    # model: its estimate printed first, its tables naming the model and its server, never called scripted.
    assert SCRIPTED in "".join(tables[:2])
    provider = [t for t in tables if f"model: {model}" in t]
    assert len(provider) == 1 and "provider: openai at 127.0.0.1:" in provider[0], tables[-2:]
    assert "total cost: $0.0000" in provider[0] and SCRIPTED not in provider[0]
    text = json.dumps([o.get("text") or o.get("data", {}).get("text/plain", "") for o in outputs])
    assert f"runs on {model}: $0.00" in text
