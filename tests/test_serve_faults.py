"""The service under faults: a worker SIGKILLed mid-run, a worker told to stop (SIGTERM) with and without time
to drain. API processes run no workers here (`--workers 0`); `reactgraph worker` processes execute the runs."""

from __future__ import annotations

import itertools
import json
import signal
import threading
import time

import pytest
import redis
from langgraph_sdk.errors import NotFoundError

from support.local_servers import free_port, http_recorder
from test_durability import saved_tool_results
from test_serve import WEATHER, human, start_service, stop, wait_for
from test_serve_nonblocking import session_items


def _collect(client, thread_id: str, run_id: str, into: list, modes: tuple[str, ...] = ("updates",)
             ) -> threading.Thread:
    """Follow the run's stream (its `modes`) on a thread of its own, as a client would, until the run ends."""
    def follow() -> None:
        into.extend(client.runs.join_stream(thread_id, run_id, stream_mode=list(modes)))
    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    return reader


@pytest.fixture
def service(redis_url, tmp_path):
    """An API process with no workers of its own (the tests start theirs), stopped and forgotten afterwards."""
    service = start_service(redis_url, tmp_path, workers=0)
    yield service
    stop(service)


def _guangzhou_run_started(service, client) -> tuple[dict, dict]:
    """A run whose one tool call (广州, slow for the workers told so) has started: (thread, run)."""
    thread = client.threads.create()
    run = client.runs.create(thread["thread_id"], "react", input=human("广州的天气怎么样？"))
    wait_for(lambda: "start 广州" in service.calls(), 60, "the slow call started")
    return thread, run


def test_a_killed_workers_run_is_finished_by_another_without_repeating_a_finished_tool_call(service, redis_url):
    client = service.client()
    doomed = service.start_worker(SLOW_CITIES="上海", SLOW_S="600")
    thread = client.threads.create()
    run = client.runs.create(thread["thread_id"], "react", stream_mode=["updates", "values"], stream_resumable=True,
                             input=human(WEATHER))
    seen: list = []
    reader = _collect(client, thread["thread_id"], run["run_id"], seen, ("updates", "values"))
    wait_for(lambda: {"done 北京", "start 上海"} <= set(service.calls()), 60, "北京 done, 上海 started")
    wait_for(lambda: any("北京" in r for r in saved_tool_results(redis_url, thread["thread_id"])), 30,
             "the finished call saved")
    doomed.send_signal(signal.SIGKILL)
    doomed.wait(timeout=10)
    service.start_worker()  # no slow city: it finishes the run once the dead worker's lease has expired
    final = client.runs.join(thread["thread_id"], run["run_id"])
    reader.join(timeout=60)
    assert final["status"] == "answered" and "上海" in final["final_answer"]
    assert client.runs.get(thread["thread_id"], run["run_id"])["status"] == "success"
    calls = service.calls()
    assert calls.count("start 北京") == 1  # finished before the kill: not run again
    assert calls.count("start 上海") == 2  # unfinished at the kill: run again by the second worker
    attempts = [p.data["attempt"] for p in seen if p.event == "metadata"]
    assert attempts == [1, 2]  # the client's one stream went on across the takeover
    _each_event_once(seen)


def test_sigterm_stops_a_run_at_its_next_step_and_the_next_worker_finishes_it_without_repeating_a_call(
        service, redis_url):
    client = service.client()
    worker = service.start_worker(SLOW_CITIES="广州", SLOW_S="2")
    thread, run = _guangzhou_run_started(service, client)
    worker.send_signal(signal.SIGTERM)  # the call under way finishes: its step ends, saved, and the run stops there
    assert worker.wait(timeout=60) == 0
    queue = service.env["REACTGRAPH_SERVICE_PREFIX"] + ":queue"
    assert redis.Redis.from_url(redis_url).xinfo_consumers(queue, "workers") == []  # it left the group
    assert client.runs.get(thread["thread_id"], run["run_id"])["status"] == "running"  # stopped, not finished
    service.start_worker()
    final = client.runs.join(thread["thread_id"], run["run_id"])
    assert final["status"] == "answered" and "广州" in final["final_answer"]
    assert client.runs.get(thread["thread_id"], run["run_id"])["status"] == "success"
    assert service.calls().count("start 广州") == 1  # finished before the stop: not run again


def test_a_run_a_stopping_worker_cannot_finish_in_time_is_resumed_by_the_next(service):
    client = service.client()
    worker = service.start_worker("--drain", "1", SLOW_CITIES="广州", SLOW_S="600")
    thread, run = _guangzhou_run_started(service, client)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0  # --drain 1: it stops the run where it is and hands the thread back
    service.start_worker()
    final = client.runs.join(thread["thread_id"], run["run_id"])
    assert final["status"] == "answered" and "广州" in final["final_answer"]


