"""`reactgraph serve` bounds each stream event: one over the bound ($REACTGRAPH_MAX_EVENT_BYTES, lowered here) is
replaced by a small event of the same name that says so, and the stream, the run and its state go on — through
langgraph-sdk's client against a real server and workers on the test Redis."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from test_serve import Service, human, start_service, stop

LIMIT = 1024  # the lowest an operator may set: under a state with a few messages, over a `metadata` event


@pytest.fixture(scope="module")
def served(redis_url: str, tmp_path_factory) -> Iterator[Service]:
    service = start_service(redis_url, tmp_path_factory.mktemp("bound"), workers=1,
                            REACTGRAPH_MAX_EVENT_BYTES=str(LIMIT))
    yield service
    stop(service)


def _too_large(part) -> bool:
    return isinstance(part.data, dict) and part.data.get("error") == "EventTooLarge"


def test_an_event_over_the_bound_is_replaced_by_one_naming_its_size_and_the_run_goes_on(served):
    client = served.client()
    thread = client.threads.create()
    parts = list(client.runs.stream(thread["thread_id"], "react", input=human("计算 2 + 3 等于多少"),
                                    stream_mode=["values", "updates", "events"]))
    assert parts[0].event == "metadata" and parts[0].data["run_id"]
    replaced = [p for p in parts if _too_large(p)]
    assert {p.event for p in replaced} >= {"values", "events"}  # whole states: over the bound, names kept
    for part in replaced:
        message = part.data["message"]
        assert "\n" not in message and f"over the limit of {LIMIT} bytes" in message
        assert int(message.split(" event was ", 1)[1].split(" bytes", 1)[0]) > LIMIT  # its size, named
        assert part.data.keys() == {"error", "message"}
    kept = [p for p in parts[1:] if not _too_large(p)]
    assert any(p.event == "updates" for p in kept) and any(p.event == "events" for p in kept)  # small ones whole
    run = client.runs.list(thread["thread_id"])[0]
    assert run["status"] == "success"  # the stream went on to the run's end
    state = client.threads.get_state(thread["thread_id"])["values"]
    assert "5" in state["final_answer"] and state["messages"][0]["type"] == "human"
    assert client.threads.get(thread["thread_id"])["status"] == "idle"
    final = client.runs.wait(thread["thread_id"], "react", input=human("计算 10 * 7 等于多少"))
    assert "70" in final["final_answer"]  # a wait answers from the state, whatever its events carried


@pytest.mark.parametrize("value", ["12", "lots", str(10**12)])
def test_a_bad_event_bound_is_one_line_before_the_worker_starts(refused_start, monkeypatch, value):
    monkeypatch.setenv("REACTGRAPH_MAX_EVENT_BYTES", value)
    code, out, err = refused_start("worker")
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0 and "REACTGRAPH_MAX_EVENT_BYTES" in err and "from 1024" in err
