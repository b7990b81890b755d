"""LangGraph's own cost of our loop's shape vs create_agent's, with nodes that do nothing, side by side.

`benchmarks/overhead.py` compares react-graph's iteration (think, act, observe, reflect: four nodes) with
`create_agent`'s (model, tools: two). Part of the gap is no code of ours at all: LangGraph runs each node as a
superstep (a task, its writes applied, a checkpoint saved). This script measures that floor: two graphs on the
same message state and `InMemorySaver`, whose nodes only append a message or pass, one looping through four
nodes per iteration and one through two, five iterations each, runs interleaved. The ratio it prints is what the
four-node loop costs before any node of ours runs; overhead.py's ratio cannot go below it.

    python benchmarks/graph_floor.py [--runs 300]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

ITERATIONS = 5


def _tool_rounds(state: MessagesState) -> int:
    return sum(isinstance(m, ToolMessage) for m in state["messages"])


def _model(state: MessagesState) -> dict[str, Any]:
    n = _tool_rounds(state)
    if n < ITERATIONS:
        return {"messages": [AIMessage("", tool_calls=[{"name": "echo", "args": {"text": str(n)}, "id": f"c{n}"}])]}
    return {"messages": [AIMessage("done")]}


def _tools(state: MessagesState) -> dict[str, Any]:
    call = state["messages"][-1].tool_calls[0]  # type: ignore[attr-defined]
    return {"messages": [ToolMessage(call["args"]["text"], tool_call_id=call["id"])]}


def _pass(state: MessagesState) -> dict[str, Any]:
    return {}


def _route(state: MessagesState) -> str:
    return "tools" if state["messages"][-1].tool_calls else END  # type: ignore[attr-defined]


def two_node_loop():
    """create_agent's shape: model ⇄ tools."""
    graph = StateGraph(MessagesState)
    graph.add_node("model", _model)
    graph.add_node("tools", _tools)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", _route, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=InMemorySaver())


def four_node_loop(*, turn_nodes: bool = False):
    """react-graph's shape: think → act → observe → reflect → think. With `turn_nodes`, also the turn's own
    nodes around the loop, as our ReAct graph has them: load_memory before it, finalize and save_memory after."""
    graph = StateGraph(MessagesState)
    graph.add_node("think", _model)
    graph.add_node("tools", _tools)  # named as in _route; this is the act node
    graph.add_node("observe", _pass)
    graph.add_node("reflect", _pass)
    graph.add_edge("tools", "observe")
    graph.add_edge("observe", "reflect")
    graph.add_edge("reflect", "think")
    if not turn_nodes:
        graph.add_edge(START, "think")
        graph.add_conditional_edges("think", _route, ["tools", END])
        return graph.compile(checkpointer=InMemorySaver())
    for name in ("load_memory", "finalize", "save_memory"):
        graph.add_node(name, _pass)
    graph.add_edge(START, "load_memory")
    graph.add_edge("load_memory", "think")
    graph.add_conditional_edges("think", lambda state: "tools" if _route(state) == "tools" else "finalize",
                                ["tools", "finalize"])
    graph.add_edge("finalize", "save_memory")
    graph.add_edge("save_memory", END)
    return graph.compile(checkpointer=InMemorySaver())


