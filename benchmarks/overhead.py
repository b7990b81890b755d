"""Framework overhead of our ReAct graph vs LangChain's `create_agent`, measured side by side.

Both run the same zero-latency scripted model (5 tool calls, then an answer), the same tool function and
an `InMemorySaver`. Runs alternate between the two so machine noise hits both alike. Our iteration has
four nodes (think, act, observe, reflect with rules) to create_agent's two (model, tools), and our turn three
more (load_memory, finalize, save_memory). Wall time is the figure a user waits for; the process's CPU time
is printed beside it because on a busy machine wall time also measures how long threads wait for a core.

    python benchmarks/overhead.py [--runs 200] [--sessions 100] [--tracing-runs 100] [--own-code-runs 200]
                                  [--first ours|create_agent] [--episodes GRAPH COUNT]

The goal is on what each side's own code costs, not on the whole iteration: LangGraph alone costs more for our
four visible nodes (and the turn's load_memory, finalize, save_memory) than for create_agent's two, before any
node body runs (benchmarks/graph_floor.py). So the same run also times each shape's floor, the same graph with
nodes that do nothing, all the graphs interleaved round by round (the order rotating), and prints
(ours - floor for our shape) / (create_agent - floor for its shape), wall and CPU: goal ≤ 1.2×. It prints the
ratio twice: with our tool's default 10 s timeout (its sync calls handed to a gateway thread, which can give up on
them), and like for like with create_agent, whose tools have no timeout: the same tool declared `timeout_s=None`,
run on the node's thread (one more graph in the same rounds).

Of our own code, the part that is LangGraph's work for our whole shape — the state's fields (each a channel), three
nodes that say where to go next with a `Command` (nodes/driver.py `add_routed_node`), a `Send` per tool call — is
measured by one more graph in the same rounds, the floor for that whole shape (`graph_floor.react_shape_loop`),
and printed beside the ratio; what is left is our node bodies (the fresh state each route reads included), both
gateways and the model call, and is compared with create_agent's own code. (Routed by conditional edges, as until
the routes moved into their nodes, each route had LangGraph copy every channel of the graph to read the fresh state:
that shape cost about twice as many instructions over the floor.)

Instruction counts, for a machine too noisy for time: `--episodes GRAPH COUNT` runs five warm-up episodes of
one graph and COUNT more, nothing else; under `valgrind --tool=callgrind`, the difference of the instructions of
two COUNTs is that many episodes' worth (five iterations each):

    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.10 python benchmarks/overhead.py --episodes ours 10
    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.40 python benchmarks/overhead.py --episodes ours 40

`--first` says which of the two runs first in each interleaved pair (the one that runs second may find the
other's threads still busy); measure both orders on a shared machine.

With the otel extra it also measures OpenTelemetry tracing: the same offline-model ReAct run (the weather
question: two tool calls, reflection, final answer) with tracing off and on, runs interleaved. "On" is
`enable_tracing` with an exporter that drops every span behind a SimpleSpanProcessor: each span is handed to
the exporter as it ends, on the run's own thread, so all of tracing's cost lands inside the timed run (a
BatchSpanProcessor would move export work to its thread and hide part of it).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from graph_floor import four_node_loop, react_shape_loop, two_node_loop  # the sibling script (on sys.path[0])
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph.graph import Context, build_react_graph
from reactgraph.tools import ToolGateway, ToolMeta

TOOL_CALLS = 5


class EpisodeModel(BaseChatModel):
    """Scripted: calls `echo` until it has TOOL_CALLS results in this turn, then answers. Optional delay."""

    delay_s: float = 0.0
    tool_calls_per_episode: int = TOOL_CALLS

    @property
    def _llm_type(self) -> str:
        return "episode-script"

    def bind_tools(self, tools, **kwargs):
        return self.bind(tools=tools, **kwargs)

    def _reply(self, messages) -> AIMessage:
        done = sum(isinstance(m, ToolMessage) for m in messages[max(i for i, m in enumerate(messages)
                                                                   if isinstance(m, HumanMessage)):])
        if done < self.tool_calls_per_episode:
            return AIMessage("", tool_calls=[{"name": "echo", "args": {"text": f"n{done}"}, "id": f"c{done}"}])
        return AIMessage("done")

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        if self.delay_s:
            time.sleep(self.delay_s)
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])


def echo(text: str) -> str:
    """Echo the text back.

    Args:
        text: Anything.
    """
    return text


def ours(model: EpisodeModel, gateway: ToolGateway | None = None, checkpointer: Any = "memory"):
    """Our graph as this benchmark runs it; a caller may hand in the gateway, or another checkpointer (None)."""
    gateway = gateway or ToolGateway([echo])
    checkpointer = InMemorySaver() if checkpointer == "memory" else checkpointer
    graph = build_react_graph(gateway, checkpointer=checkpointer, model=model)
    # No closing self-check: create_agent makes none, and the comparison is of the same model calls.
    context = Context(reflection="rules", closing_check=False, max_iterations=TOOL_CALLS + 1)
    return graph, {"context": context}


def theirs(model: EpisodeModel):
    return create_agent(model, [tool(echo)], checkpointer=InMemorySaver()), {}


def time_episode(graph, extra: dict[str, Any], n: int | str) -> tuple[float, float]:
    """(wall, process CPU) seconds of one episode."""
    started, cpu = time.perf_counter(), time.process_time()
    result = graph.invoke({"messages": [HumanMessage("go")]}, config={"configurable": {"thread_id": f"t{n}"}}, **extra)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert sum(isinstance(m, ToolMessage) for m in result["messages"]) == TOOL_CALLS
    return elapsed, cpu


def _per_iteration_ms(times: list[tuple[float, float]], which: int) -> float:
    return statistics.median(t[which] for t in times) * 1000 / TOOL_CALLS


def overhead(runs: int, first: str = "ours") -> dict[str, float]:
    ours_graph, ours_extra = ours(EpisodeModel())
    their_graph, their_extra = theirs(EpisodeModel())
    for n in range(5):  # warm-up: imports, caches, first compilations
        time_episode(ours_graph, ours_extra, f"warm{n}"), time_episode(their_graph, their_extra, f"warm{n}")
    ours_t: list[tuple[float, float]] = []
    their_t: list[tuple[float, float]] = []
    for n in range(runs):
        if first == "ours":
            ours_t.append(time_episode(ours_graph, ours_extra, n))
            their_t.append(time_episode(their_graph, their_extra, n))
        else:
            their_t.append(time_episode(their_graph, their_extra, n))
            ours_t.append(time_episode(ours_graph, ours_extra, n))
    ours_ms, their_ms = _per_iteration_ms(ours_t, 0), _per_iteration_ms(their_t, 0)
    ours_cpu, their_cpu = _per_iteration_ms(ours_t, 1), _per_iteration_ms(their_t, 1)
    return {"ours_ms_per_iteration": ours_ms, "create_agent_ms_per_iteration": their_ms, "ratio": ours_ms / their_ms,
            "ours_cpu_ms_per_iteration": ours_cpu, "create_agent_cpu_ms_per_iteration": their_cpu,
            "cpu_ratio": ours_cpu / their_cpu}


def contenders() -> dict[str, tuple[Any, dict[str, Any]]]:
    """The graphs the own-code measure runs: ours, create_agent, LangGraph's floor for each one's shape, and the
    floor for our whole shape (state, routes and Send too: `graph_floor.react_shape_loop`)."""
    ours_graph, ours_extra = ours(EpisodeModel())
    their_graph, their_extra = theirs(EpisodeModel())
    no_deadline = ToolGateway([ToolMeta.from_function(echo, timeout_s=None)])  # like create_agent's: no timeout
    no_deadline_graph, no_deadline_extra = ours(EpisodeModel(), no_deadline)
    return {"ours": (ours_graph, ours_extra), "ours_no_deadline": (no_deadline_graph, no_deadline_extra),
            "create_agent": (their_graph, their_extra),
            "our_floor": (four_node_loop(turn_nodes=True), {}), "their_floor": (two_node_loop(), {}),
            "our_shape": (react_shape_loop(), {})}


def own_code(runs: int) -> dict[str, float]:
    """Per-iteration medians of ours, create_agent and LangGraph's floors, and the ratio of what each side's own
    code adds over its floor. The graphs run in turn within each round, the order rotating from round to round,
    so machine noise falls on all of them alike."""
    graphs = contenders()
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in graphs}
    names = list(graphs)
    for n in range(-5, runs):  # the first five rounds warm everything up
        for name in names[n % len(names):] + names[:n % len(names)]:
            graph, extra = graphs[name]
            timing = time_episode(graph, extra, f"{name}{n}")
            if n >= 0:
                times[name].append(timing)
    result: dict[str, float] = {}
    for which, unit in ((0, "ms"), (1, "cpu_ms")):
        med = {name: _per_iteration_ms(t, which) for name, t in times.items()}
        result.update({f"{name}_{unit}": value for name, value in med.items()})
        their_own = med["create_agent"] - med["their_floor"]
        result[f"own_{unit}_ratio"] = (med["ours"] - med["our_floor"]) / their_own
        result[f"own_no_deadline_{unit}_ratio"] = (med["ours_no_deadline"] - med["our_floor"]) / their_own
    return result


def episodes(name: str, count: int) -> None:
    """Five warm-up episodes of one contender, then `count` more: run under `valgrind --tool=callgrind` with two
    counts, the difference of the instructions is `count` episodes' worth, without start-up and imports."""
    graph, extra = contenders()[name]
    for n in range(5 + count):
        time_episode(graph, extra, n)


