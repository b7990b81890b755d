"""`reactgraph serve`: stateless runs, the `messages` and `events` stream modes, cancel seen at once, and the
interrupts a client answers — through langgraph-sdk's client and `RemoteGraph`, against a real server and
workers on the test Redis."""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import Annotated, TypedDict

import pytest
from langgraph_sdk.errors import NotFoundError

from test_serve import Service, human, start_service, start_slow_run, stop, wait_for


@pytest.fixture(scope="module")
def served(redis_url: str, tmp_path_factory) -> Iterator[Service]:
    service = start_service(redis_url, tmp_path_factory.mktemp("runs"), SLOW_CITIES="广州", SLOW_S="60")
    yield service
    stop(service)


def _gone(call) -> bool:
    try:
        call()
    except NotFoundError:
        return True
    return False


# -- stateless runs -------------------------------------------------------------------------------------------

def test_a_stateless_wait_stream_and_background_run_answer_and_leave_no_thread_behind(served):
    client = served.client()
    created: list = []
    final = client.runs.wait(None, "react", input=human("计算 2 + 3 等于多少"), on_run_created=created.append)
    assert final["status"] == "answered" and "5" in final["final_answer"]
    assert created and created[0]["thread_id"] and created[0]["run_id"]
    assert _gone(lambda: client.threads.get(created[0]["thread_id"]))
    parts = list(client.runs.stream(None, "react", input=human("计算 10 * 7 等于多少"),
                                    stream_mode=["updates", "values"]))
    assert parts[0].event == "metadata" and {p.event for p in parts[1:]} == {"updates", "values"}
    assert "70" in [p.data for p in parts if p.event == "values"][-1]["final_answer"]
    run = client.runs.create(None, "react", input=human("计算 6 * 7 等于多少"))
    assert run["status"] == "pending" and run["kwargs"]["temporary"] is True
    wait_for(lambda: _gone(lambda: client.threads.get(run["thread_id"])), 60, "the stateless run's thread deleted")
    assert _gone(lambda: client.runs.get(run["thread_id"], run["run_id"]))
    assert run["thread_id"] not in [t["thread_id"] for t in client.threads.search(limit=1000)]


def test_a_stateless_run_kept_on_completion_leaves_its_thread_to_continue(served):
    client = served.client()
    run = client.runs.create(None, "react", input=human("计算 2 + 3 等于多少"), on_completion="keep")
    assert "5" in client.runs.join(run["thread_id"], run["run_id"])["final_answer"]
    assert client.runs.get(run["thread_id"], run["run_id"])["status"] == "success"
    final = client.runs.wait(run["thread_id"], "react", input=human("计算 10 * 7 等于多少"))
    assert [m["content"] for m in final["messages"] if m["type"] == "human"] == ["计算 2 + 3 等于多少",
                                                                                   "计算 10 * 7 等于多少"]


def test_remote_graph_runs_without_a_thread(served):
    from langgraph.pregel.remote import RemoteGraph

    remote = RemoteGraph("react", url=served.url, api_key=None)
    assert "5" in remote.invoke(human("计算 2 + 3 等于多少"))["final_answer"]
    nodes = [next(iter(chunk)) for chunk in remote.stream(human("计算 10 * 7 等于多少"), stream_mode="updates")]
    assert nodes[:2] == ["load_memory", "think"] and "finalize" in nodes


class Outer(TypedDict, total=False):
    messages: Annotated[list, operator.add]
    final_answer: str
    status: str
    seen: Annotated[list, operator.add]


def test_remote_graph_is_a_subgraph_node_of_a_local_graph(served):
    from langgraph.graph import END, START, StateGraph
    from langgraph.pregel.remote import RemoteGraph

    remote = RemoteGraph("react", url=served.url, api_key=None)
    graph = (StateGraph(Outer).add_node("remote", remote).add_node("after", lambda s: {"seen": [s["status"]]})
             .add_edge(START, "remote").add_edge("remote", "after").add_edge("after", END).compile())
    result = graph.invoke(human("计算 2 + 3 等于多少"))
    assert "5" in result["final_answer"] and result["seen"] == ["answered"]
    parts = list(graph.stream(human("计算 10 * 7 等于多少"), stream_mode="updates", subgraphs=True))
    inner = [next(iter(update)) for namespace, update in parts if namespace and namespace[0].startswith("remote")]
    assert "think" in inner and "finalize" in inner  # the remote graph's own steps, under the node's namespace
    assert [next(iter(update)) for namespace, update in parts if not namespace] == ["remote", "after"]


# -- messages and events stream modes --------------------------------------------------------------------------

def test_messages_mode_streams_each_messages_metadata_then_the_message(served):
    client = served.client()
    thread = client.threads.create()
    parts = list(client.runs.stream(thread["thread_id"], "react", input=human("计算 2 + 3 等于多少"),
                                    stream_mode="messages"))
    assert parts[0].event == "metadata"
    assert {p.event for p in parts[1:]} <= {"messages/metadata", "messages/partial", "messages/complete"}
    described: set[str] = set()
    for part in parts[1:]:
        if part.event == "messages/metadata":
            (message_id, about), = part.data.items()
            assert about["metadata"]["langgraph_node"] and message_id not in described
            described.add(message_id)
        else:
            (message,) = part.data
            assert message["id"] in described and message["type"] in ("ai", "tool", "human")
    answers = [p.data[0] for p in parts if p.event == "messages/complete" and p.data[0]["type"] == "ai"]
    assert answers and any(call["name"] == "calculator" for m in answers for call in m.get("tool_calls") or [])


