"""LangGraph's DeltaChannels on the Redis savers: `get_delta_channel_history` in one script call, checkpoints that
store writes rather than whole values, sessions written before that go on, and a damaged chain named.

The graph here is an agent loop of LangGraph's own parts (a scripted model node, a tool node) whose growing
channels are DeltaChannels with a small snapshot frequency, so a few turns cross several snapshots.
LangGraph's conformance suite (langgraph-checkpoint-conformance 0.0.2) has no delta-channel capability yet, so
the references are LangGraph's own: `BaseCheckpointSaver.get_delta_channel_history`, the walk every saver
inherits (one `get_tuple` per ancestor), and `InMemorySaver` running the same graph.
"""

from __future__ import annotations

import asyncio
import operator
import random
import uuid
from typing import Annotated, Any, TypedDict

import pytest
import redis
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import _messages_delta_reducer, add_messages

from reactgraph.memory import AsyncRedisSaver, RedisSaver, UnreadableCheckpoint
from reactgraph.memory.redis_checkpoint import layout
from reactgraph.memory.redis_checkpoint.core import PAGE_SIZE
from support.redis_traffic import counting_connection_class


def extend(records: list | None, writes: list) -> list:
    return [*(records or []), *(r for w in writes for r in w)]


class DeltaState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], DeltaChannel(_messages_delta_reducer, snapshot_frequency=4)]
    steps: Annotated[list[str], DeltaChannel(extend, snapshot_frequency=4)]


class WholeState(TypedDict, total=False):
    """The same channels as sessions stored them before delta channels: whole values at every checkpoint."""

    messages: Annotated[list[AnyMessage], add_messages]
    steps: Annotated[list[str], operator.add]


def model(state: dict) -> dict:
    """Two lookups per question, then an answer; past six messages the oldest two are removed (a window)."""
    messages = state["messages"]
    asked = max(i for i, m in enumerate(messages) if m.type == "human")
    done = sum(m.type == "tool" for m in messages[asked:])
    trim = [RemoveMessage(id=m.id) for m in messages[:2]] if len(messages) > 6 else []
    if done < 2:
        call = {"name": "lookup", "args": {"q": f"{messages[asked].text}:{done}"}, "id": f"c{uuid.uuid4().hex[:8]}"}
        return {"messages": [*trim, AIMessage("", tool_calls=[call])], "steps": [f"think {done}"]}
    return {"messages": [*trim, AIMessage(f"answer to {messages[asked].text}")], "steps": ["answer"]}


def tools(state: dict) -> dict:
    call = state["messages"][-1].tool_calls[0]
    return {"messages": [ToolMessage(f"found {call['args']['q']}", tool_call_id=call["id"])], "steps": ["act"]}


def agent(schema: type, saver: Any):
    graph = StateGraph(schema)
    graph.add_node("model", model)
    graph.add_node("tools", tools)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", lambda s: "tools" if s["messages"][-1].tool_calls else END,
                                ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=saver)


QUESTIONS = ["q1", "q2", "q3", "q4", "q5"]


def session(name: str = "s") -> dict[str, Any]:
    return {"configurable": {"thread_id": f"{name}-{uuid.uuid4().hex[:6]}"}}


def ask_all(app, config, questions) -> None:
    for question in questions:
        app.invoke({"messages": [HumanMessage(question, id=f"h-{question}")]}, config)


def texts(values: dict[str, Any]) -> tuple:
    return [(m.type, m.text) for m in values.get("messages", [])], values.get("steps", [])


# The default pages; pages so small that nearly every walk goes through a few of them.
PAGE_SIZES = pytest.mark.parametrize("page_size", [PAGE_SIZE, 2], ids=["pages of 32", "pages of 2"])


@PAGE_SIZES
def test_every_checkpoint_holds_what_the_in_memory_saver_holds_and_few_store_whole_values(redis_url, redis_prefix,
                                                                                          page_size):
    config = session()
    reference = agent(DeltaState, InMemorySaver())
    ask_all(reference, config, QUESTIONS)
    with RedisSaver.from_url(redis_url, prefix=redis_prefix, page_size=page_size) as saver:
        app = agent(DeltaState, saver)
        ask_all(app, config, QUESTIONS)
        ours = [texts(s.values) for s in app.get_state_history(config)]
        stored = [t.checkpoint["channel_values"] for t in saver.list(config)]
    assert ours == [texts(s.values) for s in reference.get_state_history(config)] and len(ours) > 20
    assert 0 < sum("messages" in v for v in stored) < len(stored) / 2  # snapshots now and then, writes between