def test_sigterm_stops_an_api_a_client_still_waits_on_and_the_run_goes_on(redis_url, tmp_path):
    """No worker takes the run yet, so the client's wait would never end: SIGTERM stops the API after --drain all
    the same (it used to wait for that request for ever), and the run, still queued, is run once a worker comes."""
    import httpx

    service = start_service(redis_url, tmp_path, workers=0, options=("--drain", "1"))
    try:
        client = service.client()
        thread = client.threads.create()
        waited: list = []

        def wait() -> None:
            try:
                waited.append(client.runs.wait(thread["thread_id"], "react", input=human("计算 2 + 3 等于多少")))
            except httpx.HTTPError as exc:
                waited.append(exc)
        waiter = threading.Thread(target=wait, daemon=True)
        waiter.start()
        wait_for(lambda: client.runs.list(thread["thread_id"]), 30, "the run created")
        api = service.processes[0]
        api.send_signal(signal.SIGTERM)
        assert api.wait(timeout=60) == -signal.SIGTERM  # stopped (uvicorn raises the signal again once it has)
        waiter.join(timeout=30)
        assert waited and isinstance(waited[0], httpx.HTTPError)  # cut, not answered
        port = free_port()
        service.url, service._client = f"http://127.0.0.1:{port}", None  # start_api moves it if the port is taken
        service.start_api(port, 1)
        run = service.client().runs.list(thread["thread_id"])[0]
        assert service.client().runs.join(thread["thread_id"], run["run_id"])["status"] == "answered"
    finally:
        stop(service)


def test_threads_idle_past_the_ttl_are_deleted_by_the_sweep(service, redis_url):
    client = service.client()
    # The turn runs on a worker that sweeps nothing, and the sweepers start once it is checked: beside the whole
    # suite, more than the TTL (4 s) passed between the run's end and the wait reading the thread's state, so the
    # thread was swept under the wait, which answered {} (seen at load 5-14 with the sweepers running from the start).
    service.start_worker()
    thread = client.threads.create()
    final = client.runs.wait(thread["thread_id"], "react", input=human("计算 2 + 3 等于多少"))
    assert final["status"] == "answered"
    assert session_items(redis_url, thread["thread_id"])  # the session's Q&A log, in the long-term store
    service.start_worker("--thread-ttl", "4s", "--sweep-every", "1s")
    service.start_worker("--thread-ttl", "4s", "--sweep-every", "1s")  # two sweepers: one sweeps at a time

    def gone() -> bool:
        try:
            client.threads.get(thread["thread_id"])
        except NotFoundError:
            return True
        return False

    wait_for(gone, 90, "the idle thread swept")  # the sweepers' start included: seconds on a loaded machine
    assert saved_tool_results(redis_url, thread["thread_id"]) == []
    assert session_items(redis_url, thread["thread_id"]) == []  # swept with the thread
    with pytest.raises(NotFoundError):
        client.threads.get_state(thread["thread_id"])


def test_keep_latest_from_langgraph_json_prunes_an_idle_thread_to_its_latest_state(service, tmp_path):
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"graphs": {}, "checkpointer": {"ttl": {
        "strategy": "keep_latest", "default_ttl": 4 / 60, "sweep_interval_minutes": 1 / 60}}}))
    client = service.client()
    # the two turns on a worker that prunes nothing, the pruning one started once they are checked (as in the
    # test above: on a loaded machine the TTL could pass between one request and the next)
    service.start_worker()
    thread = client.threads.create()
    for question in ("计算 2 + 3 等于多少", "计算 10 * 7 等于多少"):
        client.runs.wait(thread["thread_id"], "react", input=human(question))
    before = client.threads.get_state(thread["thread_id"])["values"]
    assert len(client.threads.get_history(thread["thread_id"], limit=100)) > 4
    service.start_worker("--config", str(config))
    wait_for(lambda: len(client.threads.get_history(thread["thread_id"], limit=100)) == 1, 90,
             "the idle thread pruned to one checkpoint")
    assert client.threads.get_state(thread["thread_id"])["values"] == before  # its latest state is kept
    assert client.runs.list(thread["thread_id"]) == []
    again = client.runs.wait(thread["thread_id"], "react", input=human("现在几点了？"))  # and it goes on
    assert [m["content"] for m in again["messages"] if m["type"] == "human"][-1] == "现在几点了？"


