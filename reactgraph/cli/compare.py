"""`reactgraph compare`: run a task suite through several graphs and write the comparison (JSONL, markdown, PNG)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from reactgraph.cli.otel_option import OtelOption, traced
from reactgraph.cli.shared import (
    MaxCost,
    MaxTokens,
    MaxToolCalls,
    Protocol,
    ProtocolOption,
    Reflection,
    ReflectionOption,
    UserError,
    budget_flags,
    build_context,
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
ReportOption = Annotated[Path | None, typer.Option(metavar="RESULTS", help="Run nothing: rewrite the report "
                                                   "(summary.md/json, plots) of a results.jsonl or its directory.")]


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
    task_timeout: TaskTimeoutOption = None,
    max_total_cost: MaxTotalCostOption = None,
    max_output_tokens: MaxOutputOption = None,
    report: ReportOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print summary.json instead of the markdown.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or notes on stderr.")] = False,
    otel: OtelOption = False,
) -> None:
    """Compare graphs on a task suite: success with 95 % intervals, paired tests between graphs (is a gap more
    than noise?), model/tool calls, tokens, cost, wall time, failure modes, per tag."""
    from reactgraph.cli.compare_run import Output, regenerate, run_and_report

    output = Output.make(as_json=as_json, quiet=quiet)
    if report is not None:
        regenerate(report, plots, output)
        return
    settings = _settings(graphs, suite, model, repeat, seed, seeds, tool_failure_rate, tool_latency_ms, tag, limit,
                         max_iterations, budget_flags(max_tool_calls, max_tokens, max_cost), reflection, protocol,
                         (concurrency, task_timeout, max_total_cost, max_output_tokens))
    directory = _directory(out, resume)
    with traced(otel):  # each run of each graph is its own trace
        run_and_report(settings, directory, resume is not None, plots, output)


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
    from reactgraph.cli.compare_run import Settings
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
    from reactgraph.evals.bfcl_suite import is_bfcl, load_bfcl

    if is_bfcl(suite):  # --limit counts per BFCL category, so that every category is in the report
        import itertools

        everything = load_bfcl(suite)  # category after category, each in BFCL's order: read once, cut per category
        per_category = itertools.groupby(everything, key=lambda task: task.tags[0])
        limited = [task for _, tasks in per_category for task in itertools.islice(tasks, limit)]
        return select(limited, tags or None), everything
    everything = load_suite(suite)
    return select(everything, tags or None, limit), everything
