"""What reflection costs in model calls: `react` with the model's reflection (`llm`, one structured call per
round), `react` with the verdict carried by its think replies (`inline`, no call of its own) and LangChain's
`create_agent` (no reflection), side by side in one run of the same suite, model, tools and limits.

Per graph and per task: model calls, tokens (prompt + completion, from the replies' usage) and success, as
`compare` counts them, and how often a reflection fell back (the `llm` verdict unusable, so the rules judged; no
usable inline verdict in a think reply, so the safe default). The goal: inline at ≤ 1.05× create_agent's model
calls, with success no lower than llm's. On the offline model (the default) the numbers measure control flow only:
the scripted model's rules, not model quality.

    python benchmarks/reflection_calls.py [--model SPEC] [--protocol tools|text] [--plain]
                                          [--task ID] [--limit N] [--tag TAG] [--tool-failure-rate P --seed S]
                                          [--task-timeout S] [--max-iterations N] [--max-output-tokens N]
                                          [--per-task] [--real-model [--threads N]]

`--model openai:<name>` with $OPENAI_BASE_URL runs on any OpenAI-compatible server; `--real-model` starts the
real-model tier's llama-server (SmolLM2-135M-Instruct, tests/real_model/prepare.py builds it) for the run and
points the model at it.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
from collections import Counter
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reactgraph.evals import FaultPlan, RunConfig, load_suite, run_comparison, select

GRAPHS = ("react", "react_inline", "create_agent")
LABELS = {"react": "react (llm reflection)", "react_inline": "react (inline reflection)",
          "create_agent": "create_agent (LangChain)", "react_plain": "react (reflection off)"}
GOAL_CALLS = 1.05
# The fallback records (nodes/driver.py) that say a reflection was not the model's own verdict.
FALLBACKS = {"reflection_rules": "llm verdict unusable, rules judged",
             "inline_verdict_default": "no usable inline verdict, safe default"}


class FallbackCounter(logging.Handler):
    """Counts the reflection fallbacks of the run under way; `take()` hands them over when it ends. Exact with
    one run at a time (the benchmark runs with concurrency 1)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.pending: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        kind = (getattr(record, "fallback", None) or {}).get("kind")
        if kind in FALLBACKS:
            self.pending[kind] += 1

    def take(self) -> Counter[str]:
        taken, self.pending = self.pending, Counter()
        return taken


def run(config: RunConfig, tasks: list) -> list[dict[str, Any]]:
    """The comparison's records, each with the reflection fallbacks its run took (`fallbacks`)."""
    counter = FallbackCounter()
    node_log = logging.getLogger("reactgraph.nodes")
    node_log.addHandler(counter)
    taken: list[Counter[str]] = []
    try:
        records = run_comparison(tasks, config, on_result=lambda record: taken.append(counter.take()))
    finally:
        node_log.removeHandler(counter)
    # with concurrency 1 the runs finish in the records' order
    return [{**record, "fallbacks": dict(fallbacks)} for record, fallbacks in zip(records, taken, strict=True)]


