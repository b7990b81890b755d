"""What reflection costs in model calls: `react` with the model's reflection (`llm`, one structured call per
round), `react` with the verdict carried by its think replies (`inline`, no call of its own) and LangChain's
`create_agent` (no reflection), side by side in one run of the same suite, model, tools and limits.

Per task: model calls, tokens (prompt + completion, from the replies' usage) and success, as `compare` counts
them. The goal: inline at ≤ 1.05× create_agent's model calls, with success no lower than llm's. On the offline
model (the default) the numbers measure control flow only: the scripted model's rules, not model quality.

    python benchmarks/reflection_calls.py [--model SPEC] [--protocol tools|text] [--limit N] [--tag TAG] [--plain]
                                          [--tool-failure-rate P --seed S]
"""

from __future__ import annotations

import argparse
import statistics

from reactgraph.evals import FaultPlan, RunConfig, load_suite, run_comparison, select

GRAPHS = ("react", "react_inline", "create_agent")
LABELS = {"react": "react (llm reflection)", "react_inline": "react (inline reflection)",
          "create_agent": "create_agent (LangChain)", "react_plain": "react (reflection off)"}
GOAL_CALLS = 1.05


def measure(config: RunConfig, tasks: list) -> dict[str, dict[str, float]]:
    """Per graph: runs, success rate, mean model calls, tokens and tool calls per task."""
    rows: dict[str, dict[str, float]] = {}
    for record in run_comparison(tasks, config):
        rows.setdefault(record["graph"], {"runs": 0, "ok": 0, "calls": [], "tokens": [], "tools": []})
        row = rows[record["graph"]]
        row["runs"] += 1
        row["ok"] += bool(record["success"])
        row["calls"].append(record["model_calls"])
        row["tokens"].append(record["tokens"])
        row["tools"].append(record["tool_calls"])
    return {graph: {"runs": row["runs"], "success": row["ok"] / row["runs"],
                    "model_calls": statistics.fmean(row["calls"]), "tokens": statistics.fmean(row["tokens"]),
                    "tool_calls": statistics.fmean(row["tools"])} for graph, row in rows.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="offline", help="model spec (default: the offline model)")
    parser.add_argument("--protocol", default="tools", choices=["tools", "text"])
    parser.add_argument("--suite", default="default")
    parser.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    parser.add_argument("--tag", action="append", default=None, help="only tasks with this tag (repeatable)")
    parser.add_argument("--plain", action="store_true", help="add react with reflection off")
    parser.add_argument("--tool-failure-rate", type=float, default=0.0, help="seeded tool faults (0-1)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    tasks = select(load_suite(args.suite), args.tag, args.limit)
    graphs = (*GRAPHS, "react_plain") if args.plain else GRAPHS
    # The run's reflection is `llm`; react_inline and react_plain set their own (evals/graphs.py).
    config = RunConfig(graphs=graphs, model=args.model, reflection="llm", protocol=args.protocol, seed=args.seed,
                       faults=FaultPlan(failure_rate=args.tool_failure_rate))
    rows = measure(config, tasks)
    faults = f"tool failure rate {args.tool_failure_rate:g} (seed {args.seed})"
    scripted = " (control flow only: the scripted model's rules)" if args.model.startswith("offline") else ""
    print(f"{len(tasks)} tasks of suite {args.suite!r}, model {args.model}, protocol {args.protocol}, "
          f"max_iterations {config.max_iterations}, {faults}{scripted}")
    print("| graph | success | model calls / task | tokens / task | tool calls / task |")
    print("| --- | --- | --- | --- | --- |")
    for graph in graphs:
        row = rows[graph]
        print(f"| {LABELS[graph]} | {row['success']:.1%} | {row['model_calls']:.2f} | {row['tokens']:,.0f} | "
              f"{row['tool_calls']:.2f} |")
    inline, agent, llm = rows["react_inline"], rows["create_agent"], rows["react"]
    ratio = inline["model_calls"] / agent["model_calls"]
    print(f"inline vs create_agent, model calls: {ratio:.2f}× (goal ≤ {GOAL_CALLS}×); tokens: "
          f"{inline['tokens'] / agent['tokens']:.2f}×")
    print(f"inline vs llm: model calls {inline['model_calls'] / llm['model_calls']:.2f}×, tokens "
          f"{inline['tokens'] / llm['tokens']:.2f}×, success {inline['success']:.1%} vs {llm['success']:.1%} "
          f"(goal: no lower)")
    met = ratio <= GOAL_CALLS and inline["success"] >= llm["success"]
    print("goal met" if met else "goal NOT met")


if __name__ == "__main__":
    main()
