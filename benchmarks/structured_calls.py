"""What a structured model call costs: LangChain's `with_structured_output(include_raw=True)` against ours
(models/loader.py `RawAndParsed`, the same model and parser without LangChain's map and fallback), side by side.

Two figures, each measured in interleaved rounds (the order alternating) so that machine noise hits both alike,
medians printed with their ratio:

- one structured call (a reflection's `Check`) on the offline model, per call, CPU and wall;
- whole runs: the ReAct and Plan-and-Solve graphs answering the same questions on the offline model (their
  reflection, plan and step calls are structured), per run, one side built with LangChain's form.

    python benchmarks/structured_calls.py [--rounds 15] [--calls 100]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

from langchain_core.messages import HumanMessage
from pydantic import BaseModel

from reactgraph.graph import Context, build_react_graph
from reactgraph.graph.plan_solve import build_plan_solve_graph
from reactgraph.models import loader
from reactgraph.models.loader import load_chat_model, structured_runnable
from reactgraph.tools import default_gateway

QUESTIONS = ["北京和上海的温差乘以3是多少", "what is 15% of 80, and is it more than the temperature in Paris?",
             "计算 25 + 17，然后乘以 4", "What is the weather in Paris and what is the weather on Mars?"]


class Check(BaseModel):
    """Whether the answer is complete."""

    complete: bool
    missing: list[str]


@contextlib.contextmanager
def langchains_form() -> Iterator[None]:
    """While active, `structured_runnable` gives LangChain's own `include_raw=True` form."""
    original = loader.with_raw_reply
    loader.with_raw_reply = lambda parsed_only: None
    try:
        yield
    finally:
        loader.with_raw_reply = original


def timed(work: Callable[[], Any], count: int) -> tuple[float, float]:
    """CPU and wall seconds of one `work()`, averaged over `count`."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(count):
        work()
    return (time.process_time() - cpu) / count, (time.perf_counter() - wall) / count


def rounds(sides: dict[str, Callable[[], Any]], count: int, repeat: int) -> dict[str, list[tuple[float, float]]]:
    names = list(sides)
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    for index in range(repeat):
        for name in names if index % 2 == 0 else names[::-1]:
            got[name].append(timed(sides[name], count))
    return got


def report(title: str, got: dict[str, list[tuple[float, float]]], unit: str) -> None:
    theirs, ours = got["langchain"], got["ours"]
    print(title)
    for axis, at in (("CPU", 0), ("wall", 1)):
        t, o = statistics.median(s[at] for s in theirs), statistics.median(s[at] for s in ours)
        print(f"  {axis:4}: LangChain's include_raw {t * 1000:.3f} ms, ours {o * 1000:.3f} ms per {unit}"
              f"  -> LangChain's / ours = {t / o:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()

    model, question = load_chat_model("offline", 0.0), [HumanMessage("Is 2+3 = 5 complete?")]
    ours = structured_runnable(model, Check)
    with langchains_form():
        theirs = structured_runnable(model, Check)
    calls = {"langchain": lambda: theirs.invoke(question), "ours": lambda: ours.invoke(question)}
    for call in calls.values():
        timed(call, 20)  # warm-up
    report(f"one structured call, offline model ({args.rounds} rounds of {args.calls}):",
           rounds(calls, args.calls, args.rounds), "call")

    gateway = default_gateway()

    def graphs() -> list[Any]:
        built = [build_react_graph(gateway), build_plan_solve_graph(gateway)]
        for graph in built:  # the model gateway makes each structured runnable on its first call
            run_all(graph)
        return built

    def run_all(graph: Any) -> None:
        for text in QUESTIONS:
            graph.invoke({"messages": [HumanMessage(text)]}, context=Context(reflection="llm"))

    ours_graphs = graphs()
    with langchains_form():
        their_graphs = graphs()
    runs = {"langchain": lambda: [run_all(g) for g in their_graphs], "ours": lambda: [run_all(g) for g in ours_graphs]}
    report(f"whole runs, ReAct and Plan-and-Solve, reflection=llm ({args.rounds} rounds of "
           f"{2 * len(QUESTIONS)} runs):", rounds(runs, 1, args.rounds), f"{2 * len(QUESTIONS)} runs")


if __name__ == "__main__":
    main()
