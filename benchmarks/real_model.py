"""The agents on a real small model, side by side: ReAct and Plan-and-Solve, tool-calling and text protocol.

SmolLM2-135M-Instruct on llama.cpp's llama-server (the real-model tier's, tests/real_model/prepare.py builds it
once per machine), one server for the whole run, every request through a recording proxy. The same tasks go to
each configuration in turn (rounds alternate), and for each configuration this prints:

- requests per run (mean and max) and wall time per run (median and max);
- prompt tokens per request, by request number within the run (mean over the runs), as the server counted them:
  how the conversation grows from one iteration to the next (the text protocol's growth with a weak model);
- completion tokens per request, the replies cut at the token limit, the requests the client gave up on (its
  timeout; their prompts are not in the growth line), and the statuses the runs ended with.

Nothing here asserts a time; whether the tiny model answers right is not measured.

    python benchmarks/real_model.py [--rounds 1] [--tasks 2] [--max-iterations 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the server, the proxy and the way a run is started are the real-model tier's (tests/support/)
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests/real_model")]
from langchain_core.messages import HumanMessage  # noqa: E402
from prepare import prepare  # noqa: E402

from reactgraph.graph import Context  # noqa: E402
from support.llama_server import MODEL_NAME, THREADS, llama_server  # noqa: E402
from support.real_model_runs import build  # noqa: E402
from support.recording_proxy import RecordingProxy  # noqa: E402

CONFIGS = [("react", "tools"), ("react", "text"), ("plan_solve", "tools"), ("plan_solve", "text")]
TASKS = ["What is 17 * 23?", "What is the weather in Paris today, and is it warmer than in London?"]


@dataclass
class Runs:
    """What the runs of one configuration did."""

    requests: list[int] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)
    prompt_by_request: list[list[int]] = field(default_factory=list)  # per run: prompt tokens of each request
    completion: list[int] = field(default_factory=list)
    cut: int = 0
    abandoned: int = 0  # requests the client gave up on (its timeout) before the server answered
    statuses: Counter = field(default_factory=Counter)


def one_run(proxy: RecordingProxy, graph, protocol: str, question: str, max_iterations: int, into: Runs) -> None:
    mark = proxy.mark()
    started = time.monotonic()
    try:
        result = graph.invoke({"messages": [HumanMessage(question)]},
                              context=Context(model=f"openai:{MODEL_NAME}", protocol=protocol,
                                              max_iterations=max_iterations))
        status = str(result.get("status"))
    except Exception as exc:  # noqa: BLE001 - a crash is a result here, counted beside the statuses
        status = f"crash: {type(exc).__name__}"
    into.walls.append(time.monotonic() - started)
    exchanges = proxy.since(mark)
    into.requests.append(len(exchanges))
    replies = [e.reply for e in exchanges if e.complete]
    into.prompt_by_request.append([int((r.get("usage") or {}).get("prompt_tokens") or 0) for r in replies])
    into.completion += [int((r.get("usage") or {}).get("completion_tokens") or 0) for r in replies]
    into.cut += sum(r.get("finish_reason") == "length" for r in replies)
    into.abandoned += sum(not e.complete for e in exchanges)
    into.statuses[status] += 1


def _growth(runs: Runs, width: int = 8) -> str:
    """Mean prompt tokens at request 1, 2, … (over the runs that made that many requests)."""
    longest = max((len(p) for p in runs.prompt_by_request), default=0)
    means = [statistics.mean(p[i] for p in runs.prompt_by_request if len(p) > i) for i in range(longest)]
    shown = " → ".join(f"{m:,.0f}" for m in means[:width])
    return shown + (f" → … ({longest} requests)" if longest > width else "")


def report(results: dict[tuple[str, str], Runs], max_iterations: int) -> None:
    print(f"\nSmolLM2-135M-Instruct on llama-server, max_iterations={max_iterations}, "
          f"{len(next(iter(results.values())).walls)} runs per configuration\n")
    print("| graph | protocol | requests/run mean (max) | wall/run median (max) | completion tokens/request "
          "mean (max) | cut at limit | given up (timeout) | statuses |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for (graph, protocol), runs in results.items():
        statuses = ", ".join(f"{s} {n}" for s, n in runs.statuses.most_common())
        completion = f"{statistics.mean(runs.completion):,.0f} ({max(runs.completion)})" if runs.completion else "-"
        print(f"| {graph} | {protocol} | {statistics.mean(runs.requests):.1f} ({max(runs.requests)}) "
              f"| {statistics.median(runs.walls):.1f} s ({max(runs.walls):.1f} s) | {completion} "
              f"| {runs.cut} of {sum(runs.requests)} | {runs.abandoned} | {statuses} |")
    print("\nPrompt tokens by request number within a run (mean over the runs):\n")
    print("| graph | protocol | prompt tokens: request 1 → 2 → … |")
    print("| --- | --- | --- |")
    for (graph, protocol), runs in results.items():
        print(f"| {graph} | {protocol} | {_growth(runs)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1, help="times each task goes to each configuration")
    parser.add_argument("--max-iterations", type=int, default=3)
    parser.add_argument("--threads", type=int, default=THREADS, help="llama-server's threads")
    parser.add_argument("--tasks", type=int, default=len(TASKS), help="how many of the tasks to put")
    args = parser.parse_args()
    prepare()
    graphs = {name: build(name) for name in {g for g, _ in CONFIGS}}
    results = {config: Runs() for config in CONFIGS}
    with llama_server(args.threads) as url, RecordingProxy(url) as proxy:
        os.environ.update(OPENAI_BASE_URL=proxy.openai_url, OPENAI_API_KEY="not-needed")
        for round_number in range(args.rounds):
            for question in TASKS[:args.tasks]:
                for graph, protocol in CONFIGS:  # alternating: the machine's load falls on every configuration
                    one_run(proxy, graphs[graph], protocol, question, args.max_iterations, results[graph, protocol])
                    print(f"round {round_number + 1} · {graph}/{protocol} · {question[:30]}… "
                          f"{results[graph, protocol].statuses}", file=sys.stderr, flush=True)
    report(results, args.max_iterations)


if __name__ == "__main__":
    main()
