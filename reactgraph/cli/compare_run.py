"""The work of `reactgraph compare` once its flags are read: run the comparison (resumable, concurrent, under a
progress bar) and write its report; or, with `--report`, write the report of a results file without running."""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reactgraph.cli.shared import UserError


@dataclass(frozen=True)
class Settings:
    """What to run: the selected tasks, the RunConfig, and the suite they came from (by name and whole)."""

    tasks: list[Any]
    config: Any
    suite: str
    suite_tasks: list[Any]


@dataclass(frozen=True)
class Output:
    """Where what the command says goes: the report on stdout (markdown, or JSON with --json), notes and the
    progress bar on stderr (none with --quiet; no bar with --json or off a terminal)."""

    err: Any
    as_json: bool
    quiet: bool

    @classmethod
    def make(cls, as_json: bool, quiet: bool) -> Output:
        from reactgraph.cli.console_view import SafeConsole

        return cls(SafeConsole(stderr=True, soft_wrap=True), as_json, quiet)

    def note(self, text: str) -> None:
        if not self.quiet:
            self.err.print(text, highlight=False)

    def warn(self, text: str) -> None:  # warnings are shown even with --quiet
        self.err.print(text, highlight=False, markup=False)


def run_and_report(settings: Settings, out: Path, resume: bool, plots: bool, output: Output) -> None:
    """Run what `out` does not have yet, appending each record as it finishes, then write the report."""
    from reactgraph.evals.labels import endpoint_of
    from reactgraph.evals.progress import RunProgress
    from reactgraph.evals.results_file import ResultsFileError, open_results, suite_fingerprint
    from reactgraph.evals.runner import compare_runs
    from reactgraph.evals.schedule import record_cost, utc_now
    from reactgraph.models.loader import load_chat_model

    config = settings.config
    chat_model = load_chat_model(config.model)  # a bad spec or a missing key: one line, before any run
    if config.max_total_cost_usd is not None and record_cost({}, config.model) is None:
        raise UserError(f"--max-total-cost needs the price of {config.model}: none is known (add it to the JSON "
                        "file named by $REACTGRAPH_PRICES)")
    plots = plots and _can_plot(output)
    described = {**config.describe(), "suite": settings.suite, "suite_sha": suite_fingerprint(settings.suite_tasks),
                 "endpoint": endpoint_of(chat_model), "started_at": utc_now()}
    try:
        writer, done = open_results(out, described, resume, warn=output.warn)
    except ResultsFileError as exc:
        raise UserError(str(exc)) from exc
    total = len(config.graphs) * len(settings.tasks) * config.repeat * config.seeds
    _announce(settings, output, total, len(done))
    with writer, RunProgress(output.err, total, done=_planned(done, settings), enabled=not (
            output.quiet or output.as_json)) as bar:
        def on_result(record: dict[str, Any]) -> None:
            writer.append(record)  # on disk (fsync'd) before the next one: a crash loses nothing
            bar.advance(record)

        outcome = compare_runs(settings.tasks, config, on_result, chat_model, done)
    _finish(out, {**described, "stopped": outcome.stopped, "not_started": outcome.not_started},
            outcome.records, done, plots, output)


def _planned(done: list[dict[str, Any]], settings: Settings) -> list[dict[str, Any]]:
    from reactgraph.evals.graphs import resolve_graphs
    from reactgraph.evals.results_file import planned_only
    from reactgraph.evals.schedule import plan_runs

    config = settings.config
    plan = plan_runs(resolve_graphs(list(config.graphs)), settings.tasks, config.seed_values, config.repeat)
    return planned_only(done, {p.key for p in plan})


def _announce(settings: Settings, output: Output, total: int, done: int) -> None:
    from reactgraph.evals.report import seed_text

    config = settings.config
    resumed = f" · {done} record(s) already there" if done else ""
    output.note(f"[dim]{len(settings.tasks)} task(s) × {config.repeat} repeat(s) × {config.seeds} seed(s) × "
                f"{', '.join(config.graphs)} = {total} run(s) · model {config.model} · tool failure rate "
                f"{config.faults.failure_rate:g} · seed {seed_text(list(config.seed_values))} · "
                f"concurrency {config.concurrency}{resumed}[/dim]")


def _finish(out: Path, described: dict[str, Any], records: list[dict[str, Any]], earlier: list[dict[str, Any]],
            plots: bool, output: Output) -> None:
    """results.jsonl rewritten in report order (every record it had kept), then the report of this run's plan."""
    from reactgraph.evals.results_file import (
        RESULTS,
        SETTINGS,
        ordered,
        record_key,
        rewrite_results,
        write_json_atomically,
    )

    graphs = list(described["graphs"])
    kept = {record_key(r): r for r in earlier} | {record_key(r): r for r in records}
    rewrite_results(out / RESULTS, ordered(kept.values(), graphs))
    # how this run ended, for `--report` later; the settings that identify the run stay as they were
    stopped = {"stopped": described.get("stopped"), "not_started": described.get("not_started", 0)}
    write_json_atomically(out / SETTINGS, {**_settings_beside(out / SETTINGS), **stopped})
    if not records:
        output.warn(f"no run was made: {described.get('stopped') or 'nothing to run'}")
        return
    _write(ordered(records, graphs), out, described, plots, output)
    if described.get("stopped"):
        output.warn(f"{described['stopped']}: {described['not_started']} run(s) not started "
                    f"(--resume {out} with a higher --max-total-cost runs them)")


def _write(records: list[dict[str, Any]], out: Path, described: dict[str, Any], plots: bool, output: Output) -> None:
    """The report: markdown (or summary.json with --json) on stdout, the files it wrote named on stderr."""
    from reactgraph.evals.report import write_report

    written = write_report(records, out, described, plots=plots, results=False)
    if output.as_json:
        sys.stdout.write(written["summary_json"].read_text(encoding="utf-8") + "\n")
    else:
        sys.stdout.write(written["markdown"])
    files = [written["results"], written["summary"], written["summary_json"], *written["plots"]]
    output.note(f"wrote {', '.join(str(p) for p in files)}")


def regenerate(path: Path, plots: bool, output: Output) -> None:
    """`--report RESULTS`: the report of a results file (or of the results.jsonl in a directory), rewritten beside
    it from the records alone, with the settings of its run.json when there is one."""
    from reactgraph.evals.results_file import RESULTS, SETTINGS, ResultsFileError, ordered, read_records

    results = path / RESULTS if path.is_dir() else path
    if not results.is_file():
        raise UserError(f"--report {path}: no results file there")
    try:
        records, _ = read_records(results, warn=output.warn)
    except ResultsFileError as exc:
        raise UserError(str(exc)) from exc
    if not records:
        raise UserError(f"--report {path}: the results file holds no record")
    described = _settings_beside(results.parent / SETTINGS)
    _write(ordered(records, described.get("graphs")), results.parent, described, plots and _can_plot(output),
           output)


def _settings_beside(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        data = {}
    return data if isinstance(data, dict) else {}


def _can_plot(output: Output) -> bool:
    """matplotlib is there; else a note on stderr, before any run, that no plots will be written."""
    if importlib.util.find_spec("matplotlib") is None:
        output.note("note: matplotlib is not installed (pip install 'react-graph[evals]'): writing no plots")
        return False
    return True
