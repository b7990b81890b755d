"""Search through indexes and quotas per owner, against a real `reactgraph serve` on Redis with the owner
handler of tests/support/auth_assistant_owner.py: another user's many threads and assistants change nothing of
what one user finds or counts; each quota is per caller, named when it refuses, and never passed by a race."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import redis

from support.local_servers import http_client
from test_serve import TESTS, human, stop
from test_serve_auth import start_with

QUOTAS = {"threads": 40, "assistants": 6, "versions": 3, "runs_in_flight": 2, "store_items": 3}


@pytest.fixture(scope="module")
def served(redis_url: str, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("quotas")
    config = tmp / "langgraph.json"
    owner = Path(TESTS) / "support" / "auth_assistant_owner.py"
    config.write_text(json.dumps({"auth": {"path": f"{owner}:auth"}, "reactgraph": {"quotas": QUOTAS}}))
    service = start_with(redis_url, tmp, "--config", str(config), "--quota", "stream_slots=1", workers=0,
                         SLOW_CITIES="广州", SLOW_S="60")
    yield service
    stop(service)


def as_user(served, token: str) -> httpx.Client:
    return http_client(base_url=served.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def one_line(answer: httpx.Response) -> str:
    assert answer.text.count("\n") == 0
    return answer.json()["detail"]


def test_one_users_search_and_count_are_exactly_theirs_whatever_another_has(served):
    alice, bob = as_user(served, "token-alice"), as_user(served, "token-bob")
    mine = [alice.post("/threads", json={"metadata": {"n": i, "topic": "t"}}).json()["thread_id"] for i in range(3)]
    for i in range(30):
        assert bob.post("/threads", json={"metadata": {"n": i, "topic": "t"}}).status_code == 200
    assert alice.post("/threads/count", json={}).json() == 3
    assert alice.post("/threads/count", json={"metadata": {"topic": "t"}}).json() == 3
    assert alice.post("/threads/count", json={"metadata": {"n": 1}}).json() == 1
    assert bob.post("/threads/count", json={"metadata": {"topic": "t"}}).json() == 30
    found = alice.post("/threads/search", json={"limit": 10, "sort_by": "created_at", "sort_order": "asc"}).json()
    assert [t["thread_id"] for t in found] == mine
    page = alice.post("/threads/search", json={"limit": 1, "offset": 1, "sort_by": "created_at",
                                               "sort_order": "asc"}).json()
    assert [t["thread_id"] for t in page] == mine[1:2]
    by_id = alice.post("/threads/search", json={"sort_by": "thread_id", "sort_order": "asc"}).json()
    assert [t["thread_id"] for t in by_id] == sorted(mine)
    assert alice.post("/threads/search", json={"ids": [*mine[:2], "nope"]}).json().__len__() == 2
    # a filter that is not indexed (a nested value) is checked on alice's own records
    alice.patch(f"/threads/{mine[0]}", json={"metadata": {"deep": {"a": 1}}})
    assert [t["thread_id"] for t in alice.post("/threads/search", json={"metadata": {"deep": {"a": 1}}}).json()
            ] == [mine[0]]
    assert alice.post("/threads/count", json={"status": "idle"}).json() == 3
    assert alice.post("/threads/count", json={"status": "busy"}).json() == 0


def test_the_threads_quota_is_per_caller_and_named_when_it_refuses(served):
    bob, carol_like = as_user(served, "token-bob"), as_user(served, "token-alice")
    while (answer := bob.post("/threads", json={})).status_code == 200:
        pass
    assert answer.status_code == 409 and "quota 'threads'" in one_line(answer) and "'bob'" in one_line(answer)
    assert bob.post("/threads/count", json={}).json() == QUOTAS["threads"]
    assert carol_like.post("/threads", json={}).status_code == 200  # alice is not held by bob's quota


def test_the_store_items_quota_counts_each_callers_new_items_until_they_are_gone(served):
    bob, alice = as_user(served, "token-bob"), as_user(served, "token-alice")

    def put(user: httpx.Client, key: str) -> httpx.Response:
        return user.put("/store/items", json={"namespace": ["notes"], "key": key, "value": {"text": key}})

    assert [put(bob, f"k{i}").status_code for i in range(3)] == [204, 204, 204]
    refused = put(bob, "k3")
    assert refused.status_code == 409 and "quota 'store_items'" in one_line(refused) and "'bob'" in one_line(refused)
    assert put(bob, "k1").status_code == 204  # a new value for an item held is no new item
    assert put(alice, "k0").status_code == 204  # alice's are hers
    assert bob.request("DELETE", "/store/items", json={"namespace": ["notes"], "key": "k0"}).status_code == 204
    assert put(bob, "k3").status_code == 204  # what bob deleted no longer counts
    assert bob.get("/store/items", params={"namespace": "notes", "key": "k0"}).json() is None
    for key in ("k1", "k2", "k3"):
        bob.request("DELETE", "/store/items", json={"namespace": ["notes"], "key": key})
    alice.request("DELETE", "/store/items", json={"namespace": ["notes"], "key": "k0"})


def test_concurrent_creates_never_pass_the_assistants_quota(served):
    alice = as_user(served, "token-alice")

    def create(i: int) -> int:
        return as_user(served, "token-alice").post("/assistants", json={"graph_id": "react", "name": f"a{i}"}
                                                   ).status_code

    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(create, range(20)))
    assert statuses.count(200) == QUOTAS["assistants"] and set(statuses) == {200, 409}
    assert alice.post("/assistants/count", json={"graph_id": "react"}).json() == QUOTAS["assistants"]
    bob = as_user(served, "token-bob")
    assert bob.post("/assistants", json={"graph_id": "react", "name": "bobs"}).status_code == 200
    assert bob.post("/assistants/count", json={}).json() == 1
    assert [a["name"] for a in bob.post("/assistants/search", json={}).json()] == ["bobs"]


def test_the_versions_quota_refuses_an_update_past_it(served):
    bob = as_user(served, "token-bob")
    created = bob.post("/assistants", json={"graph_id": "react", "name": "v"}).json()
    for i in range(QUOTAS["versions"] - 1):
        assert bob.patch(f"/assistants/{created['assistant_id']}", json={"name": f"v{i}"}).status_code == 200
    refused = bob.patch(f"/assistants/{created['assistant_id']}", json={"name": "too many"})
    assert refused.status_code == 409 and "quota 'versions'" in one_line(refused)


def test_runs_in_flight_and_stream_slots_are_per_caller(served):
    """No worker runs here: runs stay pending, in flight."""
    alice, bob = as_user(served, "token-alice"), as_user(served, "token-bob")
    thread = alice.post("/threads", json={}).json()["thread_id"]
    body = {"assistant_id": "react", "input": human("hi"), "multitask_strategy": "enqueue"}
    assert [alice.post(f"/threads/{thread}/runs", json=body).status_code for _ in range(2)] == [200, 200]
    refused = alice.post(f"/threads/{thread}/runs", json=body)
    assert refused.status_code == 429 and "quota 'runs_in_flight'" in one_line(refused)
    assert refused.headers["retry-after"]
    run = alice.get(f"/threads/{thread}/runs").json()[0]
    with http_client(timeout=30, headers=alice.headers) as http:
        first = http.send(http.build_request("GET", f"{served.url}/threads/{thread}/runs/{run['run_id']}/stream"),
                          stream=True)
        try:
            assert first.status_code == 200
            second = alice.get(f"/threads/{thread}/runs/{run['run_id']}/join", timeout=30)
            assert second.status_code == 429 and "quota 'stream_slots'" in one_line(second)
        finally:
            first.close()
    bobs = bob.post("/threads", json={}).status_code
    assert bobs in (200, 409)  # bob's own threads quota may be full from an earlier test; his runs are his


def test_threads_written_before_the_index_are_found(redis_url, tmp_path):
    """A record written as the service wrote it before the index existed is indexed when the service starts."""
    from reactgraph.service.keys import ServiceKeys
    from test_serve_auth import auth_config

    service = start_with(redis_url, tmp_path, "--config", str(auth_config(tmp_path)), workers=0)
    service.processes[0].terminate()
    service.processes[0].wait(timeout=15)
    keys = ServiceKeys(service.env["REACTGRAPH_SERVICE_PREFIX"])
    client = redis.Redis.from_url(redis_url)
    stamp = "2024-01-01T00:00:00+00:00"
    index = f"{keys.prefix}{{{keys.prefix}ix}}:t:backfilled"
    client.delete(index)  # as before the index: never backfilled
    for i in range(5):
        record = {"thread_id": f"old-{i}", "created_at": stamp, "updated_at": stamp, "state_updated_at": stamp,
                  "metadata": {"owner": "alice"}, "status": "idle", "config": {}, "interrupts": {}, "error": None}
        client.set(keys.thread(f"old-{i}"), json.dumps(record))
        client.zadd(keys.threads, {f"old-{i}": i})
    from support.local_servers import free_port

    port = free_port()
    service.url = f"http://127.0.0.1:{port}"
    service.start_api(port, 0, "--config", str(auth_config(tmp_path)))
    try:
        alice = as_user(service, "token-alice")
        assert alice.post("/threads/count", json={}).json() == 5
        assert sorted(t["thread_id"] for t in alice.post("/threads/search", json={}).json()) == [
            f"old-{i}" for i in range(5)]
    finally:
        stop(service)
