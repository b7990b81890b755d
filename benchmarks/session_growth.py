"""Redis bytes of one long session and the time to read its state: the savers' layout before pages and now.

The ReAct graph (the scripted offline model, the built-in tools, `RedisSaver`) answers the same questions turn
by turn in one session per layout, the layouts taking turns (in an order rotated every round; reads timed with
Python's garbage collector paused, so that no layout pays for another's garbage) so machine noise falls on all
alike:

- "old layout": every checkpoint on its own (`RedisSaver(page_size=0)`: its record, channel list, blobs and
  writes as hash fields, its id in sorted-set indexes), as the savers stored every session before pages;
- "pages of N": the savers' layout now (`page_size`, 32 by default): the newest checkpoints on their own, the
  older ones sealed N at a time into compressed pages;
- with `--every`, also the project's graph with its two growing channels as LangGraph `DeltaChannel`s (snapshot
  every N updates), on pages of the default size.

Bytes are `MEMORY USAGE` summed over the session's keys (`RedisSaver.usage`) after `--report` turns. Reads are
timed on the finished sessions, interleaved, medians printed with the ratio to the old layout: `get_state` of the
latest checkpoint (what a turn and the service read), and of older checkpoints one every few turns (what
`history` and a fork read: in the new layout each from a sealed page). `--anatomy` adds where the new layout's
bytes go, by key kind and, inside a page, by part. Nothing here asserts a size or a time.

    python benchmarks/session_growth.py [--turns 500] [--report 100,500] [--page-sizes 32] [--every 5,10]
                                        [--reads 101] [--context-chars 0] [--anatomy]
                                        [--redis-url redis://127.0.0.1:6379/15]
"""

from __future__ import annotations

import argparse
import gc
import operator
import statistics
import sys
import time
import uuid
import zlib
from pathlib import Path
from typing import Annotated, Any, NotRequired, get_type_hints

import ormsgpack
import redis
from langchain_core.messages import AnyMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import _messages_delta_reducer, add_messages
from typing_extensions import TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reactgraph.graph import Context, build_react_graph
from reactgraph.memory import RedisSaver
from reactgraph.nodes.state import AgentState, ExecutionStep, InputState

CITIES = ["北京", "上海", "广州", "深圳", "杭州", "成都", "武汉", "西安"]
OLD = "old layout (every checkpoint on its own)"


