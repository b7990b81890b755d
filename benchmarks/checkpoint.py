"""Per-step cost of checkpointing a 5-tool ReAct-like episode, saver by saver, on one machine in one run.

The graph is self-contained on LangGraph (not the project's graph package): a scripted zero-latency
`model` node asks for a tool until it has 5 results, a `tools` node answers, messages are LangChain
messages under `add_messages` as in a real agent. Each episode is a fresh thread. Savers run in
interleaved rounds, their order rotated every round, so machine noise hits all alike; the table shows
medians over rounds. Nothing here asserts a time.

Round trips are counted on the client, by a redis-py connection class that counts socket writes
(`send_packed_command`: one per command, or one per pipeline/MULTI batch). Commands are the server's
`INFO commandstats` deltas over a separate counting run; they include commands run inside Lua scripts,
and they are server-wide, so another client busy on the same Redis would inflate them.

    python benchmarks/checkpoint.py [--rounds 30] [--episodes 10] [--redis-url redis://127.0.0.1:6379/15]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import redis
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reactgraph.memory import RedisSaver

TOOL_CALLS = 5


class AgentState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def model(state: AgentState) -> dict:
    done = sum(isinstance(m, ToolMessage) for m in state["messages"])
    if done < TOOL_CALLS:
        call = {"name": "lookup", "args": {"query": f"step {done}"}, "id": f"call-{done}"}
        return {"messages": [AIMessage("", tool_calls=[call])]}
    return {"messages": [AIMessage(f"answer after {done} lookups")]}


def tools(state: AgentState) -> dict:
    call = state["messages"][-1].tool_calls[0]
    return {"messages": [ToolMessage(f"result for {call['args']['query']}", tool_call_id=call["id"])]}


def react_graph():
    graph = StateGraph(AgentState)
    graph.add_node("model", model)
    graph.add_node("tools", tools)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", lambda s: "tools" if s["messages"][-1].tool_calls else END)
    graph.add_edge("tools", "model")
    return graph


class CountingConnection(redis.Connection):
    """Counts socket writes, per process and per thread (LangGraph saves from worker threads)."""

    total = 0
    local = threading.local()

    def send_packed_command(self, command, check_health=True):
        CountingConnection.total += 1
        CountingConnection.local.sends = getattr(CountingConnection.local, "sends", 0) + 1
        return super().send_packed_command(command, check_health)


def thread_sends() -> int:
    return getattr(CountingConnection.local, "sends", 0)


class Saver:
    """One contender: how to build it, and how to drop what it wrote."""

    def __init__(self, name: str, make: Callable[..., Any], cleanup: Callable[[], None] = lambda: None) -> None:
        self.name, self.make, self.cleanup = name, make, cleanup
        self.instance = make()


def contenders(url: str, workdir: Path, tag: str) -> tuple[list[Saver], list[str]]:
    notes = []
    client = redis.Redis.from_url(url)

    def drop(prefix: str) -> Callable[[], None]:
        return lambda: [client.delete(*batch) for batch in _batches(client.scan_iter(match=f"{prefix}*", count=1000))]

    savers = [Saver("no checkpointer", lambda: None), Saver("InMemorySaver", InMemorySaver)]
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver

        savers.append(Saver("SqliteSaver (file)", lambda: SqliteSaver(
            sqlite3.connect(workdir / "checkpoints.db", check_same_thread=False))))
    except ImportError as exc:
        notes.append(f"SqliteSaver skipped: {exc}")
    try:
        from langgraph_checkpoint_plainredis import RedisSaver as PlainRedisSaver

        savers.append(Saver("plainredis 0.1.0", lambda counting=False: PlainRedisSaver(
            client=redis.Redis.from_url(url, **({"connection_class": CountingConnection} if counting else {})),
            prefix=f"bench-{tag}-plain"), drop(f"bench-{tag}-plain:")))
    except ImportError as exc:
        notes.append(f"langgraph-checkpoint-plainredis not installed ({exc}); "
                     "`pip install langgraph-checkpoint-plainredis` to compare")
    savers.append(Saver("ours: reactgraph RedisSaver", lambda counting=False: RedisSaver.from_url(
        url, prefix=f"bench-{tag}-ours", **({"connection_class": CountingConnection} if counting else {})),
        drop(f"bench-{tag}-ours:")))
    return savers, notes


def _batches(items, size: int = 500):
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def run_episode(app, thread_id: str) -> None:
    result = app.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": thread_id}})
    assert sum(isinstance(m, ToolMessage) for m in result["messages"]) == TOOL_CALLS


def steps_per_episode() -> int:
    """Super-steps of one episode = checkpoints LangGraph writes for it (the input one included)."""
    saver = InMemorySaver()
    app = react_graph().compile(checkpointer=saver)
    run_episode(app, "count")
    return len(list(saver.list({"configurable": {"thread_id": "count"}})))


def time_per_step(savers: list[Saver], rounds: int, episodes: int, steps: int) -> dict[str, list[float]]:
    apps = {s.name: react_graph().compile(checkpointer=s.instance) for s in savers}
    for s in savers:  # warm-up: imports, first compilations, script loads, table creation
        for n in range(3):
            run_episode(apps[s.name], f"warm-{n}-{uuid.uuid4().hex}")
    samples: dict[str, list[float]] = {s.name: [] for s in savers}
    for r in range(rounds):
        shift = r % len(savers)
        for s in savers[shift:] + savers[:shift]:
            started = time.perf_counter()
            for _ in range(episodes):
                run_episode(apps[s.name], uuid.uuid4().hex)
            samples[s.name].append((time.perf_counter() - started) * 1000 / (episodes * steps))
    return samples


def count_traffic(saver: Saver, url: str, episodes: int) -> dict[str, float]:
    """Commands (server's count) and round trips (client's count) per checkpoint and per call."""
    instance = saver.make(counting=True)
    calls = {"put": [0, 0], "put_writes": [0, 0], "get_tuple": [0, 0]}
    for method in calls:
        original = getattr(instance, method)

        def counted(*args, _original=original, _tally=calls[method], **kwargs):
            before = thread_sends()
            try:
                return _original(*args, **kwargs)
            finally:
                _tally[0] += 1
                _tally[1] += thread_sends() - before

        setattr(instance, method, counted)
    app = react_graph().compile(checkpointer=instance)
    run_episode(app, f"warm-{uuid.uuid4().hex}")  # connections and scripts in place first
    for tally in calls.values():
        tally[:] = [0, 0]
    stats = redis.Redis.from_url(url)
    before = _command_calls(stats)
    sends_before = CountingConnection.total
    for _ in range(episodes):
        run_episode(app, uuid.uuid4().hex)
    sends = CountingConnection.total - sends_before
    commands = sum(_command_calls(stats).values()) - sum(before.values()) - 1  # minus our INFO
    puts = calls["put"][0]
    return {
        "commands/checkpoint": commands / puts,
        "round trips/checkpoint": sends / puts,
        **{f"round trips/{m}": tally[1] / tally[0] for m, tally in calls.items() if tally[0]},
    }


def _command_calls(client: redis.Redis) -> dict[str, int]:
    return {name: row["calls"] for name, row in client.info("commandstats").items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--episodes", type=int, default=10, help="episodes per saver per round")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    args = parser.parse_args()

    steps = steps_per_episode()
    tag = uuid.uuid4().hex[:8]
    with tempfile.TemporaryDirectory() as workdir:
        savers, notes = contenders(args.redis_url, Path(workdir), tag)
        try:
            samples = time_per_step(savers, args.rounds, args.episodes, steps)
            traffic = {s.name: count_traffic(s, args.redis_url, args.episodes)
                       for s in savers if "redis" in s.name.lower()}
        finally:
            for s in savers:
                s.cleanup()
    report(samples, traffic, notes, args, steps)


def report(samples, traffic, notes, args, steps) -> None:
    median = {name: statistics.median(v) for name, v in samples.items()}
    base = median.get("no checkpointer", 0.0)
    print(f"Checkpointing a {TOOL_CALLS}-tool ReAct episode: {steps} super-steps (= checkpoints) per episode, "
          f"{args.rounds} interleaved rounds x {args.episodes} episodes per saver, medians. Redis: {args.redis_url}")
    header = f"{'saver':26} {'ms/step':>8} {'p25-p75':>13} {'+ms vs none':>11} {'cmds/ckpt':>9} {'RT/ckpt':>7} " \
             f"{'RT/put':>6} {'RT/writes':>9} {'RT/get':>6}"
    print(header)
    print("-" * len(header))
    for name, values in samples.items():
        q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
        t = traffic.get(name, {})
        cells = [f"{t[k]:.2f}" if k in t else "-" for k in
                 ("commands/checkpoint", "round trips/checkpoint", "round trips/put", "round trips/put_writes",
                  "round trips/get_tuple")]
        print(f"{name:26} {median[name]:8.3f} {q[0]:6.3f}-{q[2]:<6.3f} {median[name] - base:11.3f} "
              f"{cells[0]:>9} {cells[1]:>7} {cells[2]:>6} {cells[3]:>9} {cells[4]:>6}")
    ours = median.get("ours: reactgraph RedisSaver")
    for other, goal in (("plainredis 0.1.0", "<= 0.60"), ("SqliteSaver (file)", "<= 1.00")):
        if ours and other in median:
            print(f"ours / {other}: {ours / median[other]:.2f}x per step (goal {goal})")
    for note in notes:
        print(f"note: {note}")
    print("RT = round trips (client socket writes); cmds = server commands incl. those inside Lua scripts.")


if __name__ == "__main__":
    main()