@PAGE_SIZES
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_one_script_walk_returns_what_langgraphs_own_walk_returns(redis_url, redis_prefix, kind, page_size):
    config = session()
    asked = (["messages"], ["steps"], ["messages", "steps"], [])

    async def pairs_of(saver) -> list[tuple]:
        out = []
        for tup in [t async for t in saver.alist(config)]:
            for channels in asked:
                out.append((await saver.aget_delta_channel_history(config=tup.config, channels=channels),
                            await BaseCheckpointSaver.aget_delta_channel_history(saver, config=tup.config,
                                                                                 channels=channels)))
        return out

    if kind == "sync":
        with RedisSaver.from_url(redis_url, prefix=redis_prefix, page_size=page_size) as saver:
            ask_all(agent(DeltaState, saver), config, QUESTIONS[:3])
            pairs = [(saver.get_delta_channel_history(config=t.config, channels=channels),
                      BaseCheckpointSaver.get_delta_channel_history(saver, config=t.config, channels=channels))
                     for t in saver.list(config) for channels in asked]
    else:
        async def run() -> list[tuple]:
            async with AsyncRedisSaver.from_url(redis_url, prefix=redis_prefix, page_size=page_size) as saver:
                app = agent(DeltaState, saver)
                for question in QUESTIONS[:3]:
                    await app.ainvoke({"messages": [HumanMessage(question)]}, config)
                return await pairs_of(saver)
        pairs = asyncio.run(run())
    assert pairs and all(mine == theirs for mine, theirs in pairs)
    assert any(mine.get("messages", {}).get("writes") for mine, _ in pairs)
    assert any("seed" in mine.get("messages", {}) for mine, _ in pairs)


@pytest.mark.parametrize("page_size", [PAGE_SIZE, 8], ids=["pages of 32", "pages of 8"])
def test_a_rebuild_is_one_round_trip_however_far_back_its_snapshot_is(redis_url, redis_prefix, page_size):
    counting = counting_connection_class()
    config = session()
    with RedisSaver.from_url(redis_url, prefix=redis_prefix, connection_class=counting, page_size=page_size) as saver:
        app = agent(DeltaState, saver)
        ask_all(app, config, QUESTIONS)
        reads = []
        for _ in range(3):  # reading a state: the checkpoint and its delta channels' history in one round trip
            before = counting.sends
            values = app.get_state(config).values
            reads.append(counting.sends - before)
        assert reads == [1, 1, 1] and values["messages"][-1].text == "answer to q5"
        walks = []
        for tup in saver.list(config):
            before = counting.sends
            history = saver.get_delta_channel_history(config=tup.config, channels=["messages", "steps"])
            walks.append((counting.sends - before, len(history["messages"]["writes"])))
    # one round trip each (none for the newest, whose history the get_state before fetched)
    assert max(sends for sends, _ in walks) == 1 and max(writes for _, writes in walks) >= 3


def test_messages_keep_their_ids_however_often_and_wherever_they_are_rebuilt(redis_url, redis_prefix):
    config = session()
    with RedisSaver.from_url(redis_url, prefix=redis_prefix) as saver:
        app = agent(DeltaState, saver)
        # Input without ids, as an API client sends it: a dict and a (role, text) pair.
        app.invoke({"messages": [{"role": "user", "content": "q1"}]}, config)
        live = app.invoke({"messages": [("user", "q2")]}, config)
        first = [m.id for m in app.get_state(config).values["messages"]]
        again = [m.id for m in app.get_state(config).values["messages"]]
        with RedisSaver.from_url(redis_url, prefix=redis_prefix) as other:  # another process's view
            elsewhere = [m.id for m in agent(DeltaState, other).get_state(config).values["messages"]]
    assert all(first) and len(set(first)) == len(first) and first == again == elsewhere
    assert [m.id for m in live["messages"]] == first  # the ids the run itself returned


class OldVersions(RedisSaver):
    """The saver as it was: a random float as the versions' tail (as LangGraph's API server still writes them)."""

    def get_next_version(self, current, channel=None):
        counter = 0 if current is None else int(str(current).split(".")[0])
        return f"{counter + 1:032}.{random.random():016}"


def test_a_session_of_whole_values_and_other_version_tails_goes_on_under_delta_channels(redis_url, redis_prefix):
    config = session("old")
    with OldVersions.from_url(redis_url, prefix=redis_prefix, page_size=0) as before:  # as sessions were stored
        ask_all(agent(WholeState, before), config, QUESTIONS[:2])
        written = texts(agent(WholeState, before).get_state(config).values)
    with RedisSaver.from_url(redis_url, prefix=redis_prefix, page_size=4) as saver:
        app = agent(DeltaState, saver)
        assert texts(app.get_state(config).values) == written
        ask_all(app, config, QUESTIONS[2:])
        history = list(app.get_state_history(config))
    reference = agent(DeltaState, InMemorySaver())
    ask_all(reference, config, QUESTIONS)
    assert texts(history[0].values) == texts(reference.get_state(config).values)
    assert all(h.values.get("steps") for h in history[:-2])  # every checkpoint since the first rebuilds


def test_a_looping_parent_chain_is_one_clear_error_not_a_state_rebuilt_from_part_of_it(redis_url, redis_prefix):
    config = session("loop")
    with RedisSaver.from_url(redis_url, prefix=redis_prefix) as saver:
        ask_all(agent(DeltaState, saver), config, QUESTIONS[:2])
        ids = [t.config["configurable"]["checkpoint_id"] for t in saver.list(config)]
        client = redis.Redis.from_url(redis_url)
        vkey = layout.thread_base(saver.prefix, config["configurable"]["thread_id"]) + "v:"
        links = client.hget(vkey, ids[-1]).split(b"\0")  # the oldest checkpoint's parent made the newest
        client.hset(vkey, ids[-1], b"\0".join([ids[0].encode(), *links[1:]]))
        with pytest.raises(UnreadableCheckpoint) as caught:
            saver.get_delta_channel_history(config=saver.get_tuple(config).config, channels=["never-stored"])
    assert "loops" in str(caught.value) and "\n" not in str(caught.value)
