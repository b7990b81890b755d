"""Redis bytes one session takes after 40 offline turns, without retention and with `prune --keep 5`, side by side.

Two sessions of the ReAct graph (the scripted offline model, the built-in tools, `RedisSaver` and
`RedisStore` on one Redis) are asked the same 40 questions, turn by turn in one run. Session "kept" is
pruned to its newest 5 checkpoints after every turn (what `reactgraph prune --keep 5` run from cron
leaves); session "all" keeps everything and is pruned once at the end, to show what one prune frees.
Bytes are `MEMORY USAGE key SAMPLES 0` summed over the session's keys: its checkpoint keys plus its Q&A
items and their index in the store. A TTL (`--ttl`) changes no byte while a session is in use; it
removes all of them once the session has been idle that long. Nothing here asserts a size.

    python benchmarks/retention.py [--turns 40] [--keep 5] [--redis-url redis://127.0.0.1:6379/15]
"""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path

import redis
from langchain_core.messages import HumanMessage

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reactgraph.cli.prune import session_prefixes
from reactgraph.graph import Context, build_react_graph
from reactgraph.memory import RedisSaver, RedisStore
from reactgraph.memory.retention import items_bytes, session_items

CITIES = ["北京", "上海", "广州", "深圳", "杭州", "成都", "武汉", "西安"]


def question_for(turn: int) -> str:
    """The 40-turn conversation of tests/test_memory_graph.py: a fact, then weather, arithmetic, English."""
    if turn == 1:
        return "我叫小明，我最喜欢的城市是杭州。"
    if turn % 3 == 0:
        return f"计算 ({turn} + 17) * 3 等于多少"
    if turn % 3 == 1:
        return f"{CITIES[turn % len(CITIES)]}的天气怎么样？"
    return f"what is {turn} times 7?"


def footprint(saver: RedisSaver, store: RedisStore, session: str) -> tuple[int, int, int]:
    """(checkpoints, checkpoint bytes, store bytes) of one session."""
    [usage] = saver.usage([session])
    return usage.checkpoints, usage.bytes, items_bytes(store, session_items(store, session_prefixes(session))) or 0


def kib(n: int) -> str:
    return f"{n / 1024:,.1f} KiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--keep", type=int, default=5)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    args = parser.parse_args()
    prefix = f"bench-retention-{uuid.uuid4().hex[:8]}:"
    saver = RedisSaver.from_url(args.redis_url, prefix=prefix)
    store = RedisStore.from_url(args.redis_url, prefix=prefix + "store")
    graph = build_react_graph(checkpointer=saver, store=store)
    context = Context(reflection="rules")
    rows: list[tuple[int, tuple[int, int, int], tuple[int, int, int]]] = []
    try:
        for turn in range(1, args.turns + 1):
            for session in ("all", "kept"):
                graph.invoke({"messages": [HumanMessage(question_for(turn))]},
                             config={"configurable": {"thread_id": session}}, context=context)
            saver.prune(["kept"], keep=args.keep)
            if turn in (1, 10, 20, 30, args.turns):
                rows.append((turn, footprint(saver, store, "all"), footprint(saver, store, "kept")))
        before = footprint(saver, store, "all")
        saver.prune(["all"], keep=args.keep)
        after = footprint(saver, store, "all")
        answer = graph.invoke({"messages": [HumanMessage("我最喜欢的城市是哪个？")]},
                              config={"configurable": {"thread_id": "all"}}, context=context)["final_answer"]
    finally:
        client = redis.Redis.from_url(args.redis_url)
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()
        saver.close()
        store.close()
    print(f"| after turn | no retention: checkpoints, bytes (store) | prune --keep {args.keep} after each turn |")
    print("| ---: | ---: | ---: |")
    for turn, full, kept in rows:
        print(f"| {turn} | {full[0]}, {kib(full[1] + full[2])} ({kib(full[2])}) "
              f"| {kept[0]}, {kib(kept[1] + kept[2])} ({kib(kept[2])}) |")
    growth = (rows[-1][1][1] - rows[0][1][1]) / max(1, rows[-1][0] - rows[0][0])
    print(f"\nwithout retention the checkpoints grow {kib(int(growth))} per turn")
    print(f"one `prune --keep {args.keep}` after {args.turns} turns: {kib(before[1] + before[2])} → "
          f"{kib(after[1] + after[2])} ({before[0]} → {after[0]} checkpoints); "
          f"{(before[1] + before[2]) / max(1, after[1] + after[2]):.1f}x smaller")
    print(f"the pruned session still answers from turn 1: {answer!r}")


if __name__ == "__main__":
    main()