def _each_event_once(seen: list) -> None:
    """Each event once across a takeover: LangGraph, resuming, streams the finished call's update and the
    checkpoint's values again; the client gets neither twice. The run went on to its end."""
    updates = [p.data for p in seen if p.event == "updates"]
    assert "finalize" in {next(iter(update)) for update in updates}
    beijing = [u for u in updates if "act" in u and "北京" in json.dumps(u, ensure_ascii=False)]
    assert len(beijing) == 1, beijing
    values = [json.dumps(p.data, sort_keys=True) for p in seen if p.event == "values"]
    assert all(a != b for a, b in itertools.pairwise(values)), "a values event streamed twice in a row"


def _follow_and_compare(client, thread_id: str, run_id: str, seen: list, reader: threading.Thread) -> None:
    """The client's one stream got every event of the run, once each, in order (the run's own record of them)."""
    client.runs.join(thread_id, run_id)
    reader.join(timeout=90)
    assert not reader.is_alive(), "the client's stream did not end"
    everything = list(client.runs.join_stream(thread_id, run_id))
    assert [(p.event, p.data) for p in seen] == [(p.event, p.data) for p in everything]
    _each_event_once(seen)


def test_an_api_process_restarted_mid_run_lets_the_client_stream_go_on(service):
    client = service.client()
    service.start_worker(SLOW_CITIES="上海", SLOW_S="4")
    thread = client.threads.create()
    seen: list = []

    def follow() -> None:
        seen.extend(client.runs.stream(thread["thread_id"], "react", input=human(WEATHER),
                                       stream_mode=["updates"], stream_resumable=True))
    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    wait_for(lambda: "start 上海" in service.calls(), 60, "the slow call started")
    # and the client has the run's first event (on a busy machine it may come after the call started)
    wait_for(lambda: any(p.event == "metadata" for p in list(seen)), 30, "the stream's metadata event")
    (api,) = [p for p in service.processes if "serve" in p.args]
    api.send_signal(signal.SIGKILL)
    api.wait(timeout=10)
    service.start_api(int(service.url.rsplit(":", 1)[1]))  # the same address, a new process
    run_id = next(p.data["run_id"] for p in seen if p.event == "metadata")
    _follow_and_compare(client, thread["thread_id"], run_id, seen, reader)


def test_redis_restarted_mid_run_the_run_resumes_and_the_client_stream_goes_on(own_redis, tmp_path):
    url = own_redis()
    service = start_service(url, tmp_path, workers=0)
    try:
        client = service.client()
        service.start_worker(SLOW_CITIES="上海", SLOW_S="3")
        thread = client.threads.create()
        run = client.runs.create(thread["thread_id"], "react", stream_mode=["updates"], stream_resumable=True,
                                 input=human(WEATHER))
        seen: list = []
        reader = _collect(client, thread["thread_id"], run["run_id"], seen)
        wait_for(lambda: "start 上海" in service.calls(), 60, "the slow call started")
        # 北京's result is saved right after its call returns: only once it is in Redis does "not run again" hold
        # (a result Redis never received is run again after the outage; seen once when the shutdown came first).
        wait_for(lambda: any("北京" in r for r in saved_tool_results(url, thread["thread_id"])), 30,
                 "the finished call saved")
        redis.Redis.from_url(url).shutdown(save=True)  # gone while the tool runs…
        time.sleep(1.0)
        own_redis()  # …and back, with its data (append-only file)
        _follow_and_compare(client, thread["thread_id"], run["run_id"], seen, reader)
        assert client.runs.get(thread["thread_id"], run["run_id"])["status"] == "success"
        assert service.calls().count("start 北京") == 1
    finally:
        stop(service)


def test_a_worker_with_otel_exports_one_trace_per_run(redis_url, tmp_path):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    with http_recorder() as (base, seen):
        service = start_service(redis_url, tmp_path, workers=0)
        try:
            client = service.client()
            service.start_worker("--otel", OTEL_EXPORTER_OTLP_ENDPOINT=base, OTEL_BSP_SCHEDULE_DELAY="100")
            for question in ("计算 2 + 3 等于多少", "现在几点了？"):
                client.runs.wait(client.threads.create()["thread_id"], "react", input=human(question))

            def roots() -> list:
                spans = [span for _path, _headers, body in seen if _path == "/v1/traces"
                         for resource in ExportTraceServiceRequest.FromString(body).resource_spans
                         for scope in resource.scope_spans for span in scope.spans]
                return [s for s in spans if s.name == "invoke_agent react"]

            wait_for(lambda: len(roots()) == 2, 30, "two run traces exported")
            assert len({s.trace_id for s in roots()}) == 2
        finally:
            stop(service)