async def _sessions_wall(sessions: int, delay_s: float) -> float:
    model = EpisodeModel(delay_s=delay_s, tool_calls_per_episode=1)
    graph = build_react_graph(ToolGateway([echo]), checkpointer=InMemorySaver(), model=model)
    context = Context(reflection="rules", closing_check=False)  # two model calls per session, as create_agent's
    started = time.perf_counter()
    await asyncio.gather(*(graph.ainvoke({"messages": [HumanMessage("go")]}, context=context,
                                         config={"configurable": {"thread_id": f"s{i}"}}) for i in range(sessions)))
    return time.perf_counter() - started


async def concurrent_sessions(sessions: int, delay_s: float = 0.05) -> dict[str, float]:
    """Do 100 sessions' model waits overlap? Wall time vs the ideal, with and without the CPU floor.

    The naive ideal is one session's model time (two calls). But one event loop runs every session's graph
    code on one core, so no scheduler can beat (CPU work of all sessions) + (one session's waits); the
    CPU work is measured by the same run with a zero-latency model.
    """
    await _sessions_wall(sessions, 0.0)  # warm-up
    cpu_floor = statistics.median([await _sessions_wall(sessions, 0.0) for _ in range(3)])
    wall = statistics.median([await _sessions_wall(sessions, delay_s) for _ in range(3)])
    naive_ideal = 2 * delay_s
    return {"sessions": sessions, "wall_s": wall, "naive_ideal_s": naive_ideal, "cpu_floor_s": cpu_floor,
            "naive_ratio": wall / naive_ideal, "ratio": wall / (naive_ideal + cpu_floor)}