def react_shape_loop():
    """LangGraph's floor for the ReAct graph's whole shape, not only its four nodes: its state (every field of
    `AgentState`, each a channel), its nodes and edges, its three routes (think, observe and reflect each return
    their update with a `Command` to where the graph goes next, as ours do: nodes/driver.py `add_routed_node`) and
    one `Send` per tool call to act; the bodies and routes are trivial and write the channels ours write, no more.
    The fresh state our routes read (the node's writes through the channels' reducers) is our nodes' work, so not
    here: a route here reads only its node's update."""
    from langgraph.types import Overwrite, Send

    from reactgraph.graph import AgentState, Context

    turn = {"iteration": 0, "steps": Overwrite([]), "reflection": None, "final_answer": None, "status": None,
            "coverage": None, "structured_response": None, "usage": Overwrite({}), "stop_reason": None,
            "budget": None}
    nodes = {
        "load_memory": lambda state: {"turn_id": state["messages"][-1].id, **turn},
        "think": lambda state: {**_model(state), "iteration": state.get("iteration", 0) + 1,
                                "usage": {"model_calls": 1}},
        "approve": _pass,
        "act": lambda task: {"messages": [ToolMessage(task["call"]["args"]["text"], tool_call_id=task["call"]["id"],
                                                      name=task["call"]["name"])], "usage": {"tool_calls": 1}},
        "observe": lambda state: {"steps": [{"step": state.get("iteration", 0), "node": "act"}]},
        "reflect": lambda state: {"reflection": {"note": ""},
                                  "steps": [{"step": state.get("iteration", 0), "node": "reflect"}]},
        "finalize": lambda state: {"final_answer": "done", "status": "answered"},
        "save_memory": _pass,
    }
    routes = {  # node: (its route over its update, the route's destinations)
        "think": (lambda update: [Send("act", {"call": call}) for call in update["messages"][-1].tool_calls]
                  or "finalize", ("act", "approve", "finalize")),
        "observe": (lambda update: "reflect", ("reflect", "think", "finalize")),
        "reflect": (lambda update: "think", ("think", "finalize")),
    }
    graph = StateGraph(AgentState, context_schema=Context)
    for name, body in nodes.items():
        if name in routes:
            graph.add_node(name, _routed(body, routes[name][0]), destinations=routes[name][1])
        else:
            graph.add_node(name, body)
    graph.add_edge(START, "load_memory")
    graph.add_edge("load_memory", "think")
    graph.add_conditional_edges("approve", lambda state: "observe", ["act", "observe"])
    graph.add_edge("act", "observe")
    graph.add_edge("finalize", "save_memory")
    graph.add_edge("save_memory", END)
    return graph.compile(checkpointer=InMemorySaver())


def _routed(body, route):
    """A node of `body` that returns its update with a Command to where `route` of the update leads."""
    from langgraph.types import Command

    def node(state):
        update = body(state)
        return Command(update=update, goto=route(update))
    return node


def _episode(graph, n: int | str) -> tuple[float, float]:
    started, cpu = time.perf_counter(), time.process_time()
    graph.invoke({"messages": [HumanMessage("go")]}, config={"configurable": {"thread_id": f"t{n}"}})
    return time.perf_counter() - started, time.process_time() - cpu


def floor(runs: int) -> dict[str, float]:
    four, two = four_node_loop(), two_node_loop()
    for n in range(5):
        _episode(four, f"w{n}"), _episode(two, f"w{n}")
    four_t, two_t = [], []
    for n in range(runs):
        four_t.append(_episode(four, n))
        two_t.append(_episode(two, n))
    med = {name: [statistics.median(t[i] for t in ts) * 1000 / ITERATIONS for i in (0, 1)]
           for name, ts in (("four", four_t), ("two", two_t))}
    return {"four_ms": med["four"][0], "two_ms": med["two"][0], "ratio": med["four"][0] / med["two"][0],
            "four_cpu_ms": med["four"][1], "two_cpu_ms": med["two"][1], "cpu_ratio": med["four"][1] / med["two"][1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()
    f = floor(args.runs)
    print(f"LangGraph alone, no-op nodes, {args.runs} interleaved {ITERATIONS}-iteration episodes each (medians):")
    print(f"  four nodes per iteration (our loop's shape): {f['four_ms']:.3f} ms, CPU {f['four_cpu_ms']:.3f} ms")
    print(f"  two nodes per iteration (create_agent's):    {f['two_ms']:.3f} ms, CPU {f['two_cpu_ms']:.3f} ms")
    print(f"  ratios side by side: wall {f['ratio']:.2f}x, CPU {f['cpu_ratio']:.2f}x   "
          "(the floor under overhead.py's ratio)")


if __name__ == "__main__":
    main()
