"""`reactgraph compare`: run a task suite through several graphs and write the comparison (JSONL, markdown, PNG).

The command reads its flags here and hands the work to `run_and_report` (run what the results file does not have
yet, resumable and concurrent under a progress bar, then write the report) or `regenerate` (`--report`: the report
of a results file without running). The evals layer is imported only once a comparison starts.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from reactgraph.cli.shared import (
    MaxCost,
    MaxTokens,
    MaxToolCalls,
    OtelOption,
    Protocol,
    ProtocolOption,
    Reflection,
    ReflectionOption,
    UserError,
    budget_flags,
    build_context,
    traced,
)

DEFAULT_GRAPHS = "react,plan_solve,reflexion"
OUT_DIR = Path("eval-results")


# The options of `compare` whose declarations take more than a line.
GraphsOption = Annotated[str | None, typer.Option(help=f"Comma-separated graphs (default: those of {DEFAULT_GRAPHS} "
                                                       "this installation has; also plan_solve_replan, react_inline, "
                                                       "react_plain and create_agent).")]
ModelOption = Annotated[str | None, typer.Option(metavar="SPEC",
                                                 help="offline | offline-noisy:<p> | openai:<model> | "
                                                      "anthropic:<model> (default: $REACTGRAPH_MODEL or offline).")]
SeedsOption = Annotated[int, typer.Option(help="Repeat the whole run over N seeds: seed, seed+1, …; the intervals "
                                               "and paired tests then bootstrap / test over tasks.")]
SuiteOption = Annotated[str, typer.Option(help="A bundled suite name (default), a path to a .jsonl file, or "
                                               "bfcl:<category>[,…] (simple, multiple, parallel, parallel_multiple, "
                                               "all): BFCL's data, from the bfcl-eval wheel ($REACTGRAPH_BFCL_WHEEL, "
                                               "else downloaded once into the user cache).")]
LimitOption = Annotated[int | None, typer.Option(help="Only the first N (selected) tasks; with bfcl:, N per category.")]
TagOption = Annotated[list[str], typer.Option("--tag", metavar="TAG", help="Only tasks with this tag; repeatable.")]
ResumeOption = Annotated[Path | None, typer.Option(metavar="DIR", help="Go on with the run in DIR: runs already in "
                                                   "its results.jsonl are not made again (same settings only).")]
TaskTimeoutOption = Annotated[float | None, typer.Option(metavar="S", help="A run still going after S seconds is "
                                                         "stopped and recorded as timed out.")]
MaxTotalCostOption = Annotated[float | None, typer.Option(metavar="USD", help="Start no run once the comparison "
                                                          "has cost this much (runs under way finish).")]
MaxOutputOption = Annotated[int | None, typer.Option(metavar="N", help="Most tokens one model reply may have "
                                                    "(default 1024; a small local model may ramble to it).")]
RetryInfraOption = Annotated[bool, typer.Option("--retry-infra", help="With --resume DIR: make again only the runs "
                                                "whose record is an infrastructure outcome (a timeout, 5xx, 429 or "
                                                "context exceeded past the retries, no connection).")]
ReportOption = Annotated[Path | None, typer.Option(metavar="RESULTS", help="Run nothing: rewrite the report "
                                                   "(summary.md/json, plots) of a results.jsonl or its directory.")]
ReplayOption = Annotated[Path | None, typer.Option(metavar="DIR", help="Make the comparison in DIR again from the "
                                                   "model replies stored with it (replies.jsonl), asking no provider; "
                                                   "writes to --out, else DIR/replay.")]


def compare(
    graphs: GraphsOption = None,
    suite: SuiteOption = "default",
    model: ModelOption = None,
    repeat: Annotated[int, typer.Option(help="Runs per task and graph.")] = 1,
    seed: Annotated[int, typer.Option(help="Seed for fault injection and the noisy model's mistakes.")] = 0,
    seeds: SeedsOption = 1,
    tool_failure_rate: Annotated[float, typer.Option(help="Probability that one tool attempt fails (0–1).")] = 0.0,
    tool_latency_ms: Annotated[float, typer.Option(help="Mean extra latency per tool attempt (exponential).")] = 0.0,
    tag: TagOption = [],  # noqa: B006
    limit: LimitOption = None,
    max_iterations: Annotated[int, typer.Option(help="Iteration limit of every run.")] = 5,
    max_tool_calls: MaxToolCalls = None,
    max_tokens: MaxTokens = None,
    max_cost: MaxCost = None,
    reflection: ReflectionOption = Reflection.llm,
    protocol: ProtocolOption = Protocol.tools,
    out: Annotated[Path, typer.Option(help="Directory for results.jsonl, summary.md/json and plots.")] = OUT_DIR,
    plots: Annotated[bool, typer.Option(help="Write PNG plots (needs matplotlib).")] = True,
    concurrency: Annotated[int, typer.Option(help="Runs at once (the records come in the same order).")] = 1,
    resume: ResumeOption = None,
    retry_infra: RetryInfraOption = False,
    task_timeout: TaskTimeoutOption = None,
    max_total_cost: MaxTotalCostOption = None,
    max_output_tokens: MaxOutputOption = None,
    report: ReportOption = None,
    replay: ReplayOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print summary.json instead of the markdown.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or notes on stderr.")] = False,
    otel: OtelOption = False,
) -> None:
    """Compare graphs on a task suite: success with 95 % intervals, paired tests between graphs (is a gap more
    than noise?), model/tool calls, tokens, cost, wall time, failure modes, per tag."""

    output = Output.make(as_json=as_json, quiet=quiet)
    if report is not None:
        regenerate(report, plots, output)
        return
    if replay is not None:
        replay_and_report(replay, out if out != OUT_DIR else replay / "replay", plots, output)
        return
    settings = _settings(graphs, suite, model, repeat, seed, seeds, tool_failure_rate, tool_latency_ms, tag, limit,
                         max_iterations, budget_flags(max_tool_calls, max_tokens, max_cost), reflection, protocol,
                         (concurrency, task_timeout, max_total_cost, max_output_tokens))
    directory = _directory(out, resume)
    if retry_infra and resume is None:
        raise UserError("--retry-infra makes again the infrastructure outcomes of a run: give it with --resume DIR")
    with traced(otel):  # each run of each graph is its own trace
        run_and_report(settings, directory, resume is not None, plots, output, retry_infra=retry_infra)


def _directory(out: Path, resume: Path | None) -> Path:
    """Where the results go: --resume DIR, else --out DIR (both at once only when they agree)."""
    if resume is not None and out != OUT_DIR and out != resume:
        raise UserError(f"--resume {resume} writes to {resume}: leave --out out, or give the same directory")
    directory = resume if resume is not None else out
    if directory.exists() and not directory.is_dir():
        raise UserError(f"{'--resume' if resume is not None else '--out'} {directory} is a file, not a directory")
    return directory


def _settings(graphs: str | None, suite: str, model: str | None, repeat: int, seed: int, seeds: int,
              failure_rate: float, latency_ms: float, tag: list[str], limit: int | None, max_iterations: int,
              budgets: dict[str, Any], reflection: Reflection, protocol: Protocol,
              runs: tuple[int, float | None, float | None, int | None]) -> Any:
    """The tasks and the RunConfig from the flags; a bad one is one line."""
    from reactgraph.evals import FaultPlan, RunConfig, SuiteError, UnknownGraphError, available_graphs
    from reactgraph.evals.graphs import resolve_graphs

    concurrency, task_timeout, max_total_cost, max_output_tokens = runs
    try:
        names = graphs or ",".join(g for g in DEFAULT_GRAPHS.split(",") if g in available_graphs())
        tasks, everything = _load_tasks(suite, tag, limit)
        if not tasks:
            raise SuiteError(f"no task in suite {suite!r} has any of the tags {', '.join(tag)}")
        context = build_context(model, max_iterations, reflection, protocol, [], [], budgets)
        config = RunConfig(graphs=tuple(names.split(",")), model=context.model, repeat=repeat, seed=seed,
                           seeds=seeds, faults=FaultPlan(failure_rate=failure_rate, latency_ms=latency_ms),
                           max_iterations=max_iterations, reflection=context.reflection, protocol=context.protocol,
                           concurrency=concurrency, task_timeout_s=task_timeout,
                           max_total_cost_usd=max_total_cost, max_output_tokens=max_output_tokens, **budgets)
        resolve_graphs(list(config.graphs))
    except (SuiteError, UnknownGraphError, ValueError, TypeError) as exc:
        raise UserError(str(exc)) from exc
    return Settings(tasks=tasks, config=config, suite=suite, suite_tasks=everything)


def _load_tasks(suite: str, tags: list[str], limit: int | None) -> tuple[list[Any], list[Any]]:
    """(the selected tasks, the whole suite: its fingerprint lets a resume check that the suite is the same)."""
    from reactgraph.evals import load_suite, select
    from reactgraph.evals.bfcl import is_bfcl, load_bfcl

    if is_bfcl(suite):  # --limit counts per BFCL category, so that every category is in the report
        import itertools

        everything = load_bfcl(suite)  # category after category, each in BFCL's order: read once, cut per category
        per_category = itertools.groupby(everything, key=lambda task: task.tags[0])
        limited = [task for _, tasks in per_category for task in itertools.islice(tasks, limit)]
        return select(limited, tags or None), everything
    everything = load_suite(suite)
    return select(everything, tags or None, limit), everything


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


def run_and_report(settings: Settings, out: Path, resume: bool, plots: bool, output: Output, *,
                   retry_infra: bool = False) -> None:
    """Run what `out` does not have yet (with `retry_infra`: its infrastructure outcomes again), appending each
    record as it finishes, then write the report."""
    from reactgraph.evals.outcomes import infra_of
    from reactgraph.evals.replay import request_settings
    from reactgraph.evals.report import endpoint_of
    from reactgraph.evals.results_file import ResultsFileError, open_results, record_key, suite_fingerprint
    from reactgraph.evals.runner import compare_runs
    from reactgraph.evals.schedule import RunProgress, utc_now
    from reactgraph.evals.spend import record_cost
    from reactgraph.models import reply_tape
    from reactgraph.models.loader import load_chat_model
    from reactgraph.models.openai_compat import strategy_of

    config = settings.config
    chat_model = load_chat_model(config.model)  # a bad spec or a missing key: one line, before any run
    if config.max_total_cost_usd is not None and record_cost({}, config.model) is None:
        raise UserError(f"--max-total-cost needs the price of {config.model}: none is known (add it to the JSON "
                        "file named by $REACTGRAPH_PRICES)")
    plots = plots and _can_plot(output)
    described = {**config.describe(), "suite": settings.suite, "suite_sha": suite_fingerprint(settings.suite_tasks),
                 "endpoint": endpoint_of(chat_model), "started_at": utc_now()}
    described["request_settings"] = request_settings()  # what a replay sets again to ask the same (--replay)
    if (strategy := strategy_of(chat_model)) is not None:  # where a replay's structured output starts
        described["structured_output"] = strategy[1]
    try:
        writer, done = open_results(out, described, resume, warn=output.warn)
    except ResultsFileError as exc:
        raise UserError(str(exc)) from exc
    total = len(config.graphs) * len(settings.tasks) * config.repeat * config.seeds
    _announce(settings, output, total, len(done))
    earlier = _planned(done, settings)
    only = {record_key(r) for r in earlier if infra_of(r)} if retry_infra else None
    earlier = [r for r in earlier if (record_key(r) not in only if only is not None else r.get("status") != "cut")]
    tape = reply_tape.Tape.recording(out)  # the model's replies, kept for `--replay`
    with writer, RunProgress(output.err, total, done=earlier, enabled=not (output.quiet or output.as_json)) as bar, \
            reply_tape.using(tape):
        def on_result(record: dict[str, Any]) -> None:
            writer.append(record)  # on disk (fsync'd) before the next one: a crash loses nothing
            bar.advance(record)

        outcome = compare_runs(settings.tasks, config, on_result, chat_model, done, only)
    if tape.full:
        output.warn(f"note: {tape.path} reached its bound ({reply_tape.MAX_TAPE_BYTES:,} bytes): later replies were "
                    "not kept, and --replay cannot make those runs again")
    resumed: dict[str, Any] = {}
    if earlier:
        resumed["resumed"] = {"records": len(earlier), "started_at": _earlier_start(out)}
    if only is not None:
        resumed["retried_infra"] = len(only)
    _finish(out, {**described, "stopped": outcome.stopped, "not_started": outcome.not_started, **resumed},
            outcome.records, done, plots, output)


def _earlier_start(out: Path) -> str | None:
    """When the run being resumed began (its settings file's `started_at`)."""
    from reactgraph.evals.results_file import SETTINGS

    started = _settings_beside(out / SETTINGS).get("started_at")
    return str(started) if started else None


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
    elif sys.stdout.isatty():  # fitted to the terminal; a pipe or a file gets the report as summary.md holds it
        _show_markdown(written["markdown"])
    else:
        sys.stdout.write(written["markdown"])
    files = [written["results"], written["summary"], written["summary_json"], *written["plots"]]
    output.note(f"wrote {', '.join(str(p) for p in files)}")


def _show_markdown(markdown: str) -> None:
    """The report at a terminal: Markdown still, wrapped to the terminal's width, each table wider than it as a
    list of its rows (`- react: runs 6 · success 83% · …`), where the terminal would wrap rows mid-cell."""
    import shutil

    sys.stdout.write(fit_tables(markdown, shutil.get_terminal_size().columns))


def fit_tables(markdown: str, width: int) -> str:
    """`markdown` with its lines wrapped to `width` at spaces, and every table that has a line wider than `width`
    written as a list, one item per row: the first cell, then each other column's header and value."""
    import textwrap

    out: list[str] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("|"):  # prose and list items wrapped at spaces, not mid-word by the terminal
            indent = "  " if lines[i].startswith("- ") else ""
            out.extend(textwrap.wrap(lines[i], width, subsequent_indent=indent, break_on_hyphens=False) or [""])
            i += 1
            continue
        table = []
        while i < len(lines) and lines[i].startswith("|"):
            table.append(lines[i])
            i += 1
        if max(map(len, table)) <= width or len(table) < 2:
            out.extend(table)
            continue
        header, *rows = ([cell.strip() for cell in row.strip().strip("|").split("|")] for row in table)
        for row in rows[1:]:  # rows[0] is the alignment row
            fields = " · ".join(f"{name} {value}" for name, value in zip(header[1:], row[1:], strict=False) if value)
            out.extend(textwrap.wrap(f"- {row[0]}: {fields}", width, subsequent_indent="  ", break_on_hyphens=False))
    return "\n".join(out) + "\n"


def replay_and_report(folder: Path, out: Path, plots: bool, output: Output) -> None:
    """`--replay DIR`: the comparison in DIR made again from its stored replies (evals/replay.py) into `out`, and its
    report; a request the recording has no reply for ends the command with one line naming the run."""
    from reactgraph.evals.replay import ReplayError, apply_request_settings, load_replay
    from reactgraph.evals.results_file import SETTINGS, ordered, write_json_atomically
    from reactgraph.evals.runner import compare_runs
    from reactgraph.evals.schedule import StartGate
    from reactgraph.evals.tasks import SuiteError
    from reactgraph.models import reply_tape

    try:
        replay = load_replay(folder)
    except (ReplayError, SuiteError) as exc:
        raise UserError(str(exc)) from exc
    apply_request_settings(replay.settings)
    chat_model = _replayed_model(replay.settings)
    out.mkdir(parents=True, exist_ok=True)
    described = {**replay.settings, "replayed_from": str(folder)}
    write_json_atomically(out / SETTINGS, described)
    output.note(f"[dim]replaying {len(replay.recorded)} run(s) of {folder} from {replay.tape.path.name}, "
                f"asking no provider ({len(replay.carried)} kept as recorded: stopped runs)[/dim]")
    with reply_tape.using(replay.tape):  # no provider is asked: a recorded provider failure is no cause to pause
        outcome = compare_runs(replay.tasks, replay.config, None, chat_model, replay.carried,
                               gate=StartGate(first_s=0.0, max_s=0.0))
    if replay.tape.missed:
        more = f" (and {len(replay.tape.missed) - 1} more)" if len(replay.tape.missed) > 1 else ""
        raise UserError(f"--replay {folder}: {replay.tape.missed[0]}{more}")
    records = ordered(replay.as_recorded(outcome.records), list(replay.config.graphs))
    _finish(out, described, records, [], plots and _can_plot(output), output)


def _replayed_model(settings: dict[str, Any]) -> Any:
    """The recorded model, pointed at the recorded endpoint (nothing is sent there), its structured output starting
    where the recording's did, and no record of strategies written by this process."""
    import os

    from reactgraph.models.loader import ModelConfigError, load_chat_model, parse_spec
    from reactgraph.models.openai_compat import strategy_of
    from reactgraph.models.strategy_record import FILE_ENV, remember
    from reactgraph.models.structured_output import STRATEGIES

    provider, _ = parse_spec(str(settings["model"]))
    prefix = provider.upper()
    if settings.get("endpoint") and provider in ("openai", "anthropic"):
        os.environ[f"{prefix}_BASE_URL"] = f"http://{settings['endpoint']}" + ("/v1" if provider == "openai" else "")
        os.environ.setdefault(f"{prefix}_API_KEY", "replay-asks-no-provider")
    os.environ[FILE_ENV] = "off"
    try:
        model = load_chat_model(str(settings["model"]))
    except ModelConfigError as exc:
        raise UserError(f"--replay: {exc}") from exc
    strategy = strategy_of(model)
    if strategy is not None and settings.get("structured_output") in STRATEGIES:
        remember(strategy[0], settings["structured_output"], STRATEGIES)
    return model


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
