"""`python -m pytest --cpu-report`: where the suite's CPU goes, module by module.

The suite is bound by CPU on two cores (docs/development.md, "The suite's time"), and a test's wall time says
little about its CPU: a test that waits on a server is long and cheap, a test that forks a service is short and
dear. For each test, in its worker: the worker's own CPU, that of the processes it started and reaped (CLI runs,
pip, notebook kernels, servers), and that of the commands the worker's fork server started
(`support.forked_commands`: services, workers), counted as the fork server reaps them (a module's service shows up
in the test it ends in). Each worker appends its tests' figures to a file; at the end the controller prints the
modules that took most and the totals. Not counted: the workers' collection, Redis's own CPU.
"""

from __future__ import annotations

import json
import os
import resource
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

SHOWN = 30  # modules printed


def _fork_server_cpu() -> float:
    """CPU seconds of this worker's fork server and the commands it has reaped (0 before it starts)."""
    from multiprocessing import forkserver

    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)  # private, read only: the figure is advisory
    if not pid:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):  # not Linux, or the fork server is gone
        return 0.0
    return sum(int(ticks) for ticks in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime


def _cpu() -> tuple[float, float, float]:
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, reaped.ru_utime + reaped.ru_stime, _fork_server_cpu()


class CpuReport:
    def __init__(self, folder: Path, worker: str | None) -> None:
        self.folder = folder
        self.worker = worker  # None: the controller, or a run without workers
        self._file: Any = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        before, started = _cpu(), time.perf_counter()
        yield
        after = _cpu()
        if self._file is None:
            self._file = (self.folder / f"{self.worker or 'main'}-{os.getpid()}.jsonl").open("a")
        own, reaped, forked = (max(b - a, 0.0) for a, b in zip(before, after, strict=True))
        self._file.write(json.dumps({"test": item.nodeid, "own": own, "reaped": reaped, "forked": forked,
                                     "wall": time.perf_counter() - started}) + "\n")
        self._file.flush()

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.worker is not None:
            return
        modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0])
        for path in self.folder.glob("*.jsonl"):
            for line in path.read_text().splitlines():
                record = json.loads(line)
                figures = modules[record["test"].split("::", 1)[0]]
                for index, key in enumerate(("own", "reaped", "forked", "wall")):
                    figures[index] += record[key]
                figures[4] += 1
        write = terminalreporter.write_line
        totals = [sum(figures[index] for figures in modules.values()) for index in range(3)]
        terminalreporter.section("CPU by test module (seconds)")
        write(f"all tests: {sum(totals):.0f} s of CPU: their workers {totals[0]:.0f}, the processes they reaped "
              f"{totals[1]:.0f}, forked commands {totals[2]:.0f} (figures in {self.folder})")
        write(f"{'CPU':>6} {'own':>6} {'reaped':>6} {'forked':>6} {'wall':>6} {'tests':>5}  module")
        ranked = sorted(modules.items(), key=lambda item: -sum(item[1][:3]))
        for module, (own, reaped, forked, wall, count) in ranked[:SHOWN]:
            cpu = own + reaped + forked
            write(f"{cpu:6.1f} {own:6.1f} {reaped:6.1f} {forked:6.1f} {wall:6.1f} {count:5d}  {module}")


def configure(config: pytest.Config) -> None:
    """Register the report when `--cpu-report` was given (the workers inherit the option and the folder)."""
    folder = config.getoption("cpu_report")
    if folder is None:
        return
    if folder == "":  # the controller picks the folder; its workers are handed it through the environment
        folder = os.environ.setdefault("REACTGRAPH_CPU_REPORT_DIR", tempfile.mkdtemp(prefix="cpu-report-"))
    # An xdist worker has its `workerinput` (not the environment: a pytest that a test starts inherits that)
    worker = getattr(config, "workerinput", {}).get("workerid")
    Path(folder).mkdir(parents=True, exist_ok=True)  # a folder named on the command line need not exist yet
    config.pluginmanager.register(CpuReport(Path(folder), worker), "reactgraph-cpu-report")