def tracing_overhead(runs: int) -> dict[str, float] | None:
    """Median wall and CPU ms of one offline ReAct run, tracing off vs on (spans dropped), interleaved."""
    try:
        from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    except ImportError:
        return None
    from reactgraph.graph.tracing import disable_tracing, enable_tracing
    from reactgraph.tools import default_gateway

    class Drop(SpanExporter):
        def export(self, spans):
            return SpanExportResult.SUCCESS

    graph = build_react_graph(default_gateway(), checkpointer=InMemorySaver())
    context = Context()  # the defaults, as `reactgraph ask` runs: reflection by the model (a structured call)

    def one(n: str) -> tuple[float, float]:
        started, cpu = time.perf_counter(), time.process_time()
        result = graph.invoke({"messages": [HumanMessage("北京和上海的天气分别怎么样？哪个城市更热？")]},
                              config={"configurable": {"thread_id": n}}, context=context)
        assert result["status"] == "answered"
        return time.perf_counter() - started, time.process_time() - cpu

    off: list[tuple[float, float]] = []
    on: list[tuple[float, float]] = []
    for n in range(-3, runs):  # the first three rounds warm both up
        off_t = one(f"off{n}")
        enable_tracing(exporter=Drop(), batch=False)
        try:
            on_t = one(f"on{n}")
        finally:
            disable_tracing()
        if n >= 0:
            off.append(off_t), on.append(on_t)
    med = {k: statistics.median(t[i] for t in ts) * 1000 for k, ts in (("off", off), ("on", on)) for i in (0,)}
    cpu = {k: statistics.median(t[1] for t in ts) * 1000 for k, ts in (("off", off), ("on", on))}
    return {"off_ms": med["off"], "on_ms": med["on"], "ratio": med["on"] / med["off"],
            "off_cpu_ms": cpu["off"], "on_cpu_ms": cpu["on"], "cpu_ratio": cpu["on"] / cpu["off"]}