def measure(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per graph: runs, success rate, mean model calls, tokens and tool calls per task, statuses, fallbacks."""
    rows: dict[str, dict[str, Any]] = {}
    for record in records:
        row = rows.setdefault(record["graph"], {"runs": 0, "ok": 0, "calls": [], "tokens": [], "tools": [],
                                                "statuses": Counter(), "fallbacks": Counter()})
        row["runs"] += 1
        row["ok"] += bool(record["success"])
        row["calls"].append(record["model_calls"])
        row["tokens"].append(record["tokens"])
        row["tools"].append(record["tool_calls"])
        row["statuses"][str(record["status"])] += 1
        row["fallbacks"].update(record.get("fallbacks") or {})
    return {graph: {"runs": row["runs"], "success": row["ok"] / row["runs"],
                    "model_calls": statistics.fmean(row["calls"]),
                    "tokens": statistics.fmean(row["tokens"]), "tool_calls": statistics.fmean(row["tools"]),
                    "statuses": row["statuses"], "fallbacks": row["fallbacks"]} for graph, row in rows.items()}


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}×" if b else "n/a (no calls)"


def print_summary(rows: dict[str, dict[str, Any]], graphs: tuple[str, ...]) -> None:
    print("| graph | success | model calls / task | tokens / task | tool calls / task | statuses "
          "| reflection fallbacks |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for graph in graphs:
        row = rows[graph]
        statuses = ", ".join(f"{s} {n}" for s, n in row["statuses"].most_common())
        fallbacks = ", ".join(f"{n} × {FALLBACKS[k]}" for k, n in row["fallbacks"].items()) or "-"
        print(f"| {LABELS[graph]} | {row['success']:.1%} | {row['model_calls']:.2f} | {row['tokens']:,.0f} | "
              f"{row['tool_calls']:.2f} | {statuses} | {fallbacks} |")
    inline, agent, llm = rows["react_inline"], rows["create_agent"], rows["react"]
    print(f"inline vs create_agent, model calls: {_ratio(inline['model_calls'], agent['model_calls'])} "
          f"(goal ≤ {GOAL_CALLS}×); tokens: {_ratio(inline['tokens'], agent['tokens'])}")
    print(f"inline vs llm: model calls {_ratio(inline['model_calls'], llm['model_calls'])}, tokens "
          f"{_ratio(inline['tokens'], llm['tokens'])}, success {inline['success']:.1%} vs {llm['success']:.1%} "
          f"(goal: no lower)")
    defaults = inline["fallbacks"]["inline_verdict_default"]
    print(f"inline verdicts: {defaults} think repl{'y' if defaults == 1 else 'ies'} carried no usable verdict (each "
          "took the safe default: the loop goes on, the loop guard and the closing self-check still apply)")
    met = bool(agent["model_calls"]) and inline["model_calls"] / agent["model_calls"] <= GOAL_CALLS \
        and inline["success"] >= llm["success"]
    print("goal met" if met else "goal NOT met")


def print_per_task(records: list[dict[str, Any]], graphs: tuple[str, ...]) -> None:
    """One row per task: each graph's success, status, model calls and tokens, side by side."""
    cells: dict[str, dict[str, str]] = {}
    for r in records:
        mark = "✓" if r["success"] else "✗"
        cells.setdefault(r["task"], {})[r["graph"]] = f"{mark} {r['status']} · {r['model_calls']} · {r['tokens']:,}"
    print("\nPer task (success, status · model calls · tokens):\n")
    print("| task | " + " | ".join(LABELS[g] for g in graphs) + " |")
    print("| --- |" + " --- |" * len(graphs))
    for task, by_graph in cells.items():
        print(f"| {task} | " + " | ".join(by_graph.get(g, "-") for g in graphs) + " |")


def start_real_model(stack: ExitStack, threads: int | None) -> str:
    """The real-model tier's llama-server for this run; $OPENAI_BASE_URL points at it. Its model spec."""
    sys.path[:0] = [str(Path(__file__).resolve().parent.parent / "tests")]
    from support.llama_server import MODEL_NAME, THREADS, llama_server

    url = stack.enter_context(llama_server(threads or THREADS))
    os.environ.update(OPENAI_BASE_URL=f"{url}/v1", OPENAI_API_KEY=os.environ.get("OPENAI_API_KEY") or "not-needed")
    return f"openai:{MODEL_NAME}"


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="offline", help="model spec (default: the offline model)")
    parser.add_argument("--real-model", action="store_true", help="start the real-model tier's llama-server "
                        "(SmolLM2-135M-Instruct) and run on it")
    parser.add_argument("--threads", type=int, default=None, help="llama-server's threads (--real-model)")
    parser.add_argument("--protocol", default="tools", choices=["tools", "text"])
    parser.add_argument("--suite", default="default")
    parser.add_argument("--task", action="append", default=None, help="only this task id (repeatable)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    parser.add_argument("--tag", action="append", default=None, help="only tasks with this tag (repeatable)")
    parser.add_argument("--plain", action="store_true", help="add react with reflection off")
    parser.add_argument("--tool-failure-rate", type=float, default=0.0, help="seeded tool faults (0-1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-iterations", type=int, default=5)
    parser.add_argument("--max-output-tokens", type=int, default=None, help="most tokens one reply may have")
    parser.add_argument("--task-timeout", type=float, default=None, help="each run's time limit, seconds")
    parser.add_argument("--per-task", action="store_true", help="also print each task's figures per graph")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    tasks = [t for t in load_suite(args.suite) if not args.task or t.id in args.task]
    tasks = select(tasks, args.tag, args.limit)
    graphs = (*GRAPHS, "react_plain") if args.plain else GRAPHS
    with ExitStack() as stack:
        model = start_real_model(stack, args.threads) if args.real_model else args.model
        # The run's reflection is `llm`; react_inline and react_plain set their own (evals/graphs.py).
        config = RunConfig(graphs=graphs, model=model, reflection="llm", protocol=args.protocol, seed=args.seed,
                           max_iterations=args.max_iterations, max_output_tokens=args.max_output_tokens,
                           task_timeout_s=args.task_timeout,
                           faults=FaultPlan(failure_rate=args.tool_failure_rate))
        records = run(config, tasks)
    faults = f"tool failure rate {args.tool_failure_rate:g} (seed {args.seed})"
    scripted = " (control flow only: the scripted model's rules)" if model.startswith("offline") else ""
    timeout = f", task timeout {args.task_timeout:g} s" if args.task_timeout else ""
    timeout += f", max_output_tokens {args.max_output_tokens}" if args.max_output_tokens else ""
    print(f"{len(tasks)} tasks of suite {args.suite!r}, model {model}, protocol {args.protocol}, "
          f"max_iterations {config.max_iterations}, {faults}{timeout}{scripted}; "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print_summary(measure(records), graphs)
    if args.per_task:
        print_per_task(records, graphs)


if __name__ == "__main__":
    main()
