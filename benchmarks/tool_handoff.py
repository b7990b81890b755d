"""What handing a sync tool to the gateway's thread costs inside a graph, against the same hand-off in a loop.

A sync tool runs on one of the gateway's threads (tools/threads.py) so that its timeout holds: the node's thread
waits for it up to the deadline and can give up. Alone that round trip costs about what a `ThreadPoolExecutor`
round trip costs. Inside a graph run it costs more, because while the node's thread waits, LangGraph's
background threads (saving the step's writes and checkpoints) take the interpreter lock, and the node's thread
queues behind them to run again. This script times the round trip of `benchmarks/overhead.py`'s episode (our
ReAct graph, the `echo` tool, five calls) in three set-ups, interleaved episode by episode, and prints medians:

- a loop of `ToolThreads.call` with nothing else running (the floor of the hand-off);
- the graph with no checkpointer (LangGraph runs no saver threads);
- the graph with an `InMemorySaver`, as overhead.py runs it.

Each call's time is split where the tool's thread starts it and where it ends: queued → started, the tool's own
work, ended → the node's thread runs again.

    python benchmarks/tool_handoff.py [--episodes 200]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from overhead import TOOL_CALLS, EpisodeModel, echo, ours, time_episode  # the sibling script (sys.path[0])

from reactgraph.tools import ToolGateway
from reactgraph.tools.threads import ToolThreads

Split = tuple[float, float, float]  # queued -> started, the work, ended -> resumed (seconds)


def timed(threads: ToolThreads) -> list[Split]:
    """Each call `threads` hands off from now on, its round trip split in three: the list they are added to."""
    splits: list[Split] = []
    call = threads.call

    def timed_call(tool: str, work: Callable[[], Any], deadline: float | None) -> Any:
        marks: dict[str, float] = {}

        def marked() -> Any:
            marks["started"] = time.perf_counter()
            try:
                return work()
            finally:
                marks["ended"] = time.perf_counter()

        queued = time.perf_counter()
        result = call(tool, marked, deadline)
        splits.append((marks["started"] - queued, marks["ended"] - marks["started"],
                       time.perf_counter() - marks["ended"]))
        return result
    threads.call = timed_call  # type: ignore[method-assign]  # on this instance: the gateway's steps hold it
    return splits


def graph_episode(checkpointer: Any) -> tuple[Callable[[int], None], list[Split]]:
    """One episode of overhead.py's graph (five echo calls) and the split of each call its gateway hands off."""
    gateway = ToolGateway([echo])
    splits = timed(gateway.threads)
    graph, extra = ours(EpisodeModel(), gateway, checkpointer)

    def episode(n: int) -> None:
        time_episode(graph, extra, n)
    return episode, splits


def loop_episode() -> tuple[Callable[[int], None], list[Split]]:
    threads = ToolThreads()
    splits = timed(threads)

    def episode(n: int) -> None:
        for _ in range(TOOL_CALLS):
            threads.call("echo", lambda: echo("x"), time.monotonic() + 10)
    return episode, splits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=200)
    args = parser.parse_args()
    setups = {"loop, nothing else running": loop_episode(), "graph, no checkpointer": graph_episode(None),
              "graph, InMemorySaver": graph_episode(InMemorySaver())}
    for episode, splits in setups.values():  # warm-up: imports, first compilations, the threads started
        for n in range(5):
            episode(-1 - n)
        splits.clear()
    for n in range(args.episodes):
        for episode, _ in setups.values():
            episode(n)
    print(f"A sync tool's hand-off to the gateway's thread, medians of {args.episodes * TOOL_CALLS} calls each (µs):")
    print(f"  {'':28} {'queued→started':>15} {'work':>8} {'ended→resumed':>14} {'round trip':>11}")
    round_trips = {}
    for name, (_, splits) in setups.items():
        parts = [statistics.median(split[i] for split in splits) * 1e6 for i in range(3)]
        round_trips[name] = statistics.median(sum(split) for split in splits) * 1e6
        print(f"  {name:28} {parts[0]:15.1f} {parts[1]:8.1f} {parts[2]:14.1f} {round_trips[name]:11.1f}")
    floor, *graphs = round_trips.items()
    print("  round trip / the loop's: " + ", ".join(f"{name} {value / floor[1]:.2f}x" for name, value in graphs))


if __name__ == "__main__":
    main()
