"""`reactgraph compare`: run a task suite through several graphs and write the comparison (JSONL, markdown, PNG)."""

from __future__ import annotations

import importlib.util
import json
import sys
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
    otel: OtelOption = False,
) -> None:
    """Compare graphs on a task suite: success with 95 % intervals, paired tests between graphs (is a gap more
    than noise?), model/tool calls, tokens, wall time, failure modes, per tag."""
    from reactgraph.cli.terminal_text import SafeConsole
    from reactgraph.evals import (
        FaultPlan,
        RunConfig,
        SuiteError,
        UnknownGraphError,
        available_graphs,
        resolve_graphs,
    )
    from reactgraph.models.loader import load_chat_model

    err = SafeConsole(stderr=True, soft_wrap=True)
    try:
        names = graphs or ",".join(g for g in DEFAULT_GRAPHS.split(",") if g in available_graphs())
        tasks = _load_tasks(suite, tag, limit)
        if not tasks:
            raise SuiteError(f"no task in suite {suite!r} has any of the tags {', '.join(tag)}")
        budgets = budget_flags(max_tool_calls, max_tokens, max_cost)
        context = build_context(model, max_iterations, reflection, protocol, [], [], budgets)
        config = RunConfig(graphs=tuple(names.split(",")), model=context.model, repeat=repeat, seed=seed,
                           seeds=seeds, faults=FaultPlan(failure_rate=tool_failure_rate, latency_ms=tool_latency_ms),
                           max_iterations=max_iterations, reflection=context.reflection, protocol=context.protocol,
                           **budgets)
        entries = resolve_graphs(list(config.graphs))
        if out.exists() and not out.is_dir():
            raise ValueError(f"--out {out} is a file, not a directory")
    except (SuiteError, UnknownGraphError, ValueError, TypeError) as exc:
        raise UserError(str(exc)) from exc
    chat_model = load_chat_model(config.model)  # a bad spec or a missing key: one line, before any run
    plots = plots and _can_plot(err)

    with traced(otel):  # each run of each graph is its own trace
        records = _run_with_progress(tasks, config, [e.name for e in entries], chat_model, out, err)
    _write(records, out, {**config.describe(), "suite": suite}, plots, err)


def _load_tasks(suite: str, tags: list[str], limit: int | None) -> list:
    from reactgraph.evals import load_suite, select
    from reactgraph.evals.bfcl_suite import is_bfcl, load_bfcl

    if is_bfcl(suite):  # --limit counts per BFCL category, so that every category is in the report
        return select(load_bfcl(suite, limit), tags or None)
    return select(load_suite(suite), tags or None, limit)


def _can_plot(err: Any) -> bool:
    """matplotlib is there; else a note on stderr, before any run, that no plots will be written."""
    if importlib.util.find_spec("matplotlib") is None:
        err.print("note: matplotlib is not installed (pip install 'react-graph[evals]'): writing no plots")
        return False
    return True


def _write(records: list[dict], out: Path, described: dict[str, Any], plots: bool, err: Any) -> None:
    """The report: the markdown table on stdout, the files it wrote named on stderr."""
    from reactgraph.evals.report import write_report

    written = write_report(records, out, described, plots=plots)
    sys.stdout.write(written["markdown"])
    files = [written["results"], written["summary"], written["summary_json"], *written["plots"]]
    err.print(f"wrote {', '.join(str(p) for p in files)}", highlight=False)


def _run_with_progress(tasks: list, config: Any, graphs: list[str], model: Any, out: Path, err: Any) -> list[dict]:
    """Run the comparison under a progress bar on stderr; each record also goes to results.jsonl at once."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from reactgraph.evals.report import seed_text
    from reactgraph.evals.runner import run_comparison

    total = len(graphs) * len(tasks) * config.repeat * config.seeds
    err.print(f"[dim]{len(tasks)} task(s) × {config.repeat} repeat(s) × {config.seeds} seed(s) × {', '.join(graphs)} · "
              f"model {config.model} · tool failure rate {config.faults.failure_rate:g} · "
              f"seed {seed_text(list(config.seed_values))}[/dim]")
    out.mkdir(parents=True, exist_ok=True)
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TextColumn("{task.fields[last]}"), console=err, transient=True)
    # Each record is appended as soon as it exists, so an interrupted (costly, real-model) run keeps what it did.
    with progress, (out / "results.jsonl").open("w", encoding="utf-8") as partial:
        bar = progress.add_task("comparing", total=total, last="")

        def advance(record: dict) -> None:
            partial.write(json.dumps(record, ensure_ascii=False) + "\n")
            partial.flush()
            mark = "ok" if record["success"] else record["failure_mode"]
            progress.update(bar, advance=1, description=f"{record['graph']:<18}",
                            last=f"{record['task']}: {mark}")

        return run_comparison(tasks, config, advance, model=model)
