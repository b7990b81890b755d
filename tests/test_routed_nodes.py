"""A node that runs its route itself (nodes/driver.py `add_routed_node`) sends the graph where a conditional edge
after it would, its route having seen the same fresh state, and is drawn the same."""

from __future__ import annotations

import asyncio
import copy
import operator
from typing import Annotated, Any, NotRequired

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.channels import EphemeralValue
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Overwrite, Send
from typing_extensions import TypedDict

from reactgraph.nodes.driver import add_routed_node, edge


class State(TypedDict):
    messages: Annotated[list, add_messages]
    total: NotRequired[Annotated[int, operator.add]]
    steps: NotRequired[Annotated[list, operator.add]]
    flag: NotRequired[Annotated[str | None, EphemeralValue]]  # cleared by any step that does not write it
    note: NotRequired[str]


def build(routed: bool, seen: list[dict[str, Any]]):
    """prepare → work ⇄ (one `Send` per round to `side`, or `again`) … → END; work's route by a conditional edge,
    or run by work itself. work returns a list: its update and a Command's (as observe does with tools' Commands)."""

    def prepare(state: State) -> dict[str, Any]:
        return {"flag": "set by prepare", "steps": Overwrite(["start"])}

    def work(state: State, runtime: Any) -> list[Any]:
        n = state.get("total", 0)
        return [{"messages": [AIMessage(f"round {n}", id=f"a{n}")], "total": 1, "steps": [f"work {n}"]},
                Command(update={"note": f"note {n}"})]

    def route(state: State, runtime: Any) -> Any:
        seen.append(copy.deepcopy(dict(state)))
        if state["total"] >= 4:
            return "done"
        return [Send("side", {"n": state["total"]})] if state["total"] % 2 else "again"

    builder = StateGraph(State)
    builder.add_node("prepare", prepare)
    ends = {"again": "again", "done": END}
    if routed:
        add_routed_node(builder, "work", work, route, ends)
    else:
        builder.add_node("work", work)
        builder.add_conditional_edges("work", edge(route), ends)
    builder.add_node("side", lambda task: {"steps": [f"side {task['n']}"]})
    builder.add_node("again", lambda state: {"steps": ["again"]})
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "work")
    builder.add_edge("side", "work")
    builder.add_edge("again", "work")
    return builder.compile(checkpointer=InMemorySaver())


def run(routed: bool, use_async: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any], list[Any]]:
    seen: list[dict[str, Any]] = []
    graph = build(routed, seen)
    config = {"configurable": {"thread_id": "t"}}
    question = {"messages": [HumanMessage("go", id="h")]}
    if use_async:
        async def stream() -> list[Any]:
            return [chunk async for chunk in graph.astream(question, config, stream_mode="updates")]
        updates = asyncio.run(stream())
    else:
        updates = list(graph.stream(question, config, stream_mode="updates"))
    return seen, graph.get_state(config).values, updates


@pytest.mark.parametrize("use_async", [False, True])
def test_a_routed_node_goes_where_its_conditional_edge_would_having_seen_the_same_state(use_async):
    by_edge, by_node = run(routed=False, use_async=use_async), run(routed=True, use_async=use_async)
    seen, final, updates = by_node
    assert seen == by_edge[0] and final == by_edge[1] and updates == by_edge[2]
    # the route saw the node's writes through the channels' reducers, and the ephemeral flag cleared
    assert [s["total"] for s in seen] == [1, 2, 3, 4] and all("flag" not in s for s in seen)
    assert seen[0]["steps"] == ["start", "work 0"] and seen[0]["note"] == "note 0"
    assert [m.id for m in seen[1]["messages"]] == ["h", "a0", "a1"]
    assert final["steps"] == ["start", "work 0", "side 1", "work 1", "again", "work 2", "side 3", "work 3"]


def test_a_routed_node_is_drawn_as_with_its_conditional_edge():
    def edges(routed: bool) -> set[tuple[str, str, bool, Any]]:
        return {(e.source, e.target, e.conditional, e.data) for e in build(routed, []).get_graph().edges}

    drawn = edges(routed=True)
    assert ("work", "again", True, None) in drawn and ("work", "__end__", True, "done") in drawn
    assert drawn == edges(routed=False)
