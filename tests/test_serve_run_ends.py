"""Every run ends exactly once, and no accepted run is lost: against a real `reactgraph serve` (no workers of its
own) and `reactgraph worker` processes on Redis.

- an input the graph's channels cannot take is refused at create (422 naming the field), creating nothing;
- a run whose worker dies every time it runs it is resumed at most --max-resumes times, then ends `error` naming
  the attempts: its thread is freed, `join` returns, and it can be deleted;
- a run whose queue token is lost (a failover, a trim, a hand on the stream) is found by the workers' sweep and
  run, once;
- the queue is never trimmed: tokens the workers have not read yet all stay.
"""

from __future__ import annotations

import time

import httpx
import pytest
import redis

from reactgraph.service.keys import ServiceKeys
from test_serve import human, start_service, stop, wait_for

BAD_INPUTS = [
    ({"messages": [{"role": "nope", "content": "x"}]}, "'input.messages'", "Unexpected message type: 'nope'"),
    ({"messages": 5}, "'input.messages'", "Unsupported message type"),
    ({"messages": [{"content": "no role"}]}, "'input.messages'", ""),
    ({"steps": 5}, "'input.steps'", "can only concatenate list"),
]


@pytest.fixture
def service(redis_url, tmp_path):
    service = start_service(redis_url, tmp_path, workers=0)
    yield service
    stop(service)


def _keys(service) -> ServiceKeys:
    return ServiceKeys(service.env["REACTGRAPH_SERVICE_PREFIX"])


@pytest.mark.parametrize(("graph_input", "field", "cause"), BAD_INPUTS)
def test_an_input_the_graph_cannot_take_is_refused_at_create_naming_the_field(service, graph_input, field, cause):
    thread_id = "4a3c1d1e-0000-4000-8000-000000000001"
    with httpx.Client(base_url=service.url, timeout=30) as http:
        answer = http.post(f"/threads/{thread_id}/runs", json={"assistant_id": "react", "input": graph_input,
                                                                "if_not_exists": "create"})
        assert answer.status_code == 422, answer.text
        message = answer.json()["detail"]
        assert field in message and cause in message and "\n" not in message
        assert http.get(f"/threads/{thread_id}").status_code == 404  # nothing was made for the refused run


def test_a_command_update_the_graph_cannot_take_is_refused_too(service):
    client = service.client()
    thread = client.threads.create()
    with httpx.Client(base_url=service.url, timeout=30) as http:
        answer = http.post(f"/threads/{thread['thread_id']}/runs", json={
            "assistant_id": "react", "command": {"update": {"messages": [{"role": "nope", "content": "x"}]}}})
    assert answer.status_code == 422 and "'command.update.messages'" in answer.json()["detail"]
    assert client.runs.list(thread["thread_id"]) == []


def test_an_update_judged_against_the_threads_own_messages_is_taken(service):
    """Removing a message is refused on an empty thread (no such id) and taken where the thread holds it."""
    client = service.client()
    service.start_worker()
    thread = client.threads.create()
    client.runs.wait(thread["thread_id"], "react", input=human("计算 2 + 3 等于多少"))
    first = client.threads.get_state(thread["thread_id"])["values"]["messages"][0]["id"]
    removal = {"messages": [{"type": "remove", "id": first, "content": ""}]}
    empty = client.threads.create()
    with httpx.Client(base_url=service.url, timeout=30) as http:
        refused = http.post(f"/threads/{empty['thread_id']}/runs", json={"assistant_id": "react", "input": removal})
        taken = http.post(f"/threads/{thread['thread_id']}/runs", json={"assistant_id": "react", "input": removal})
    assert refused.status_code == 422 and "doesn't exist" in refused.json()["detail"]
    assert taken.status_code == 200, taken.text
    client.runs.join(thread["thread_id"], taken.json()["run_id"])


def test_a_run_that_kills_its_worker_every_time_ends_once_after_its_resumptions(service, redis_url):
    client = service.client()
    thread = client.threads.create()
    run = client.runs.create(thread["thread_id"], "react", input=human("广州的天气怎么样？"))
    deadline, started = time.monotonic() + 120, 0
    while client.runs.get(thread["thread_id"], run["run_id"])["status"] in ("pending", "running"):
        assert time.monotonic() < deadline, f"the run did not end; workers started: {started}"
        if all(p.poll() is not None for p in service.processes[1:]):  # every worker died: another takes over
            service.start_worker("--max-resumes", "1", CRASH_CITIES="广州")
            started += 1
        time.sleep(0.2)
    ended = client.runs.get(thread["thread_id"], run["run_id"])
    assert ended["status"] == "error"
    assert started == 3  # the first attempt and one resumption crashed; the third holder ended it
    assert service.calls().count("start 广州") == 2
    assert client.threads.get(thread["thread_id"])["status"] == "error"
    final = client.runs.join(thread["thread_id"], run["run_id"])
    assert final["__error__"]["error"] == "RunAttemptsExhausted" and "3 times" in final["__error__"]["message"]
    errors = [p for p in client.runs.join_stream(thread["thread_id"], run["run_id"]) if p.event == "error"]
    assert len(errors) == 1
    client.runs.delete(thread["thread_id"], run["run_id"])
    assert redis.Redis.from_url(redis_url).hlen(_keys(service).attempts(thread["thread_id"])) == 0
    # the thread is free: its next run is taken by a worker that does not crash
    service.start_worker()
    answer = client.runs.wait(thread["thread_id"], "react", input=human("计算 2 + 3 等于多少"))
    assert answer["status"] == "answered"