def test_messages_reach_remote_graph_as_message_and_metadata(served):
    from langgraph.pregel.remote import RemoteGraph

    remote = RemoteGraph("react", url=served.url, api_key=None)
    parts = list(remote.stream(human("计算 2 + 3 等于多少"), stream_mode="messages"))
    assert parts and all(len(p) == 2 and "type" in p[0] and "langgraph_node" in p[1] for p in parts)


def test_events_mode_streams_the_runs_callback_events(served):
    client = served.client()
    parts = list(client.runs.stream(None, "react", input=human("计算 2 + 3 等于多少"),
                                    stream_mode=["events", "values"]))
    run_id = parts[0].data["run_id"]
    events = [p.data for p in parts if p.event == "events"]
    assert events[0]["event"] == "on_chain_start" and events[0]["run_id"] == run_id and events[0]["name"] == "react"
    assert events[-1]["event"] == "on_chain_end" and events[-1]["run_id"] == run_id
    kinds = {e["event"] for e in events}
    assert {"on_chain_stream", "on_chat_model_start", "on_chat_model_end"} <= kinds
    assert all({"event", "name", "run_id", "data", "tags", "metadata", "parent_ids"} <= e.keys() for e in events)
    assert "5" in [p.data for p in parts if p.event == "values"][-1]["final_answer"]


# -- cancel -------------------------------------------------------------------------------------------------

def test_a_cancelled_run_reads_interrupted_at_once_and_its_worker_still_stops_it(served):
    client = served.client()
    thread = client.threads.create()
    run = start_slow_run(client, thread["thread_id"])
    client.runs.cancel(thread["thread_id"], run["run_id"])
    assert client.runs.get(thread["thread_id"], run["run_id"])["status"] == "interrupted"
    assert client.runs.list(thread["thread_id"])[0]["status"] == "interrupted"
    client.runs.join(thread["thread_id"], run["run_id"])  # returns once the worker has stopped it
    wait_for(lambda: client.threads.get(thread["thread_id"])["status"] != "busy", 30, "the thread freed")
    assert client.runs.get(thread["thread_id"], run["run_id"])["status"] == "interrupted"
    assert "5" in client.runs.wait(thread["thread_id"], "react", input=human("计算 2 + 3 等于多少"))["final_answer"]


def test_cancel_with_wait_returns_once_the_worker_has_stopped_the_run(served):
    client = served.client()
    thread = client.threads.create()
    run = start_slow_run(client, thread["thread_id"])
    answer = client.runs.cancel(thread["thread_id"], run["run_id"], wait=True)
    assert isinstance(answer, dict)
    assert client.threads.get(thread["thread_id"])["status"] != "busy"  # the worker is done with the thread
    assert client.runs.get(thread["thread_id"], run["run_id"])["status"] == "interrupted"


def test_a_run_cancelled_with_rollback_is_gone_at_once(served):
    client = served.client()
    thread = client.threads.create()
    run = start_slow_run(client, thread["thread_id"])
    client.runs.cancel(thread["thread_id"], run["run_id"], action="rollback")
    assert _gone(lambda: client.runs.get(thread["thread_id"], run["run_id"]))
    assert run["run_id"] not in [r["run_id"] for r in client.runs.list(thread["thread_id"])]
    assert client.threads.get(thread["thread_id"])["status"] == "idle"  # at once, as it is once rolled back
    # what it wrote goes once its worker has stopped it (within a moment; `cancel(wait=True)` waits for that)
    wait_for(lambda: not (client.threads.get_state(thread["thread_id"])["values"] or {}).get("messages"), 30,
             "the run's checkpoints deleted")


# -- interrupts -----------------------------------------------------------------------------------------------

def test_an_interrupt_is_in_the_state_its_task_and_the_thread_with_its_id(served):
    client = served.client()
    thread = client.threads.create()
    paused = client.runs.wait(thread["thread_id"], "react", input=human("Fetch https://example.com/page"))
    (pause,) = paused["__interrupt__"]
    assert pause.keys() == {"value", "id", "response_schema"} and pause["id"] and pause["value"]
    asked = {"id": pause["id"], "value": pause["value"],  # the schema of the answer, if the graph gave one
             **({"response_schema": pause["response_schema"]} if pause["response_schema"] else {})}
    state = client.threads.get_state(thread["thread_id"])
    assert state["interrupts"] == [asked]
    (task,) = [t for t in state["tasks"] if t["interrupts"]]
    assert task["interrupts"] == [asked] and task["path"] and task["name"] == "approve"
    assert client.threads.get(thread["thread_id"])["interrupts"] == {task["id"]: [asked]}
