"""`reactgraph serve`: every option langgraph-sdk sends is honoured or refused naming it — `after_seconds`,
`durability`, `strict_resume`, the run config's keys; `webhook`, `feedback_keys` and LangSmith tracing refused —
through langgraph-sdk's client against a real server and workers on the test Redis."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime

import httpx
import pytest
from langgraph_sdk.errors import APIStatusError, ConflictError

from test_serve import Service, human, start_service, stop, wait_for


@pytest.fixture(scope="module")
def served(redis_url: str, tmp_path_factory) -> Iterator[Service]:
    service = start_service(redis_url, tmp_path_factory.mktemp("params"), SLOW_CITIES="广州", SLOW_S="60")
    yield service
    stop(service)


def _refused(call) -> tuple[int, str]:
    with pytest.raises((APIStatusError, httpx.HTTPStatusError)) as caught:  # a wait raises httpx's own
        call()
    return caught.value.response.status_code, caught.value.response.json()["detail"]


def test_a_run_with_after_seconds_starts_no_earlier_and_a_later_run_is_not_held_behind_it(served):
    client = served.client()
    thread = client.threads.create()["thread_id"]
    asked = time.time()
    run = client.runs.create(thread, "react", input=human("计算 2 + 3 等于多少"), after_seconds=3)
    assert run["status"] == "pending" and run["kwargs"]["after_seconds"] == 3
    assert datetime.fromisoformat(run["created_at"]).timestamp() >= asked + 2.5  # as langgraph-api has it
    other = client.threads.create()["thread_id"]
    assert "5" in client.runs.wait(other, "react", input=human("计算 2 + 3 等于多少"))["final_answer"]
    assert client.runs.get(thread, run["run_id"])["status"] == "pending"  # another thread's run did not wait
    assert "5" in client.runs.join(thread, run["run_id"])["final_answer"]
    assert time.time() - asked >= 3
    assert client.runs.get(thread, run["run_id"])["status"] == "success"


def test_a_run_cancelled_while_it_waits_for_its_time_never_starts(served):
    client = served.client()
    thread = client.threads.create()["thread_id"]
    run = client.runs.create(thread, "react", input=human("计算 2 + 3 等于多少"), after_seconds=2)
    client.runs.cancel(thread, run["run_id"])
    assert client.runs.get(thread, run["run_id"])["status"] == "interrupted"
    time.sleep(3)
    assert client.runs.get(thread, run["run_id"])["status"] == "interrupted"
    assert client.threads.get_state(thread)["values"] in ({}, None)  # the graph never ran
    gone = client.runs.create(thread, "react", input=human("计算 2 + 3 等于多少"), after_seconds=2)
    with pytest.raises(ConflictError):  # `reject` sees a run waiting for its time as it sees a queued one
        client.runs.create(thread, "react", input=human("计算 2 + 3 等于多少"), multitask_strategy="reject")
    client.runs.cancel(thread, gone["run_id"], action="rollback")
    assert gone["run_id"] not in [r["run_id"] for r in client.runs.list(thread)]


def test_deleting_an_assistant_cancels_its_runs_waiting_for_their_time(served):
    client = served.client()
    assistant = client.assistants.create("react")
    thread = client.threads.create()["thread_id"]
    run = client.runs.create(thread, assistant["assistant_id"], input=human("计算 2 + 3 等于多少"), after_seconds=30)
    client.assistants.delete(assistant["assistant_id"])
    assert client.runs.get(thread, run["run_id"])["status"] == "interrupted"


@pytest.mark.parametrize("after", [-1, 10**9, "soon", True])
def test_a_bad_after_seconds_is_a_422_naming_it(served, after):
    client = served.client()
    status, detail = _refused(lambda: client.runs.create(None, "react", input=human("hi"), after_seconds=after))
    assert status == 422 and "after_seconds" in detail


def _checkpoints(client, thread: str) -> int:
    return len(client.threads.get_history(thread, limit=1000))


def test_durability_exit_writes_only_the_final_checkpoint_and_sync_as_many_as_async(served):
    client = served.client()
    counts = {}
    for durability in ("async", "sync", "exit"):
        thread = client.threads.create()["thread_id"]
        final = client.runs.wait(thread, "react", input=human("计算 2 + 3 等于多少"), durability=durability)
        assert "5" in final["final_answer"]
        run = client.runs.list(thread)[0]
        assert run["kwargs"]["durability"] == durability
        counts[durability] = _checkpoints(client, thread)
    assert counts["exit"] < counts["async"] == counts["sync"]
    assert counts["exit"] == 1, counts  # the final one only
    thread = client.threads.create()["thread_id"]
    with pytest.warns(DeprecationWarning):  # the SDK's: the older flag still reaches the server
        client.runs.wait(thread, "react", input=human("计算 2 + 3 等于多少"), checkpoint_during=False)
    assert client.runs.list(thread)[0]["kwargs"]["durability"] == "exit"
    assert _checkpoints(client, thread) == counts["exit"]
    status, detail = _refused(lambda: client.runs.create(thread, "react", input=human("hi"), durability="never"))
    assert status == 422 and "durability" in detail


@pytest.mark.parametrize(("option", "value", "name"), [
    ("webhook", "https://example.com/hook", "webhook"),
    ("feedback_keys", ["correct"], "feedback_keys"),  # runs.stream's only
    ("langsmith_tracing", {"project_name": "p"}, "langsmith_tracer"),
])
def test_what_the_service_does_not_do_is_refused_with_a_422_naming_it(served, option, value, name):
    client = served.client()
    thread = client.threads.create()["thread_id"]
    calls = [lambda: list(client.runs.stream(thread, "react", input=human("hi"), **{option: value})),
             lambda: list(client.runs.stream(None, "react", input=human("hi"), **{option: value}))]
    if option != "feedback_keys":
        calls += [lambda: client.runs.create(thread, "react", input=human("hi"), **{option: value}),
                  lambda: client.runs.wait(None, "react", input=human("hi"), **{option: value})]
    for call in calls:
        status, detail = _refused(call)
        assert status == 422 and name in detail
    assert client.runs.list(thread) == []


def test_run_config_tags_and_metadata_reach_the_graph_and_other_keys_are_refused(served):
    client = served.client()
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "react", input=human("计算 2 + 3 等于多少"),
                     config={"tags": ["mine"], "metadata": {"origin": "test"}, "run_name": "named"})
    assert client.threads.get_history(thread, limit=1)[0]["metadata"]["origin"] == "test"
    status, detail = _refused(lambda: client.runs.create(thread, "react", input=human("hi"),
                                                         config={"callbacks": "x"}))
    assert status == 422 and "callbacks" in detail


def test_strict_resume_fails_a_resume_that_answers_no_waiting_interrupt_and_leaves_the_thread(served):
    client = served.client()
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "react", input=human("计算 2 + 3 等于多少"))
    before = client.threads.get_state(thread)["checkpoint"]["checkpoint_id"]
    answer = client.runs.wait(thread, "react", command={"resume": {"decisions": []}}, strict_resume=True,
                            raise_error=False)
    assert answer["__error__"]["error"] == "UnknownInterruptError"
    assert client.threads.get_state(thread)["checkpoint"]["checkpoint_id"] == before
    wait_for(lambda: client.runs.list(thread)[0]["status"] == "error", 10, "the strict resume ends `error`")


# -- threads --------------------------------------------------------------------------------------------------

_SUPERSTEPS = [{"updates": [{"values": {"messages": [{"role": "human", "content": "北京天气怎么样？"}]},
                             "as_node": "finalize"}]},
               {"updates": [{"values": {"messages": [{"role": "ai", "content": "晴。"}], "final_answer": "晴。"},
                             "as_node": "finalize"}]}]


def test_a_thread_created_with_supersteps_starts_from_their_updates(served):
    client = served.client()
    thread = client.threads.create(supersteps=_SUPERSTEPS, graph_id="react")
    assert [m["content"] for m in thread["values"]["messages"]] == ["北京天气怎么样？", "晴。"]
    assert client.threads.get(thread["thread_id"])["values"]["final_answer"] == "晴。"
    history = client.threads.get_history(thread["thread_id"])
    assert len(history) >= 2 and history[0]["values"]["final_answer"] == "晴。"
    final = client.runs.wait(thread["thread_id"], "react", input=human("计算 2 + 3 等于多少"))
    assert [m["content"] for m in final["messages"] if m["type"] == "human"][:1] == ["北京天气怎么样？"]


def test_supersteps_langgraph_refuses_are_a_422_and_leave_no_thread(served):
    client = served.client()
    bad = [{"updates": [{"values": {"messages": []}, "as_node": "no_such_node"}]}]
    status, detail = _refused(lambda: client.threads.create(thread_id="0" * 8 + "-0000-4000-8000-" + "0" * 12,
                                                            supersteps=bad))
    assert status == 422 and "supersteps" in detail
    status, _ = _refused(lambda: client.threads.get("0" * 8 + "-0000-4000-8000-" + "0" * 12))
    assert status == 404


def test_search_extracts_named_paths_and_filters_by_values(served):
    client = served.client()
    tag = f"extract-{time.time_ns()}"
    thread = client.threads.create(supersteps=_SUPERSTEPS, metadata={"tag": tag})["thread_id"]
    client.threads.create(metadata={"tag": tag})
    found = client.threads.search(metadata={"tag": tag}, values={"final_answer": "晴。"},
                                  extract={"last": "values.messages[-1].content", "tag": "metadata.tag",
                                           "none": "values.nothing.here"})
    assert [t["thread_id"] for t in found] == [thread]
    assert found[0]["extracted"] == {"last": "晴。", "tag": tag, "none": None}
    assert client.threads.count(metadata={"tag": tag}, values={"final_answer": "晴。"}) == 1
    selected = client.threads.search(metadata={"tag": tag}, select=["thread_id"],
                                     extract={"last": "values.final_answer"})
    assert sorted(key for t in selected for key in t) == ["extracted", "extracted", "thread_id", "thread_id"]
    for extract, words in (({"status": "metadata.x"}, "thread field"), ({"x": "secret.path"}, "must start"),
                           ({f"k{i}": "values.a" for i in range(11)}, "at most")):
        status, detail = _refused(lambda extract=extract: client.threads.search(extract=extract))
        assert status == 422 and words in detail


def test_thread_ttl_and_include_are_refused_and_return_minimal_is_a_204(served):
    client = served.client()
    for call in (lambda: client.threads.create(ttl=60),
                 lambda: client.threads.update(client.threads.create()["thread_id"], metadata={}, ttl=60)):
        status, detail = _refused(call)
        assert status == 422 and "ttl" in detail
    thread = client.threads.create()["thread_id"]
    status, detail = _refused(lambda: client.threads.get(thread, include=["ttl"]))
    assert status == 422 and "include" in detail
    assert client.threads.update(thread, metadata={"a": 1}, return_minimal=True) is None
    assert client.threads.get(thread)["metadata"]["a"] == 1


# -- a thread's streams ---------------------------------------------------------------------------------------

def _collect(parts, into: list, until) -> None:
    for part in parts:
        into.append(part)
        if until(into):
            return


def test_join_stream_of_a_thread_carries_each_runs_events_and_its_end_and_resumes_after_an_id(served):
    import threading

    client = served.client()
    thread = client.threads.create()["thread_id"]
    seen: list = []
    ends = lambda parts: sum(p.event == "metadata" and p.data.get("status") == "run_done" for p in parts) >= 2  # noqa: E731
    reader = threading.Thread(target=_collect, args=(client.threads.join_stream(thread), seen, ends), daemon=True)
    reader.start()
    time.sleep(1)  # the join reads from now on, as langgraph-api's does
    first = client.runs.create(thread, "react", input=human("计算 2 + 3 等于多少"), stream_mode=["values"])
    second = client.runs.create(thread, "react", input=human("计算 10 * 7 等于多少"), stream_mode=["updates"])
    reader.join(90)
    assert ends(seen), [p.event for p in seen]
    runs = [p.data["run_id"] for p in seen if p.event == "metadata"]
    assert runs == [first["run_id"], first["run_id"], second["run_id"], second["run_id"]]  # start, end; start, end
    events = [p.event for p in seen]
    assert "values" in events[:events.index("updates")] and "values" not in events[events.index("updates"):]
    ids = [p.id for p in seen]
    assert all(ids) and len(set(ids)) == len(ids)
    middle = ids.index(next(p.id for p in seen if p.event == "updates"))
    again: list = []
    _collect(client.threads.join_stream(thread, last_event_id=ids[middle - 1]), again,
             lambda parts: len(parts) == len(seen) - middle)
    assert [(p.event, p.data) for p in again] == [(p.event, p.data) for p in seen[middle:]]
    lifecycle: list = []
    _collect(client.threads.join_stream(thread, last_event_id=ids[0], stream_mode="lifecycle"), lifecycle,
             lambda parts: len(parts) == 3)
    assert [p.event for p in lifecycle] == ["metadata"] * 3
    status, detail = _refused(lambda: list(client.threads.join_stream(thread, stream_mode="state_update")))
    assert status == 501 and "state_update" in detail


def test_runs_join_stream_keeps_to_the_modes_it_names(served):
    client = served.client()
    thread = client.threads.create()["thread_id"]
    run = client.runs.create(thread, "react", input=human("计算 2 + 3 等于多少"), stream_mode=["values", "updates"])
    parts = list(client.runs.join_stream(thread, run["run_id"], stream_mode=["updates"], last_event_id="0"))
    assert {p.event for p in parts} == {"metadata", "updates"}
    status, detail = _refused(lambda: list(client.runs.join_stream(thread, run["run_id"], stream_mode="debug")))
    assert status == 422 and "debug" in detail


def test_the_thread_centric_stream_starts_a_run_follows_it_and_resumes_from_a_seq(served):
    import asyncio

    from langgraph_sdk import get_client

    async def scenario():
        client = get_client(url=served.url)
        async with client.threads.stream(assistant_id="react") as thread:
            started = await thread.run.start(input=human("计算 2 + 3 等于多少"))
            final = await thread.output.with_timeout(60)
            return thread.thread_id, started["run_id"], final

    thread_id, run_id, final = asyncio.run(scenario())
    assert "5" in final["final_answer"]
    assert served.client().runs.get(thread_id, run_id)["status"] == "success"
    events = _protocol_events(served, thread_id, {"channels": ["lifecycle", "values"]}, count=3)
    assert events[0]["method"] == "lifecycle" and events[0]["params"]["data"]["event"] == "running"
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and len({e["event_id"] for e in events}) == len(events)
    later = _protocol_events(served, thread_id, {"channels": ["lifecycle", "values"], "since": seqs[1]}, count=1)
    assert later[0]["event_id"] == events[2]["event_id"]
    reconnected = _protocol_events(served, thread_id, {"channels": ["lifecycle", "values"]}, count=1,
                                   headers={"Last-Event-ID": str(seqs[1])})
    assert reconnected == later
    ended = _protocol_events(served, thread_id, {"channels": ["lifecycle"]}, count=2)
    assert [e["params"]["data"]["event"] for e in ended] == ["running", "completed"]
    refused = httpx.post(f"{served.url}/threads/{thread_id}/commands", json={"id": 1, "method": "agent.getTree"})
    assert refused.status_code == 501 and "agent.getTree" in refused.json()["detail"]
    bad = httpx.post(f"{served.url}/threads/{thread_id}/stream/events", json={"channels": ["nope"]})
    assert bad.status_code == 422 and "nope" in bad.json()["detail"]


def _protocol_events(served, thread_id: str, body: dict, count: int, headers: dict | None = None) -> list[dict]:
    import json

    found: list[dict] = []
    with httpx.stream("POST", f"{served.url}/threads/{thread_id}/stream/events", json=body, timeout=30,
                      headers=headers) as answer:
        assert answer.status_code == 200
        for line in answer.iter_lines():
            if line.startswith("data:"):
                found.append(json.loads(line[5:]))
                if len(found) == count:
                    break
    return found


def test_the_thread_centric_stream_shows_an_approval_and_answers_it_with_input_respond(served):
    import asyncio

    from langgraph_sdk import get_client

    async def scenario():
        client = get_client(url=served.url)
        async with client.threads.stream(assistant_id="react") as thread:
            await thread.run.start(input=human("Fetch https://example.com/page"))
            for _ in range(600):
                if thread.interrupted:
                    break
                await asyncio.sleep(0.1)
            (asked,) = thread.interrupts
            await thread.run.respond({"decisions": [{"type": "reject", "message": "not from the service"}]})
            return asked, await thread.output.with_timeout(60)

    asked, final = asyncio.run(scenario())
    assert [a["name"] for a in asked["value"]["action_requests"]] == ["http_get"]
    assert [(s["action"], s["status"]) for s in final["steps"] if s["node"] == "approve"] == [("http_get", "rejected")]


# -- selecting fields, and the store's semantic search ----------------------------------------------------------

def test_state_history_and_run_lists_return_only_the_selected_fields(served):
    client = served.client()
    thread = client.threads.create(supersteps=_SUPERSTEPS)["thread_id"]
    state = client.threads.get_state(thread, select=["next", "values.final_answer"])
    assert state == {"next": state["next"], "values": {"final_answer": "晴。"}}
    at = client.threads.get_state(thread, checkpoint={"checkpoint_id": client.threads.get_state(thread)["checkpoint"]
                                                       ["checkpoint_id"]}, select=["checkpoint"])
    assert list(at) == ["checkpoint"]
    assert all(list(h) == ["metadata"] for h in client.threads.get_history(thread, select=["metadata"]))
    status, detail = _refused(lambda: client.threads.get_state(thread, select=["secrets"]))
    assert status == 422 and "select" in detail
    client.runs.wait(thread, "react", input=human("计算 2 + 3 等于多少"))
    assert client.runs.list(thread, select=["run_id", "status"])[0].keys() == {"run_id", "status"}


def test_the_stores_semantic_search_is_refused_as_not_served(served):
    client = served.client()
    status, detail = _refused(lambda: client.store.search_items(["notes"], query="tea"))
    assert status == 501 and "query" in detail
    status, detail = _refused(lambda: client.store.put_item(["notes"], "k", {"text": "tea"}, index=["text"]))
    assert status == 501 and "index" in detail
    client.store.put_item(["notes"], "k", {"text": "tea"}, index=False)
    assert client.store.search_items(["notes"], query="")["items"][0]["key"] == "k"


# -- disconnects, graphs, checkpoints -------------------------------------------------------------------------

def test_a_wait_that_says_on_disconnect_cancel_cancels_its_run_when_the_client_leaves(served):
    client = served.client()
    thread = client.threads.create()["thread_id"]
    body = {"assistant_id": "react", "input": human("广州的天气怎么样？"), "on_disconnect": "cancel"}
    with pytest.raises(httpx.ReadTimeout):  # the client leaves while the slow tool runs
        httpx.post(f"{served.url}/threads/{thread}/runs/wait", json=body, timeout=3)
    wait_for(lambda: client.runs.list(thread)[0]["status"] == "interrupted", 30, "the left run cancelled")
    background = httpx.post(f"{served.url}/threads/{thread}/runs", json={**body, "input": human("hi")})
    assert background.status_code == 422 and "on_disconnect" in background.json()["detail"]


def test_a_graph_drawing_takes_an_xray_depth_and_a_subgraph_checkpoint_is_refused(served):
    client = served.client()
    assert client.assistants.get_graph("react", xray=2)["nodes"]
    for depth in ("deep", "¹4", "٣"):  # a word, and digits to str.isdigit() that are no ASCII number (the fuzz's find)
        status, detail = _refused(lambda depth=depth: httpx.get(f"{served.url}/assistants/react/graph",
                                                                params={"xray": depth}).raise_for_status())
        assert status == 422 and "xray" in detail, (depth, status, detail)
    thread = client.threads.create()["thread_id"]
    status, detail = _refused(lambda: client.runs.create(thread, "react", input=human("hi"),
                                                         checkpoint={"checkpoint_ns": "inner:1"}))
    assert status == 422 and "checkpoint_ns" in detail