def test_a_run_whose_token_was_lost_is_found_by_the_sweep_and_run_once(service, redis_url):
    client, keys, r = service.client(), _keys(service), redis.Redis.from_url(redis_url)
    thread = client.threads.create()
    run = client.runs.create(thread["thread_id"], "react", input=human("计算 6 * 7 等于多少"))
    r.delete(keys.queue)  # a failover that kept the run but not its token; the group goes with the stream
    service.start_worker(REACTGRAPH_TOKEN_SWEEP_S="1", REACTGRAPH_TOKEN_SWEEP_GRACE_S="0")
    final = client.runs.join(thread["thread_id"], run["run_id"])
    assert final["status"] == "answered"
    assert client.runs.get(thread["thread_id"], run["run_id"])["status"] == "success"
    history = client.threads.get_history(thread["thread_id"], limit=100)
    assert len({h["metadata"].get("run_id") for h in history} - {None}) == 1  # run once


def test_the_queue_keeps_every_token_its_workers_have_not_read(service, redis_url):
    """No trim: a backlog larger than any bound the stream had (here: runs created with the workers down, and
    spare notifications for them) is all there when the workers come up, and every run ends once."""
    client, keys, r = service.client(), _keys(service), redis.Redis.from_url(redis_url)
    threads = [client.threads.create()["thread_id"] for _ in range(5)]
    runs = [(t, client.runs.create(t, "react", input=human("计算 2 + 3 等于多少"))["run_id"]) for t in threads]
    pipe = r.pipeline(transaction=False)
    for index in range(2_000):  # spare tokens, as hand-backs and retries leave them
        pipe.xadd(keys.queue, {"t": threads[index % len(threads)]})
    pipe.execute()
    assert r.xlen(keys.queue) == 2_005
    service.start_worker("--concurrency", "8")
    for thread_id, run_id in runs:
        assert client.runs.join(thread_id, run_id)["status"] == "answered"
    wait_for(lambda: r.xlen(keys.queue) == 0, 120, "the spare tokens acknowledged")
    for thread_id, _run_id in runs:
        history = client.threads.get_history(thread_id, limit=100)
        assert len({h["metadata"].get("run_id") for h in history} - {None}) == 1


def test_a_run_whose_worker_died_can_be_cancelled_and_deleted_with_no_worker_running(service):
    client = service.client()
    doomed = service.start_worker(CRASH_CITIES="广州")
    thread = client.threads.create()
    run = client.runs.create(thread["thread_id"], "react", input=human("广州的天气怎么样？"))
    assert doomed.wait(timeout=60) == 70  # it died mid-call: the run is left active, and no worker runs now
    time.sleep(3.5)  # its lease (3 s here) expires, as a dead holder's does
    client.runs.cancel(thread["thread_id"], run["run_id"])
    client.runs.delete(thread["thread_id"], run["run_id"])
    assert client.runs.list(thread["thread_id"]) == []
    # stopped where its worker died, before the call it had not finished: as after any cancel mid-run
    assert client.threads.get(thread["thread_id"])["status"] == "interrupted"
    client.threads.delete(thread["thread_id"])



def test_a_run_on_a_thread_whose_latest_checkpoint_is_damaged_ends_once_naming_it(service):
    from reactgraph.memory.redis_checkpoint import RedisSaver

    client = service.client()
    service.start_worker()
    thread = client.threads.create()
    client.runs.wait(thread["thread_id"], "react", input=human("计算 2 + 3 等于多少"))
    latest = client.threads.get_state(thread["thread_id"])["checkpoint"]["checkpoint_id"]
    with RedisSaver.from_url(service.env["REDIS_URL"]) as saver:
        saver.client.hset(f"{saver.prefix}{{{thread['thread_id']}}}:cp:", latest, b"\x93garbage")
    run = client.runs.create(thread["thread_id"], "react", input=human("计算 3 + 4 等于多少"))
    final = client.runs.join(thread["thread_id"], run["run_id"])
    assert latest in final["__error__"]["message"]  # named, not answered from an older state
    assert client.runs.get(thread["thread_id"], run["run_id"])["status"] == "error"
    errors = [p for p in client.runs.join_stream(thread["thread_id"], run["run_id"]) if p.event == "error"]
    assert len(errors) == 1
    with httpx.Client(base_url=service.url, timeout=30) as http:
        assert http.get(f"/threads/{thread['thread_id']}").status_code == 500  # the thread names its damage
        assert http.delete(f"/threads/{thread['thread_id']}/runs/{run['run_id']}").status_code == 204
        assert http.delete(f"/threads/{thread['thread_id']}").status_code == 204
