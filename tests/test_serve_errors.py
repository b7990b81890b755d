"""Every error of `reactgraph serve` is one JSON line naming its cause, on a real server: state updates LangGraph
refuses and lone surrogates are 4xx; a thread record whose metadata is no object, or whose latest checkpoint is
damaged, is named (500) and passed over by search and count, never answered from an older state; one whose
checkpoints are all damaged has no title for a text search, which answers; an exception no handler answers is a
500 carrying a request id that the server's log carries too."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import httpx
import pytest
import redis

from support.local_servers import free_port, http_request
from test_serve import Service, service_env, stop
from test_serve_fuzz import anonymous_tracebacks

WAIT_S = 60
HUMAN = {"messages": [{"role": "human", "content": "计算 2+3"}]}
AUTH = '''
from langgraph_sdk import Auth
auth = Auth()

@auth.authenticate
async def authenticate(authorization: str | None) -> str:
    if authorization == "Bearer boom":
        raise RuntimeError("the identity provider is down")
    return "someone"
'''


@pytest.fixture(scope="module")
def served(redis_url: str, tmp_path_factory) -> Iterator[Service]:
    tmp = tmp_path_factory.mktemp("errors")
    (tmp / "auth_boom.py").write_text(AUTH)
    (tmp / "langgraph.json").write_text(json.dumps({"auth": {"path": f"{tmp / 'auth_boom.py'}:auth"}}))
    port = free_port()
    service = Service(f"http://127.0.0.1:{port}", service_env(redis_url, f"svc-errors-{uuid.uuid4().hex[:8]}",
                                                              tmp / "calls.log", REACTGRAPH_LOG_FORMAT="text"),
                      tmp / "calls.log", [])
    service.start_api(port, 0, "--config", str(tmp / "langgraph.json"))
    yield service
    stop(service)


def call(service: Service, method: str, path: str, body: str | None = None, token: str = "ok") -> httpx.Response:
    return http_request(method, f"{service.url}{path}", content=body, timeout=WAIT_S,
                         headers={"authorization": f"Bearer {token}", "content-type": "application/json"})


def one_line(answer: httpx.Response) -> str:
    detail = answer.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail and "Traceback" not in detail, detail
    return detail


def server_log(service: Service) -> str:
    return "".join(p.read_text(errors="replace") for p in sorted(service.log.parent.glob("serve-*.err")))


def new_thread(service: Service, with_state: bool = True) -> str:
    thread = call(service, "POST", "/threads", "{}").json()["thread_id"]
    if with_state:
        assert call(service, "POST", f"/threads/{thread}/state", json.dumps({"values": HUMAN})).status_code == 200
    return thread


REFUSED_UPDATES = {
    '{"values": {"messages": []}, "as_node": "nope"}': "Node nope does not exist",
    '{"values": {"messages": []}, "as_node": "__end__"}': "__end__",
    '{"values": 5}': "'values' must be",
    '{"values": [1, 2]}': "Expected dict",
    '{"values": {"messages": []}, "checkpoint": {"checkpoint_ns": "sub|1"}}': "Subgraph sub not found",
    '{"values": {"messages": [{"role": "nope"}]}}': "Message dict must contain",
    '{"values": {"messages": 5}}': "Unsupported message type",
    '{"values": {"messages": [{"role": "human", "content": "\\ud800"}]}}': "lone surrogate",
}


def test_state_updates_langgraph_refuses_and_lone_surrogates_are_one_line_4xx(served):
    thread = new_thread(served)
    for body, said in REFUSED_UPDATES.items():
        answer = call(served, "POST", f"/threads/{thread}/state", body)
        assert answer.status_code == 422 and said in one_line(answer), (body, answer.text)
    run = call(served, "POST", f"/threads/{thread}/runs",
               '{"assistant_id": "react", "input": {"messages": [{"role": "human", "content": "\\ud800"}]}}')
    named = call(served, "POST", "/assistants", '{"graph_id": "react", "name": "x\\udfff"}')
    for answer in (run, named):
        assert answer.status_code == 422 and "lone surrogate" in one_line(answer)
    assert call(served, "GET", f"/threads/{thread}/state").json()["values"]["messages"][0]["content"] == "计算 2+3"
    assert "Traceback" not in server_log(served)


@pytest.mark.parametrize("metadata", [["a", "list"], "a string"])
def test_a_thread_whose_metadata_is_no_object_is_named_and_passed_over_by_search_and_count(served, metadata):
    from reactgraph.service.keys import ServiceKeys

    damaged, healthy = new_thread(served, with_state=False), new_thread(served, with_state=False)
    key = ServiceKeys(served.env["REACTGRAPH_SERVICE_PREFIX"]).thread(damaged)
    raw = redis.Redis.from_url(served.env["REDIS_URL"])
    record = json.loads(raw.get(key))
    raw.set(key, json.dumps({**record, "metadata": metadata}))
    try:
        check_named_and_passed_over(served, damaged, healthy)
    finally:  # the record as it was, for the service's own clean-up
        raw.set(key, json.dumps(record))
        raw.close()


def check_named_and_passed_over(served: Service, damaged: str, healthy: str) -> None:
    found = call(served, "POST", "/threads/search", json.dumps({"ids": [damaged, healthy]}))
    assert found.status_code == 200 and [t["thread_id"] for t in found.json()] == [healthy]
    counted = call(served, "POST", "/threads/count", json.dumps({"ids": [damaged, healthy]}))
    assert counted.status_code == 200 and counted.json() == 1
    answer = call(served, "GET", f"/threads/{damaged}")
    assert answer.status_code == 500 and damaged in one_line(answer) and "metadata" in one_line(answer)
    assert f"{damaged}" in server_log(served) and "Traceback" not in server_log(served)


def test_a_damaged_latest_checkpoint_is_named_never_passed_over_for_an_older_state(served):
    from reactgraph.memory.redis_checkpoint import RedisSaver

    thread = new_thread(served)
    second = {"values": {"messages": [{"role": "human", "content": "计算 3+4"}]}}
    assert call(served, "POST", f"/threads/{thread}/state", json.dumps(second)).status_code == 200
    latest = call(served, "GET", f"/threads/{thread}/state").json()["checkpoint"]["checkpoint_id"]
    with RedisSaver.from_url(served.env["REDIS_URL"]) as saver:
        saver.client.hset(f"{saver.prefix}{{{thread}}}:cp:", latest, b"\x93garbage")
    for method, path, body in (("GET", f"/threads/{thread}/state", None), ("GET", f"/threads/{thread}", None),
                               ("POST", f"/threads/{thread}/state", json.dumps(second))):
        answer = call(served, method, path, body)
        assert answer.status_code == 500, (path, answer.text)
        assert thread in one_line(answer) and latest in one_line(answer) and "unreadable" in one_line(answer)
    history = call(served, "POST", f"/threads/{thread}/history", "{}")
    assert history.status_code == 200 and latest not in history.text  # the older ones are still listed
    assert "Traceback" not in server_log(served)


def test_an_exception_nothing_answers_is_a_500_whose_request_id_the_log_carries(served):
    answer = call(served, "GET", "/threads/search", token="boom")
    assert answer.status_code == 500 and "the authentication handler failed: RuntimeError" in one_line(answer)
    request_id = answer.json()["request_id"]
    assert answer.headers["x-request-id"] == request_id and request_id in one_line(answer)
    lines = server_log(served).splitlines()
    record = next(i for i, line in enumerate(lines) if request_id in line)
    assert lines[record + 1].startswith("Traceback") and "the identity provider is down" in "\n".join(lines[record:])
    assert anonymous_tracebacks(server_log(served)) == []


def test_a_thread_whose_checkpoints_are_damaged_has_no_title_and_a_text_search_still_answers(served):
    """A session's title is read from its earliest checkpoints (titles.py): damaged ones give it none, with a log
    line naming the thread, and the search answers with the others."""
    from reactgraph.memory.redis_checkpoint import RedisSaver

    word = uuid.uuid4().hex[:12]
    damaged, healthy = new_thread(served, with_state=False), new_thread(served, with_state=False)
    for thread in (damaged, healthy):
        asked = {"values": {"messages": [{"role": "human", "content": f"计算 2+3 ({word})"}]}}
        assert call(served, "POST", f"/threads/{thread}/state", json.dumps(asked)).status_code == 200
    with RedisSaver.from_url(served.env["REDIS_URL"]) as saver:
        key = f"{saver.prefix}{{{damaged}}}:cp:"
        kept = saver.client.hgetall(key)
        saver.client.hset(key, mapping=dict.fromkeys(kept, b"\x93garbage"))
        try:
            found = call(served, "POST", "/threads/search", json.dumps({"text": word, "select": ["thread_id"]}))
            assert found.status_code == 200 and found.json() == [{"thread_id": healthy}]
            titled = call(served, "POST", "/threads/search", json.dumps({"ids": [damaged, healthy],
                                                                         "select": ["thread_id", "title"]}))
            assert {t["thread_id"]: t["title"] for t in titled.json()} == {damaged: "", healthy: f"计算 2+3 ({word})"}
        finally:  # the checkpoints as they were, for the service's own clean-up
            saver.client.hset(key, mapping=kept)
    assert f"thread {damaged!r} has no title" in server_log(served), server_log(served)[-3000:]
