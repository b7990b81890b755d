"""What the offline model's reading of a question costs a run: kept once read (as shipped) against read again at every
step (as before 2026-12-06), side by side.

The offline model decomposes the question it is asked at every step of a turn (models/offline/question.py
`decompose`); the reading depends on the question and the history alone, so the model keeps it and hands each
caller a copy. Here the ReAct and Plan-and-Solve graphs answer the same questions on the offline model, the
defaults of `reactgraph ask`, in interleaved rounds (the order alternating); "read again" swaps the kept reading
for the plain function (the copy is still made, so that side is a little slower than before the change).

    python benchmarks/offline_model.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
from collections.abc import Iterator

from langchain_core.messages import HumanMessage
from structured_calls import QUESTIONS, rounds  # the sibling script (on sys.path[0])

from reactgraph.graph import Context, build_react_graph
from reactgraph.graph.plan_solve import build_plan_solve_graph
from reactgraph.models.offline import question
from reactgraph.tools import default_gateway


@contextlib.contextmanager
def read_every_step() -> Iterator[None]:
    """While active, the offline model reads each question anew at every step."""
    kept = question._decompose
    question._decompose = kept.__wrapped__  # type: ignore[assignment]
    try:
        yield
    finally:
        question._decompose = kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    graphs = [build_react_graph(default_gateway()), build_plan_solve_graph(default_gateway())]

    def run_all() -> None:
        for graph in graphs:
            for text in QUESTIONS:
                graph.invoke({"messages": [HumanMessage(text)]}, context=Context())

    def read_again() -> None:
        with read_every_step():
            run_all()

    run_all(), read_again()  # warm-up: imports, the structured runnables, first compilations
    got = rounds({"kept": run_all, "read again": read_again}, 1, args.rounds)
    runs = len(graphs) * len(QUESTIONS)
    print(f"offline model, ReAct and Plan-and-Solve, {runs} runs a round ({args.rounds} rounds, medians):")
    for axis, at in (("CPU", 0), ("wall", 1)):
        again, kept = (statistics.median(s[at] for s in got[name]) for name in ("read again", "kept"))
        print(f"  {axis:4}: read again {again * 1000 / runs:.2f} ms, kept {kept * 1000 / runs:.2f} ms per run"
              f"  -> read again / kept = {again / kept:.2f}x")


if __name__ == "__main__":
    main()
