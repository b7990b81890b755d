"""Many concurrent sessions of the ReAct graph through `ainvoke`, on the Redis saver and store, side by side.

Each session runs its turns one after another (each turn a question the offline model answers with one
tool call); all sessions start at once on one event loop. Per configuration it prints the sessions that
failed (any exception), the turns lost (a session whose checkpointed state does not hold every question,
or whose long-term store log lacks one), wall time, the p95 time of a turn, and the peak number of Redis
connections the run held: `CLIENT LIST` sampled every 20 ms, counting only connections named for this run,
so other clients of a shared server do not count. `InMemorySaver` + `InMemoryStore` is the reference
for the graph's own time. Nothing here asserts a time.

    python benchmarks/load.py [--sessions 1000] [--turns 3] [--max-connections 50] \
        [--redis-url redis://127.0.0.1:6379/15]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reactgraph.graph import Context, build_react_graph
from reactgraph.memory import AsyncRedisSaver, RedisSaver, RedisStore

QUESTIONS = ("What is 17 * 23?", "What time is it in Tokyo?", "What is 2+3?", "What is 12 / 4?")


@dataclass
class Outcome:
    """What one configuration's run did."""

    name: str
    failed: int = 0
    lost_turns: int = 0
    wall_s: float = 0.0
    turn_ms: list[float] = field(default_factory=list)
    peak_connections: int | None = None
    errors: Counter = field(default_factory=Counter)


class ConnectionSampler:
    """Counts, every `every_s`, the server's clients named `name`; keeps the peak."""

    def __init__(self, url: str, name: str, every_s: float = 0.02) -> None:
        self.client, self.name, self.every_s = redis.Redis.from_url(url), name, every_s
        self.peak, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            mine = sum(1 for c in self.client.client_list() if c.get("name") == self.name)
            self.peak = max(self.peak, mine)
            self._stop.wait(self.every_s)

    def __enter__(self) -> ConnectionSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.client.close()


async def session(graph: Any, sid: str, turns: int, context: Context, outcome: Outcome) -> None:
    config = {"configurable": {"thread_id": sid}}
    try:
        for turn in range(turns):
            started = time.perf_counter()
            await graph.ainvoke({"messages": [HumanMessage(QUESTIONS[turn % len(QUESTIONS)])]}, config,
                                context=context)
            outcome.turn_ms.append((time.perf_counter() - started) * 1000)
    except Exception as exc:  # noqa: BLE001 - counted and shown, the run goes on
        outcome.failed += 1
        outcome.errors[f"{type(exc).__name__}: {str(exc).splitlines()[0][:140] if str(exc) else ''}"] += 1


async def lost_turns(graph: Any, store: Any, sids: list[str], turns: int) -> int:
    """Turns missing from a session's checkpointed messages or from its Q&A log in the long-term store."""
    lost = 0
    for sid in sids:
        state = await graph.aget_state({"configurable": {"thread_id": sid}})
        asked = [m for m in state.values.get("messages", []) if isinstance(m, HumanMessage)]
        logged = await store.asearch(("sessions", sid, "qa"), limit=turns + 10)
        lost += max(turns - len(asked), 0) + max(turns - len(logged), 0)
    return lost


async def run(name: str, saver: Any, store: Any, args: argparse.Namespace, sampler: ConnectionSampler | None,
              tag: str) -> Outcome:
    graph = build_react_graph(checkpointer=saver, store=store)
    context, outcome = Context(model="offline"), Outcome(name)
    sids = [f"{tag}-{name[:5]}-{i}" for i in range(args.sessions)]
    started = time.perf_counter()
    await asyncio.gather(*(session(graph, sid, args.turns, context, outcome) for sid in sids))
    outcome.wall_s = time.perf_counter() - started
    outcome.peak_connections = sampler.peak if sampler else None
    outcome.lost_turns = await lost_turns(graph, store, sids, args.turns)
    return outcome


async def configurations(args: argparse.Namespace, tag: str) -> list[Outcome]:
    name = f"reactgraph-load-{os.getpid()}-{tag}"  # CLIENT SETNAME on every connection of this run
    prefix, limits = f"load-{tag}:", {"max_connections": args.max_connections, "client_name": name}
    warm_up = argparse.Namespace(**{**vars(args), "sessions": 20})  # imports, caches, first compilations
    await run("warm-up", InMemorySaver(), InMemoryStore(), warm_up, None, tag)
    outcomes = [await run("InMemorySaver + InMemoryStore", InMemorySaver(), InMemoryStore(), args, None, tag)]

    async def on_redis(label: str, open_saver: Callable[[], Any]) -> None:
        saver = open_saver()
        store = RedisStore.from_url(args.redis_url, prefix=prefix + "store", **limits)
        try:
            with ConnectionSampler(args.redis_url, name) as sampler:
                outcomes.append(await run(label, saver, store, args, sampler, tag))
        finally:
            store.close()
            await saver.aclose() if isinstance(saver, AsyncRedisSaver) else saver.close()

    await on_redis("AsyncRedisSaver + RedisStore",
                   lambda: AsyncRedisSaver.from_url(args.redis_url, prefix=prefix, **limits))
    await on_redis("RedisSaver + RedisStore (one pool)",
                   lambda: RedisSaver.from_url(args.redis_url, prefix=prefix, **limits))
    return outcomes


def clean_up(url: str, tag: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        for batch in _chunks(client.scan_iter(match=f"load-{tag}:*", count=1000), 1000):
            client.unlink(*batch)
    finally:
        client.close()


def _chunks(keys: Any, size: int) -> Any:
    batch: list[bytes] = []
    for key in keys:
        batch.append(key)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def report(outcomes: list[Outcome], args: argparse.Namespace) -> None:
    print(f"{args.sessions} concurrent sessions x {args.turns} turns through ainvoke (ReAct graph, offline model, "
          f"one tool call per turn); pool size {args.max_connections}; Redis {args.redis_url}")
    header = (f"{'configuration':36} {'failed':>6} {'lost turns':>10} {'wall s':>7} {'turn p95 ms':>11} "
              f"{'peak conns':>10}")
    print(header)
    print("-" * len(header))
    for o in outcomes:
        p95 = statistics.quantiles(o.turn_ms, n=20)[-1] if len(o.turn_ms) > 1 else float("nan")
        peak = "-" if o.peak_connections is None else str(o.peak_connections)
        print(f"{o.name:36} {o.failed:6d} {o.lost_turns:10d} {o.wall_s:7.2f} {p95:11.0f} {peak:>10}")
        for error, count in o.errors.most_common(3):
            print(f"    {count} x {error}")
    base = outcomes[0].wall_s
    for o in outcomes[1:]:
        print(f"{o.name}: wall {o.wall_s / base:.2f}x the in-memory run")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--max-connections", type=int, default=50, help="each pool's size")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    args = parser.parse_args()
    tag = uuid.uuid4().hex[:8]
    try:
        outcomes = asyncio.run(configurations(args, tag))
    finally:
        clean_up(args.redis_url, tag)
    report(outcomes, args)


if __name__ == "__main__":
    main()
