"""`python -m pytest --cpu-report` (tests/support/cpu_report.py): the suite's CPU by test module, for the people who
keep the suite within its time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_cpu_report_prints_each_modules_cpu_and_keeps_each_tests_figures(tmp_path):
    folder = tmp_path / "figures"  # not there yet: the report makes it
    env = {key: value for key, value in os.environ.items() if key != "REACTGRAPH_CPU_REPORT_DIR"}
    done = subprocess.run([sys.executable, "-m", "pytest", "tests/test_sizes.py", "-n", "0", "-p", "no:cacheprovider",
                           f"--cpu-report={folder}"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "CPU by test module (seconds)" in done.stdout
    row = next(line for line in done.stdout.splitlines() if line.endswith("  tests/test_sizes.py"))
    cpu, own, reaped, forked, wall, count = row.split()[:6]
    records = [json.loads(line) for path in folder.glob("*.jsonl") for line in path.read_text().splitlines()]
    assert int(count) == len(records) > 0 and all(r["test"].startswith("tests/test_sizes.py::") for r in records)
    assert abs(float(cpu) - (float(own) + float(reaped) + float(forked))) <= 0.15  # each printed to 0.1
    assert float(own) > 0 and float(wall) > 0
