"""Redis bytes of one long session and the time to read its state: whole values vs LangGraph's delta channels.

The ReAct graph (the scripted offline model, the built-in tools, `RedisSaver`) answers the same questions turn
by turn in one session per layout, the layouts taking turns so machine noise falls on all alike:

- "before (float version tails)": the project's layout with the saver's versions as they were written before
  (LangGraph's own tail, a random float, rather than 8 hex digits);
- "whole values": the project's layout (nodes/state.py), the growing channels under plain reducers
  (`add_messages`, list `+`): every checkpoint that follows a change stores the whole conversation and the
  turn's step records again;
- "delta every N": the same graph with those two channels as `DeltaChannel`s, which store each step's writes
  and the whole value at every Nth update (N from `--every`); reading a checkpoint replays the writes since.

Bytes are `MEMORY USAGE` summed over the session's checkpoint keys (`RedisSaver.usage`) after `--report` turns;
`get_state` is timed on the finished sessions, interleaved, and the median printed with the ratio to the whole-
values layout. Nothing here asserts a size or a time.

    python benchmarks/session_growth.py [--turns 500] [--report 100,500] [--every 5,10,50] [--reads 101]
                                        [--context-chars 0]
                                        [--redis-url redis://127.0.0.1:6379/15]
"""

from __future__ import annotations

import argparse
import operator
import random
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Annotated, Any, NotRequired, get_type_hints

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


class FloatTails(RedisSaver):
    """The saver as it was before version tails became 8 hex digits: LangGraph's own tail, a random float."""

    def get_next_version(self, current: str | int | None, channel: None = None) -> str:
        counter = 0 if current is None else current if isinstance(current, int) else int(current.split(".")[0])
        return f"{counter + 1:032}.{random.random():016}"


def extend_records(records: list[Any] | None, writes: list[Any]) -> list[Any]:
    """The step records' reducer for a DeltaChannel: each write is a list of records (batching-invariant)."""
    return [*(records or []), *(record for write in writes for record in write)]


def state_with(messages: Any, steps: Any) -> tuple[type, type]:
    """The agent state and input schema with these annotations on the two growing channels."""
    hints = get_type_hints(AgentState, include_extras=True)
    hints["messages"], hints["steps"] = messages, NotRequired[steps]
    return TypedDict("AgentState", hints), TypedDict("InputState", {"messages": messages})  # type: ignore[operator]


def layouts(every: list[int]) -> dict[str, tuple[type, type]]:
    out = {"whole values": state_with(Annotated[list[AnyMessage], add_messages],
                                      Annotated[list[ExecutionStep], operator.add])}
    for n in every:
        out[f"delta every {n}"] = state_with(
            Annotated[list[AnyMessage], DeltaChannel(_messages_delta_reducer, snapshot_frequency=n)],
            Annotated[list[ExecutionStep], DeltaChannel(extend_records, snapshot_frequency=n)])
    return out


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--report", default="100,500", help="turns after which to report bytes")
    parser.add_argument("--every", default="5,10,50", help="snapshot frequencies to measure")
    parser.add_argument("--reads", type=int, default=101)
    parser.add_argument("--context-chars", type=int, default=0,
                        help="text each question quotes before it (0: the bare questions)")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    args = parser.parse_args()
    report = sorted({int(t) for t in args.report.split(",") if int(t) <= args.turns} | {args.turns})
    every = sorted({int(n) for n in args.every.split(",")})
    prefix = f"bench-growth-{uuid.uuid4().hex[:6]}"
    client = redis.Redis.from_url(args.redis_url)
    context = Context()
    try:
        with RedisSaver.from_url(args.redis_url, prefix=prefix) as saver, \
                FloatTails.from_url(args.redis_url, prefix=prefix) as before:
            apps = {"before (float version tails)": build(before, layouts([])["whole values"])}
            apps.update({name: build(saver, schemas) for name, schemas in layouts(every).items()})
            configs = {name: {"configurable": {"thread_id": f"s{i}"}} for i, name in enumerate(apps)}
            sizes: dict[str, dict[int, tuple[int, int]]] = {name: {} for name in apps}
            for turn in range(1, args.turns + 1):
                for name, app in apps.items():
                    question = HumanMessage(question_for(turn, args.context_chars))
                    app.invoke({"messages": [question]}, configs[name], context=context)
                    if turn in report:
                        [usage] = saver.usage([configs[name]["configurable"]["thread_id"]])
                        sizes[name][turn] = (usage.checkpoints, usage.bytes)
            reads: dict[str, list[float]] = {name: [] for name in apps}
            finals = {name: app.get_state(configs[name]).values for name, app in apps.items()}
            for _ in range(args.reads):
                for name, app in apps.items():
                    started = time.perf_counter()
                    app.get_state(configs[name])
                    reads[name].append((time.perf_counter() - started) * 1000)
    finally:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        for i in range(0, len(keys), 500):
            client.delete(*keys[i:i + 500])
    base = "whole values"
    same = all(len(f["messages"]) == len(finals[base]["messages"]) for f in finals.values())
    quoted = f", each question quoting {args.context_chars:,} characters" if args.context_chars else ""
    print(f"One ReAct session on the offline model, {args.turns} turns per layout{quoted}, turns interleaved "
          f"(the project's layout: whole values); same final state in every layout: {same}")
    head = " | ".join(f"bytes after {t} turns" for t in report)
    print(f"| layout | {head} | get_state p50 at {args.turns} turns |")
    print("|---|" + "---|" * len(report) + "---|")
    base_read = statistics.median(reads[base])
    for name in apps:
        cells = " | ".join(f"{sizes[name][t][1] / 1e6:.2f} MB ({sizes[name][t][1] / sizes[base][t][1]:.2f}x)"
                           for t in report)
        p50 = statistics.median(reads[name])
        print(f"| {name} | {cells} | {p50:.2f} ms ({p50 / base_read:.2f}x) |")


if __name__ == "__main__":
    main()