def question_for(turn: int, context_chars: int = 0) -> str:
    """Weather, arithmetic and a fact in turn, as a long chat session asks them; with `context_chars`, each
    question first quotes that much text (a pasted document, a long earlier answer), as real sessions do."""
    if turn % 3 == 0:
        question = f"计算 ({turn} + 17) * 3 等于多少"
    elif turn % 3 == 1:
        question = f"{CITIES[turn % len(CITIES)]}的天气怎么样？"
    else:
        question = f"What is the population of {CITIES[turn % len(CITIES)]}?"
    if not context_chars:
        return question
    quoted = (f"Turn {turn} notes: the team reviewed the plan and kept its order. " * (context_chars // 60 + 1))
    return f"{quoted[:context_chars]}\n\n{question}"


def extend_records(records: list[Any] | None, writes: list[Any]) -> list[Any]:
    """The step records' reducer for a DeltaChannel: each write is a list of records (batching-invariant)."""
    return [*(records or []), *(record for write in writes for record in write)]


def state_with(messages: Any, steps: Any) -> tuple[type, type]:
    """The agent state and input schema with these annotations on the two growing channels."""
    hints = get_type_hints(AgentState, include_extras=True)
    hints["messages"], hints["steps"] = messages, NotRequired[steps]
    return TypedDict("AgentState", hints), TypedDict("InputState", {"messages": messages})  # type: ignore[operator]


WHOLE = state_with(Annotated[list[AnyMessage], add_messages], Annotated[list[ExecutionStep], operator.add])


def delta_state(every: int) -> tuple[type, type]:
    return state_with(Annotated[list[AnyMessage], DeltaChannel(_messages_delta_reducer, snapshot_frequency=every)],
                      Annotated[list[ExecutionStep], DeltaChannel(extend_records, snapshot_frequency=every)])


def build(saver: RedisSaver, schemas: tuple[type, type]):
    """The ReAct graph on these schemas: every module that names the project's AgentState or InputState (the graph
    builder, and nodes whose first parameter is annotated with it) sees the variant while the graph is built."""
    swaps = {AgentState: schemas[0], InputState: schemas[1]}
    patched = [(module, name, value) for module in list(sys.modules.values())
               if getattr(module, "__name__", "").startswith("reactgraph.")
               for name, value in vars(module).items() if isinstance(value, type) and value in swaps]
    for module, name, value in patched:
        setattr(module, name, swaps[value])
    try:
        return build_react_graph(checkpointer=saver)
    finally:
        for module, name, value in patched:
            setattr(module, name, value)


def layouts(url: str, prefix: str, page_sizes: list[int], every: list[int]) -> dict[str, tuple[RedisSaver, Any]]:
    """Each layout's saver and graph."""
    out = {}
    for name, page_size, schemas in [(OLD, 0, WHOLE), *((f"pages of {n}", n, WHOLE) for n in page_sizes),
                                     *((f"pages of 32, DeltaChannels (snapshot every {n})", 32, delta_state(n))
                                       for n in every)]:
        saver = RedisSaver.from_url(url, prefix=f"{prefix}{len(out)}", page_size=page_size)
        out[name] = (saver, build(saver, schemas))
    return out


def said(values: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m.type, m.text) for m in values.get("messages", [])]


def rotated(names: list[str], by: int) -> list[str]:
    return names[by % len(names):] + names[:by % len(names)]


def timed(call: Any, *args: Any, **kwargs: Any) -> float:
    started = time.perf_counter()
    call(*args, **kwargs)
    return (time.perf_counter() - started) * 1000


def run(args: argparse.Namespace) -> None:
    report = sorted({int(t) for t in args.report.split(",") if int(t) <= args.turns} | {args.turns})
    prefix = f"bench-growth-{uuid.uuid4().hex[:6]}-"
    client = redis.Redis.from_url(args.redis_url)
    config = {"configurable": {"thread_id": "session"}}
    built = layouts(args.redis_url, prefix, [int(n) for n in args.page_sizes.split(",") if n],
                    [int(n) for n in args.every.split(",") if n])
    try:
        sizes: dict[str, dict[int, int]] = {name: {} for name in built}
        spent = dict.fromkeys(built, 0.0)
        for turn in range(1, args.turns + 1):
            for name in rotated(list(built), turn):
                saver, app = built[name]
                question = HumanMessage(question_for(turn, args.context_chars))
                spent[name] += timed(app.invoke, {"messages": [question]}, config, context=Context())
                if turn in report:
                    sizes[name][turn] = saver.usage(["session"])[0].bytes
        finals = {name: said(app.get_state(config).values) for name, (_, app) in built.items()}
        older = {name: [t.config for t in saver.list(config)][:: max(1, 9 * args.turns // args.reads)][: args.reads]
                 for name, (saver, _) in built.items()}
        latest: dict[str, list[float]] = {name: [] for name in built}
        history: dict[str, list[float]] = {name: [] for name in built}
        gc.collect()
        gc.disable()
        for i in range(args.reads):
            for name in rotated(list(built), i):
                app, target = built[name][1], older[name][i % len(older[name])]
                latest[name].append(timed(app.get_state, config))
                history[name].append(timed(app.get_state, target))
        gc.enable()
        print_table(args, report, sizes, spent, latest, history, finals)
        if args.anatomy:
            for name, (saver, _) in built.items():
                if name != OLD:
                    print_anatomy(client, saver, name)
    finally:
        for saver, _ in built.values():
            saver.close()
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        for i in range(0, len(keys), 500):
            client.delete(*keys[i:i + 500])


def print_table(args: argparse.Namespace, report: list[int], sizes: dict[str, dict[int, int]],
                spent: dict[str, float], latest: dict[str, list[float]], history: dict[str, list[float]],
                finals: dict[str, list[tuple[str, str]]]) -> None:
    same = all(f == finals[OLD] for f in finals.values())
    quoted = f", each question quoting {args.context_chars:,} characters" if args.context_chars else ""
    print(f"One ReAct session on the offline model, {args.turns} turns per layout{quoted}, turns interleaved; "
          f"the same final conversation in every layout: {same}")
    head = " | ".join(f"bytes after {t} turns" for t in report)
    print(f"| layout | {head} | get_state p50, latest | get_state p50, older checkpoints | ms per turn |")
    print("|---|" + "---:|" * (len(report) + 3))
    base_latest, base_history = statistics.median(latest[OLD]), statistics.median(history[OLD])
    for name in sizes:
        cells = " | ".join(f"{sizes[name][t] / 1e6:.2f} MB ({sizes[name][t] / sizes[OLD][t]:.3f}x)" for t in report)
        p50, older = statistics.median(latest[name]), statistics.median(history[name])
        print(f"| {name} | {cells} | {p50:.2f} ms ({p50 / base_latest:.2f}x) | {older:.2f} ms "
              f"({older / base_history:.2f}x) | {spent[name] / args.turns:.1f} |")


def print_anatomy(client: redis.Redis, saver: RedisSaver, name: str) -> None:
    """Where the layout's bytes go: MEMORY USAGE by key kind, and inside the newest page, its parts compressed apart
    (they share a stream in the page, so the parts add up to a little more than the page)."""
    from reactgraph.memory.redis_checkpoint import pages  # the page format itself is what this looks into

    base = f"{saver.prefix}{{session}}:"
    usage = saver.usage(["session"])[0]
    on_own = client.zcard(base + "c:")
    members = client.zrange(base + "pi:", 0, -1)
    print(f"\n{name}: {usage.bytes:,} bytes, {usage.checkpoints} checkpoints ({on_own} on their own, the rest in "
          f"{len(members)} pages)")
    for key in sorted(client.scan_iter(match=base + "*")):
        kind = key.decode().rsplit("}:", 1)[1] or "ns"
        print(f"  {kind:5} {client.memory_usage(key, samples=0):>10,} bytes")
    if not members:
        return
    data = client.hget(base + "p:", members[-1])
    page = pages.decode(data)
    parents = [None if i and p == page.ids[i - 1] else p for i, p in enumerate(page.parents)]  # as a page stores them
    rows = [page.row(i) for i in range(len(page.ids))]
    parts = {"ids": page.ids, "parents": parents, "records": page.records, "channel refs": [r for r, _ in rows],
             "writes": [[list(w) for w in ws] for _, ws in rows], "values": page.elements}
    print(f"  newest page: {len(page.ids)} checkpoints, {len(data):,} bytes ({len(data) / len(page.ids):.0f} per "
          f"checkpoint); its parts, compressed apart, per checkpoint:")
    for part, value in parts.items():
        packed = ormsgpack.packb(value)
        each = len(page.ids)
        print(f"    {part:13} {len(zlib.compress(packed, 9)) / each:7.0f}  (raw {len(packed) / each:.0f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--report", default="100,500", help="turns after which to report bytes")
    parser.add_argument("--page-sizes", default="32", help="page sizes of the new layout to measure")
    parser.add_argument("--every", default="", help="DeltaChannel snapshot frequencies to measure (none by default)")
    parser.add_argument("--reads", type=int, default=101)
    parser.add_argument("--context-chars", type=int, default=0,
                        help="text each question quotes before it (0: the bare questions)")
    parser.add_argument("--anatomy", action="store_true", help="where the new layout's bytes go")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
