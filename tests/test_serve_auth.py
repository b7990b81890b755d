"""`reactgraph serve` with auth, driven over loopback by langgraph-sdk clients of three users: the auth file of
tests/support/auth_owner.py (a `langgraph_sdk.Auth`, as for LangGraph's server) and the `--api-keys` mode; and the
rule that only loopback may be served without auth."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import PermissionDeniedError

from support.cli_env import run_in_process
from support.local_servers import free_port
from test_serve import TESTS, Service, human, service_env, stop

WEATHER = "北京的天气怎么样？"


def client_of(service: Service, token: str | None = None, **headers: str):
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return get_sync_client(url=service.url, api_key=None, headers=headers)


def status_of(call) -> int:
    """The HTTP status a langgraph-sdk call answered with (200 if it did not raise)."""
    try:
        call()
    except httpx.HTTPStatusError as exc:  # langgraph-sdk's errors are these; runs.wait raises them bare
        return exc.response.status_code
    return 200


def auth_config(tmp: Path) -> Path:
    config = tmp / "langgraph.json"
    owner = Path(TESTS) / "support" / "auth_owner.py"
    config.write_text(json.dumps({"auth": {"path": f"{owner}:auth"}}), encoding="utf-8")
    return config


def start_with(redis_url: str, tmp: Path, *options: str, workers: int = 1, **extra: str) -> Service:
    """`reactgraph serve OPTIONS` on a free loopback port (test_serve's environment), answering /ok."""
    port = free_port()
    env = {**service_env(redis_url, f"svc-test-{uuid.uuid4().hex[:8]}", tmp / "calls.log"), **extra}
    service = Service(f"http://127.0.0.1:{port}", env, tmp / "calls.log", [])
    service.start_api(port, workers, *options)
    return service


@pytest.fixture(scope="module")
def served(redis_url: str, tmp_path_factory) -> Iterator[Service]:
    tmp = tmp_path_factory.mktemp("auth")
    service = start_with(redis_url, tmp, "--config", str(auth_config(tmp)), REACTGRAPH_TOOLS="support.auth_tools:TOOLS")
    yield service
    stop(service)


@pytest.fixture(scope="module")
def alice(served):
    return client_of(served, "token-alice")


@pytest.fixture(scope="module")
def bob(served):
    return client_of(served, "token-bob")


@pytest.fixture(scope="module")
def alices_thread(alice):
    thread = alice.threads.create(metadata={"topic": "weather"})
    alice.runs.wait(thread["thread_id"], "react", input=human(WEATHER))
    return thread


# -- who is calling -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer token-mallory"}, {"Authorization": "token-alice"}])
def test_no_or_a_bad_token_is_a_401_with_one_line_and_ok_and_info_stay_open(served, headers):
    for method, path in [("POST", "/threads/search"), ("GET", "/assistants/react"), ("POST", "/threads"),
                         ("GET", f"/threads/{uuid.uuid4()}/runs")]:
        answer = httpx.request(method, served.url + path, headers=headers, json={}, timeout=5)
        assert answer.status_code == 401, (path, answer.text)
        assert answer.json() == {"detail": "missing or invalid token"}
    for path in ("/ok", "/info"):
        assert httpx.get(served.url + path, headers=headers, timeout=5).status_code == 200


def test_a_thread_created_by_a_user_is_marked_theirs_and_a_refusing_handler_is_a_403(served, alice):
    thread = alice.threads.create(metadata={"owner": "bob", "topic": "x"})
    assert thread["metadata"] == {"owner": "alice", "topic": "x"}  # the handler's word, not the client's
    carol = client_of(served, "token-carol")  # may read, not write: the handler returns False
    with pytest.raises(PermissionDeniedError):
        carol.threads.create()
    assert carol.threads.search(limit=100) == []


# -- another user's thread does not exist for you --------------------------------------------------------------

def test_another_users_thread_is_a_404_everywhere_and_absent_from_search(served, alice, bob, alices_thread):
    thread_id = alices_thread["thread_id"]
    (run,) = alice.runs.list(thread_id)
    calls = {
        "get": lambda: bob.threads.get(thread_id),
        "state": lambda: bob.threads.get_state(thread_id),
        "update_state": lambda: bob.threads.update_state(thread_id, {"final_answer": "bob was here"}),
        "history": lambda: bob.threads.get_history(thread_id),
        "patch": lambda: bob.threads.update(thread_id, metadata={"owner": "bob"}),
        "copy": lambda: bob.threads.copy(thread_id),
        "delete": lambda: bob.threads.delete(thread_id),
        "runs.create": lambda: bob.runs.create(thread_id, "react", input=human(WEATHER)),
        "runs.wait": lambda: bob.runs.wait(thread_id, "react", input=human(WEATHER)),
        "runs.list": lambda: bob.runs.list(thread_id),
        "runs.get": lambda: bob.runs.get(thread_id, run["run_id"]),
        "runs.join": lambda: bob.runs.join(thread_id, run["run_id"]),
        "runs.cancel": lambda: bob.runs.cancel(thread_id, run["run_id"]),
        "runs.delete": lambda: bob.runs.delete(thread_id, run["run_id"]),
        "runs.join_stream": lambda: list(bob.runs.join_stream(thread_id, run["run_id"])),
        "threads.join_stream": lambda: list(bob.threads.join_stream(thread_id)),
    }
    assert {name: status_of(call) for name, call in calls.items()} == dict.fromkeys(calls, 404)
    stream = httpx.post(f"{served.url}/threads/{thread_id}/runs/stream", timeout=5,
                        headers={"Authorization": "Bearer token-bob"}, json={"assistant_id": "react", "input": {}})
    assert stream.status_code == 404
    for path, body in (("stream/events", {"channels": ["values"]}),  # the thread-centric protocol's
                       ("commands", {"id": 1, "method": "run.start", "params": {"assistant_id": "react"}}),
                       ("commands", {"id": 2, "method": "input.respond", "params": {"interrupt_id": "x" * 32}})):
        answer = httpx.post(f"{served.url}/threads/{thread_id}/{path}", timeout=5, json=body,
                            headers={"Authorization": "Bearer token-bob"})
        assert answer.status_code == 404, (path, body)
    assert thread_id not in [t["thread_id"] for t in bob.threads.search(limit=1000)]
    assert bob.threads.search(ids=[thread_id]) == []
    assert bob.threads.count(metadata={"topic": "weather"}) == 0
    # and nothing of it changed: alice still sees her thread, her run and her answer
    assert alice.threads.get(thread_id)["metadata"]["owner"] == "alice"
    assert alice.threads.get_state(thread_id)["values"]["final_answer"] != "bob was here"
    assert [r["run_id"] for r in alice.runs.list(thread_id)] == [run["run_id"]]
    assert thread_id in [t["thread_id"] for t in alice.threads.search(limit=1000)]


def test_another_user_cannot_approve_a_pending_http_get(served, alice, bob):
    thread = alice.threads.create()
    parts = list(alice.runs.stream(thread["thread_id"], "react", input=human("Fetch https://example.com/page"),
                                   stream_mode="updates"))
    assert any("__interrupt__" in p.data for p in parts if p.event == "updates")
    assert status_of(lambda: bob.runs.wait(thread["thread_id"], "react",
                                           command={"resume": {"decisions": [{"type": "approve"}]}})) == 404
    assert status_of(lambda: bob.threads.update_state(thread["thread_id"], None, as_node="approve")) == 404
    assert alice.threads.get(thread["thread_id"])["status"] == "interrupted"
    assert alice.threads.get_state(thread["thread_id"])["next"] == ["approve"]


# -- who the graph runs for -------------------------------------------------------------------------------------

def test_the_graph_sees_the_authenticated_user_and_never_one_the_client_names(served, alice):
    thread = alice.threads.create()
    spoofed = {"configurable": {"langgraph_auth_user_id": "bob", "langgraph_auth_user": {"identity": "bob"},
                                "langgraph_auth_permissions": ["admin"]}}
    alice.runs.wait(thread["thread_id"], "react", input=human("上海的天气怎么样？"), config=spoofed)
    assert "weather 上海 user=alice identity=alice" in served.log.read_text(encoding="utf-8")
    (run,) = alice.runs.list(thread["thread_id"])
    configurable = run["kwargs"]["config"]["configurable"]
    assert configurable["langgraph_auth_user_id"] == "alice"
    assert configurable["langgraph_auth_permissions"] == ["threads:write"]


def test_a_cli_session_is_invisible_to_a_user_whose_filter_names_an_owner(served, alice, monkeypatch, capfd):
    session = f"cli-{uuid.uuid4().hex[:8]}"  # `reactgraph ask` in the test's process, with the service's settings
    asked = run_in_process(monkeypatch, capfd, ["ask", "计算 2 + 3 等于多少", "--session", session, "--json"],
                           **served.env)
    assert asked.returncode == 0, asked.stderr
    assert session not in [t["thread_id"] for t in alice.threads.search(limit=1000)]
    assert status_of(lambda: alice.threads.get_state(session)) == 404
    assert status_of(lambda: alice.runs.wait(session, "react", input=human("现在几点了？"))) == 404


# -- one team's api keys ----------------------------------------------------------------------------------------

def test_api_keys_let_in_only_a_listed_key_and_the_caller_is_its_name(redis_url, tmp_path):
    keys = tmp_path / "keys"
    secret = "k-" + uuid.uuid4().hex
    keys.write_text(f"# the ops team\nops: {secret}\n\nci: {uuid.uuid4().hex}\n", encoding="utf-8")
    service = start_with(redis_url, tmp_path, REACTGRAPH_API_KEYS=str(keys))
    try:
        assert httpx.post(f"{service.url}/threads/search", json={}, timeout=5).status_code == 401
        wrong = httpx.post(f"{service.url}/threads/search", json={}, headers={"x-api-key": secret[:-1]}, timeout=5)
        assert wrong.status_code == 401 and secret[:-1] not in wrong.text
        client = get_sync_client(url=service.url, api_key=secret)  # langgraph-sdk sends it as x-api-key
        thread = client.threads.create()
        run = client.runs.create(thread["thread_id"], "react", input=human("计算 2 + 3 等于多少"))
        assert run["kwargs"]["config"]["configurable"]["langgraph_auth_user_id"] == "ops"
        client.runs.join(thread["thread_id"], run["run_id"])
    finally:
        stop(service)
    logs = "".join(p.read_text(errors="replace") for p in tmp_path.glob("serve-*.err"))
    assert "auth: api keys from" in logs and secret not in logs


def test_a_bad_api_keys_file_is_one_line_that_shows_no_key(tmp_path, refused_start):
    keys = tmp_path / "keys"
    keys.write_text("ops: short-key\n", encoding="utf-8")
    code, out, err = refused_start("serve", "--api-keys", str(keys), "--port", str(free_port()))
    assert code != 0
    assert "line 1" in err and "short-key" not in err + out


# -- loopback is the only place without auth ----------------------------------------------------------------------

@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10"])
def test_a_non_loopback_host_without_auth_refuses_to_start_with_one_line(host, refused_start):
    code, _, err = refused_start("serve", "--host", host, "--port", str(free_port()))
    assert code != 0
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "--api-keys FILE" in lines[0] and "--no-auth" in lines[0] and "auth" in lines[0]


def test_no_auth_serves_every_interface_with_a_warning(redis_url, tmp_path):
    service = start_with(redis_url, tmp_path, "--host", "0.0.0.0", "--no-auth", workers=0)
    try:  # bound to every interface, spoken to on loopback only
        assert httpx.post(f"{service.url}/threads", json={}, timeout=10).status_code == 200
    finally:
        stop(service)
    errors = sorted(tmp_path.glob("serve-*.err"))[-1].read_text()
    assert "WARNING: serving 0.0.0.0 with --no-auth" in errors


def test_auth_handlers_without_a_store_rule_close_the_store(alice):
    """auth_owner.py has rules for threads and assistants only: the store (every thread's long-term memory) stays
    closed rather than open to every caller."""
    with pytest.raises(PermissionDeniedError) as refused:
        alice.store.put_item(["notes"], "k", {"v": 1})
    assert "@auth.on.store" in refused.value.response.json()["detail"]
    assert status_of(lambda: alice.store.search_items(["notes"])) == 403