def print_own_code(runs: int) -> None:
    """The own-code measure as printed: the ratio, and the part of our own code that is LangGraph's for our shape."""
    w = own_code(runs)
    print(f"Own code per iteration over LangGraph's floor for each shape ({runs} rounds of the six "
          "graphs, order rotating, medians):")
    for unit, label in (("ms", "wall"), ("cpu_ms", "CPU ")):
        ours_own = w[f"ours_{unit}"] - w[f"our_floor_{unit}"]
        their_own = w[f"create_agent_{unit}"] - w[f"their_floor_{unit}"]
        print(f"  {label} react-graph {w[f'ours_{unit}']:.3f} - floor {w[f'our_floor_{unit}']:.3f} = "
              f"{ours_own:.3f} ms; create_agent {w[f'create_agent_{unit}']:.3f} - "
              f"floor {w[f'their_floor_{unit}']:.3f} = {their_own:.3f} ms")
    print(f"  own-code ratios side by side: wall {w['own_ms_ratio']:.2f}x, CPU {w['own_cpu_ms_ratio']:.2f}x   "
          "(goal <= 1.2x; our tool with its default 10 s timeout, which create_agent's tools do not have)")
    print(f"  like for like, our tool with no deadline (timeout_s=None: it runs on the node's thread, as create_agent's"
          f" tools have no timeout): react-graph {w['ours_no_deadline_ms']:.3f} ms; own-code ratios wall "
          f"{w['own_no_deadline_ms_ratio']:.2f}x, CPU {w['own_no_deadline_cpu_ms_ratio']:.2f}x   (goal <= 1.2x)")
    print("  of our own code, LangGraph's for our state, routes and Send (the floor for our whole shape) and "
          "the rest (our node bodies, both gateways, the model call):")
    for unit, label in (("ms", "wall"), ("cpu_ms", "CPU ")):
        shape = w[f"our_shape_{unit}"] - w[f"our_floor_{unit}"]
        rest = w[f"ours_{unit}"] - w[f"our_shape_{unit}"]
        their_own = w[f"create_agent_{unit}"] - w[f"their_floor_{unit}"]
        print(f"  {label} shape {shape:.3f} ms + the rest {rest:.3f} ms; the rest / create_agent's own "
              f"{rest / their_own:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--tracing-runs", type=int, default=100)
    parser.add_argument("--own-code-runs", type=int, default=200,
                        help="Rounds of the own-code measure (ours, create_agent and the floors); 0 skips it.")
    parser.add_argument("--only-tracing", action="store_true", help="Measure tracing only.")
    parser.add_argument("--first", choices=["ours", "create_agent"], default="ours",
                        help="Which graph runs first in each interleaved pair (default: ours).")
    parser.add_argument("--episodes", nargs=2, metavar=("GRAPH", "COUNT"),
                        help="Only run COUNT episodes of GRAPH (ours, create_agent, our_floor, their_floor, "
                             "our_shape) after a warm-up, for callgrind; see the docstring.")
    args = parser.parse_args()
    if args.episodes:
        episodes(args.episodes[0], int(args.episodes[1]))
        return
    if args.tracing_runs:
        t = tracing_overhead(args.tracing_runs)
        if t is None:
            print("OpenTelemetry tracing: not measured (pip install 'react-graph[otel]')")
        else:
            print(f"OpenTelemetry tracing, offline ReAct run, {args.tracing_runs} interleaved runs each (medians):")
            print(f"  off {t['off_ms']:.2f} ms · on, spans dropped {t['on_ms']:.2f} ms · ratio {t['ratio']:.2f}x"
                  f"   (goal <= 1.1x)")
            print(f"  in process CPU time: {t['off_cpu_ms']:.2f} ms vs {t['on_cpu_ms']:.2f} ms, "
                  f"ratio {t['cpu_ratio']:.2f}x")
    if args.only_tracing:
        return
    o = overhead(args.runs, args.first)
    print(f"Overhead per iteration ({args.runs} interleaved 5-tool episodes each, {args.first} first, medians):")
    print(f"  react-graph (think+act+observe+reflect): {o['ours_ms_per_iteration']:.3f} ms")
    print(f"  langchain create_agent (model+tools):    {o['create_agent_ms_per_iteration']:.3f} ms")
    print(f"  ratio: {o['ratio']:.2f}x   (LangGraph alone costs more for our shape: see the own-code ratio below)")
    print(f"  in process CPU time: {o['ours_cpu_ms_per_iteration']:.3f} ms vs "
          f"{o['create_agent_cpu_ms_per_iteration']:.3f} ms, ratio {o['cpu_ratio']:.2f}x")
    print(f"  ratios side by side: wall {o['ratio']:.2f}x, CPU {o['cpu_ratio']:.2f}x   ({args.first} first)")
    if args.own_code_runs:
        print_own_code(args.own_code_runs)
    c = asyncio.run(concurrent_sessions(args.sessions))
    print(f"{c['sessions']} concurrent sessions (ainvoke), model sleeps 50 ms per call, 2 calls each (medians of 3):")
    print(f"  wall {c['wall_s']:.3f} s; the same run with a zero-latency model (CPU floor): {c['cpu_floor_s']:.3f} s")
    print(f"  wall / (model time {c['naive_ideal_s']:.3f} s + CPU floor): {c['ratio']:.2f}x   (goal <= 1.3x)")
    print(f"  wall / model time alone: {c['naive_ratio']:.2f}x   (bounded below by the CPU floor on one event loop)")


if __name__ == "__main__":
    main()
