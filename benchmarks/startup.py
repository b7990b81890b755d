"""Start-up of the `reactgraph` command against importing LangGraph itself, measured side by side.

Three subprocesses, run interleaved (one of each per round) so machine noise hits all alike, wall time of
each, median of N rounds:

    reactgraph --help                                  goal <= 0.2x the import below
    reactgraph ask "计算 2+3" --store memory            goal <= 1.5x (warm: run once before timing)
    python -c "import langgraph.graph, langchain_core.messages"

    python benchmarks/startup.py [--runs 15] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REACTGRAPH = str(Path(sys.executable).parent / "reactgraph")
BASELINE = "import langgraph.graph, langchain_core.messages"
COMMANDS = {  # label (ASCII, so the table lines up): argv, goal as a ratio against the baseline
    "reactgraph --help": ([REACTGRAPH, "--help"], 0.2),
    "reactgraph ask '2+3' --store memory (warm)": ([REACTGRAPH, "ask", "计算 2+3", "--store", "memory"], 1.5),
    BASELINE: ([sys.executable, "-c", BASELINE], None),
}


def environment() -> dict[str, str]:
    """The user's environment without react-graph settings, so `ask` runs the offline model on no extra tools."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("REACTGRAPH_MODEL", "REACTGRAPH_TOOLS"))}


def wall_time(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - started


def measure(runs: int) -> dict[str, list[float]]:
    env = environment()
    for argv, _ in COMMANDS.values():  # warm the OS cache (and .pyc files) for every command
        wall_time(argv, env)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(runs):
        for name, (argv, _) in COMMANDS.items():
            times[name].append(wall_time(argv, env))
    return times


def report(times: dict[str, list[float]]) -> list[dict[str, object]]:
    base = statistics.median(times[BASELINE])
    rows = []
    for name, (_, goal) in COMMANDS.items():
        median = statistics.median(times[name])
        ratio = median / base
        rows.append({"command": name, "median_s": round(median, 3), "min_s": round(min(times[name]), 3),
                     "ratio": round(ratio, 2), "goal": goal, "met": None if goal is None else ratio <= goal})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="interleaved rounds (default 15)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    rows = report(measure(args.runs))
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    print(f"Start-up, wall time of a subprocess ({args.runs} interleaved rounds, medians; ratio against the last):")
    width = max(len(str(r["command"])) for r in rows)
    print(f"  {'command':<{width}}  median s   min s   ratio   goal")
    for r in rows:
        goal = "" if r["goal"] is None else f"<= {r['goal']}x " + ("met" if r["met"] else "MISSED")
        print(f"  {r['command']:<{width}}  {r['median_s']:8.3f}  {r['min_s']:6.3f}  {r['ratio']:5.2f}x   {goal}")


if __name__ == "__main__":
    main()
