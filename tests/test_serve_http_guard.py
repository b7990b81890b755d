"""`reactgraph serve` on a network, attacked as a web page or a careless or hostile client would: cross-site
POSTs, foreign Host headers (DNS rebinding), CORS, NaN/Infinity and deep input, oversized and slow bodies,
slowloris headers, a bad Last-Event-ID, more streams than the process has room for, and a damaged thread.
Each answer is one line in the Agent Server's error shape, and the service goes on serving everyone else."""

from __future__ import annotations

import contextlib
import json
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from langgraph_sdk.errors import NotFoundError

from support.local_servers import free_port, http_request
from test_serve import Service, human, service_env, stop, wait_for

STREAMS = 8
# How long a request may take: a bound on the wait, not what any test here is about (a 3 MB body or 1,000
# lookups took past 10 s beside the whole suite on a loaded machine)
WAIT_S = 60
APP_ORIGIN = "http://app.example"
SLOW = "广州的天气怎么样？"  # service_tools sleeps $SLOW_S for it


@pytest.fixture(scope="module")
def guarded(redis_url: str, tmp_path_factory) -> Iterator[Service]:
    tmp = tmp_path_factory.mktemp("guard")
    config = tmp / "langgraph.json"
    config.write_text(json.dumps({"graphs": {}, "http": {"cors": {
        "allow_origins": [APP_ORIGIN], "allow_methods": ["GET", "POST"], "allow_headers": ["content-type"],
        "max_age": 60}}}))
    port = free_port()
    service = Service(f"http://127.0.0.1:{port}",
                      service_env(redis_url, f"svc-guard-{uuid.uuid4().hex[:8]}", tmp / "calls.log",
                                  SLOW_CITIES="广州", SLOW_S="60"), tmp / "calls.log", [])
    service.start_api(port, 2, "--config", str(config), "--allowed-hosts", "api.example",
                      "--max-streams", str(STREAMS), "--drain", "1")
    yield service
    stop(service)


@pytest.fixture(scope="module")
def impatient(redis_url: str, tmp_path_factory) -> Iterator[Service]:
    """A service that waits 1 s for a request's head and 2 s for its body: the timeouts under test, kept apart from
    `guarded` (default timeouts), whose other tests send 3 MB and 10 MB bodies: beside the whole suite on a loaded
    machine, reading such a body took over 2 s and drew a 408 instead of the 200 or 413 those tests check."""
    tmp = tmp_path_factory.mktemp("impatient")
    port = free_port()
    service = Service(f"http://127.0.0.1:{port}",
                      service_env(redis_url, f"svc-impatient-{uuid.uuid4().hex[:8]}", tmp / "calls.log"),
                      tmp / "calls.log", [])
    service.start_api(port, 0, "--header-timeout", "1", "--body-timeout", "2")
    yield service
    stop(service)


def stderr_of(service: Service) -> str:
    return "".join(p.read_text(errors="replace") for p in sorted(service.log.parent.glob("serve-*.err")))


def post(service: Service, path: str, content: bytes | str, **headers: str) -> httpx.Response:
    return http_request("POST", f"{service.url}{path}", content=content, timeout=WAIT_S,
                      headers={"content-type": "application/json", **headers})


def one_line(response: httpx.Response) -> str:
    detail = response.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail and "Traceback" not in detail, detail
    return detail


def new_thread(service: Service) -> str:
    return service.client().threads.create()["thread_id"]


def run_body(question: str = "计算 2+3", **extra) -> dict:
    return {"assistant_id": "react", "input": human(question), **extra}


# -- browser-borne requests -----------------------------------------------------------------------------------

def test_a_cross_site_text_plain_post_is_refused_and_creates_no_run(guarded):
    thread = new_thread(guarded)
    answer = httpx.post(f"{guarded.url}/threads/{thread}/runs", content=json.dumps(run_body()), timeout=WAIT_S,
                        headers={"content-type": "text/plain"})
    assert answer.status_code == 415 and "text/plain" in one_line(answer)
    form = httpx.post(f"{guarded.url}/threads", data={"a": "b"}, timeout=WAIT_S)  # a form needs no preflight either
    assert form.status_code == 415
    assert guarded.client().runs.list(thread) == []
    ok = post(guarded, f"/threads/{thread}/runs", json.dumps(run_body()),
              **{"content-type": "application/json; charset=utf-8"})
    assert ok.status_code == 200


def test_a_request_from_a_page_of_another_origin_is_refused_even_as_json(guarded):
    answer = post(guarded, "/threads", "{}", origin="http://evil.example")
    assert answer.status_code == 403 and "evil.example" in one_line(answer)
    image = httpx.get(f"{guarded.url}/threads/x/runs", headers={"sec-fetch-site": "cross-site"}, timeout=WAIT_S)
    assert image.status_code == 403  # an <img> or link from another site: no Origin, but the browser says so
    assert post(guarded, "/threads", "{}", origin=guarded.url).status_code == 200  # the server's own origin


def test_a_host_the_server_does_not_answer_to_is_refused(guarded):
    port = guarded.url.rsplit(":", 1)[1]
    for host in (f"evil.example:{port}", "rebind.attacker.test", ""):
        answer = httpx.get(f"{guarded.url}/ok", headers={"host": host}, timeout=WAIT_S)
        assert answer.status_code == 421 and "--allowed-hosts" in one_line(answer), host
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "api.example", f"api.example:{port}"):
        assert httpx.get(f"{guarded.url}/ok", headers={"host": host}, timeout=WAIT_S).status_code == 200, host


def test_cors_answers_only_the_configured_origin(guarded):
    def preflight(origin: str) -> httpx.Response:
        return httpx.options(f"{guarded.url}/threads", timeout=WAIT_S, headers={
            "origin": origin, "access-control-request-method": "POST",
            "access-control-request-headers": "content-type"})

    assert "access-control-allow-origin" not in preflight("http://evil.example").headers
    allowed = preflight(APP_ORIGIN)
    assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == APP_ORIGIN
    created = post(guarded, "/threads", "{}", origin=APP_ORIGIN)
    assert created.status_code == 200 and created.headers["access-control-allow-origin"] == APP_ORIGIN


def test_an_unknown_route_answers_in_the_agent_servers_error_shape(guarded):
    answer = httpx.get(f"{guarded.url}/no/such/route", timeout=WAIT_S)
    assert answer.status_code == 404 and one_line(answer)


# -- bounded input --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_nan_and_infinity_are_refused_and_the_thread_still_runs_and_search_works(guarded, number):
    client = guarded.client()
    probe = f"nan-{uuid.uuid4().hex[:8]}"
    thread = client.threads.create(metadata={"probe": probe})["thread_id"]
    raw = json.dumps(run_body(), ensure_ascii=False).replace('"计算 2+3"', '"计算 2+3", "x": ' + number)
    answer = post(guarded, f"/threads/{thread}/runs/wait", raw)
    assert answer.status_code == 422 and number.lstrip("-") in one_line(answer)
    update = post(guarded, f"/threads/{thread}/state", '{"values": {"final_answer": ' + number + "}}")
    assert update.status_code == 422
    final = client.runs.wait(thread, "react", input=human("计算 2+3"))
    assert "5" in final["final_answer"]
    # a search over every thread (the other tests' CLI sessions included) that finds it
    assert [t["thread_id"] for t in client.threads.search(metadata={"probe": probe})] == [thread]


def test_input_nested_900_deep_is_refused_and_the_runs_list_still_works(guarded):
    client = guarded.client()
    thread = new_thread(guarded)
    deep: object = "x"
    for _ in range(900):
        deep = [deep]
    answer = post(guarded, f"/threads/{thread}/runs", json.dumps(run_body(metadata={"deep": deep})))
    assert answer.status_code == 422 and "deeper" in one_line(answer)
    answer = post(guarded, f"/threads/{thread}/runs", '{"input": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert answer.status_code == 422
    client.runs.wait(thread, "react", input=human("计算 2+3"))
    assert len(client.runs.list(thread)) == 1


def test_a_3_mb_input_is_a_run_that_exists(guarded):
    client = guarded.client()
    thread = new_thread(guarded)
    answer = post(guarded, f"/threads/{thread}/runs", json.dumps(run_body("计算 2+3 " + "x" * 3_000_000)))
    assert answer.status_code == 200, answer.text
    run = answer.json()
    assert client.runs.get(thread, run["run_id"])["run_id"] == run["run_id"]  # never 200 without a run
    assert [r["run_id"] for r in client.runs.list(thread)] == [run["run_id"]]
    with contextlib.suppress(NotFoundError):  # it may have ended: nothing to cancel (langgraph-api's 404)
        client.runs.cancel(thread, run["run_id"])


def test_records_over_the_stored_limit_are_refused_with_413_and_the_thread_stays_readable(guarded):
    thread = new_thread(guarded)
    big = json.dumps({"metadata": {"a": "x" * 3_000_000}})
    # WAIT_S bounds the wait only: two 3 MB bodies took ~2 s at load 10 and past 10 s beside the whole suite
    assert httpx.patch(f"{guarded.url}/threads/{thread}", content=big, timeout=WAIT_S,
                       headers={"content-type": "application/json"}).status_code == 200
    again = httpx.patch(f"{guarded.url}/threads/{thread}", content=big.replace('"a"', '"b"'), timeout=WAIT_S,
                        headers={"content-type": "application/json"})
    assert again.status_code == 413 and "limit" in one_line(again)
    assert len(guarded.client().threads.get(thread)["metadata"]["a"]) == 3_000_000


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _raw_request(service: Service, head: str, body: bytes = b"", timeout: float = 5.0) -> tuple[bytes, float]:
    """Send `head` and `body` on a fresh socket; (what came back before the server closed, seconds it took)."""
    port = int(service.url.rsplit(":", 1)[1])
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head.encode() + body)
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    return received, time.monotonic() - started


def test_a_200_mb_body_is_refused_from_its_content_length_without_being_read(guarded):
    pid = guarded.processes[0].pid
    before = _rss_kb(pid)
    head = ("POST /threads HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {200 * 1024 * 1024}\r\n\r\n")
    # Read, the body would hold the answer until the body timeout (30 s) or our socket's (20 s): within 10 s,
    # the answer came from the Content-Length alone, with room for a loaded machine (3 s was tight beside the suite).
    answer, took = _raw_request(guarded, head, b'{"metadata": {"a": "' + b"x" * 1000, timeout=20)
    assert answer.startswith(b"HTTP/1.1 413") and b"limit" in answer and took < 10, (answer[:200], took)
    assert _rss_kb(pid) - before < 50_000


def test_a_chunked_body_past_the_limit_is_refused(guarded):
    def chunks() -> Iterator[bytes]:
        yield b'{"metadata": {"a": "'
        for _ in range(10):
            yield b"x" * 1024 * 1024

    answer = httpx.post(f"{guarded.url}/threads", content=chunks(), timeout=WAIT_S,
                        headers={"content-type": "application/json"})
    assert answer.status_code == 413 and "limit" in one_line(answer)


def test_a_body_that_never_arrives_is_timed_out(impatient):
    head = "POST /threads HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    answer, took = _raw_request(impatient, head, b"{", timeout=10)
    assert answer.startswith(b"HTTP/1.1 408") and 1.5 < took < 6, (answer[:200], took)


def test_slowloris_headers_are_cut_off_and_others_are_served_meanwhile(impatient):
    port = int(impatient.url.rsplit(":", 1)[1])
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        # byte by byte, at least 0.05 s apart: the whole head would take 11 s and more; cut off at 1 s, it is cut
        # within 6 s even on a loaded machine
        head = b"GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
        closed_after = None
        for byte in head:
            try:
                sock.sendall(bytes([byte]))
                # the others are served (WAIT_S bounds the wait only: 2 s was tight for a loaded machine)
                assert httpx.get(f"{impatient.url}/ok", timeout=WAIT_S).status_code == 200
            except (BrokenPipeError, ConnectionResetError):
                closed_after = time.monotonic() - started
                break
            sock.settimeout(0.05)
            try:
                if sock.recv(4096) is not None:
                    closed_after = time.monotonic() - started
                    break
            except TimeoutError:
                pass
            if time.monotonic() - started > 8:
                break
    assert closed_after is not None and closed_after < 6, closed_after


def test_a_bad_last_event_id_is_one_line_and_no_traceback(guarded):
    client = guarded.client()
    thread = new_thread(guarded)
    run = client.runs.create(thread, "react", input=human("计算 2+3"))
    client.runs.join(thread, run["run_id"])
    for bad in ("99999999999999999999-1", "5-", "-5", "abc", "1-2-3"):
        answer = httpx.get(f"{guarded.url}/threads/{thread}/runs/{run['run_id']}/stream", timeout=WAIT_S,
                           headers={"last-event-id": bad})
        assert answer.status_code == 422 and "Last-Event-ID" in one_line(answer), bad
    whole = httpx.get(f"{guarded.url}/threads/{thread}/runs/{run['run_id']}/stream", timeout=WAIT_S,
                      headers={"last-event-id": "-"})
    assert whole.status_code == 200 and "event: metadata" in whole.text
    assert "Traceback" not in stderr_of(guarded)


def test_streams_beyond_the_cap_get_429_and_other_clients_are_served(guarded):
    client = guarded.client()
    thread = new_thread(guarded)
    run = client.runs.create(thread, "react", input=human(SLOW))
    url = f"{guarded.url}/threads/{thread}/runs/{run['run_id']}/stream"
    held, refused = [], []
    with httpx.Client(timeout=WAIT_S, limits=httpx.Limits(max_connections=200)) as http:
        try:
            for _ in range(150):
                response = http.send(http.build_request("GET", url), stream=True)
                if response.status_code == 200:
                    held.append(response)
                else:
                    refused.append((response.status_code, response.headers.get("retry-after")))
                    response.read()
                    response.close()
            other = guarded.client()  # meanwhile another client works
            created = other.threads.create()
            assert other.threads.get(created["thread_id"])["thread_id"] == created["thread_id"]
            assert other.threads.search(limit=5)
            busy = httpx.post(f"{guarded.url}/threads/{created['thread_id']}/runs/wait", timeout=WAIT_S,
                              json=run_body())
            assert busy.status_code == 429 and busy.headers["retry-after"]
            assert other.runs.list(created["thread_id"]) == []  # a wait refused for the cap made no run
        finally:
            for response in held:
                response.close()
    assert len(held) == STREAMS and len(refused) == 150 - STREAMS
    assert {status for status, _ in refused} == {429} and all(after for _, after in refused)
    client.runs.cancel(thread, run["run_id"])
    # the slots come back once the streams are closed
    wait_for(lambda: client.runs.wait(new_thread(guarded), "react", input=human("计算 2+3")) is not None, 20,
             "a wait after the streams closed")


def test_thread_search_caps_its_ids(guarded):
    answer = post(guarded, "/threads/search", json.dumps({"ids": [str(uuid.uuid4()) for _ in range(1001)]}))
    assert answer.status_code == 422 and "1000" in one_line(answer)
    assert post(guarded, "/threads/count", json.dumps({"ids": [str(uuid.uuid4())] * 1000})).status_code == 200


# -- a damaged thread -----------------------------------------------------------------------------------------

def test_a_damaged_thread_is_named_on_get_and_passed_over_by_search(guarded, redis_url):
    from langchain_core.messages import HumanMessage

    from reactgraph.graph import build_react_graph
    from reactgraph.memory.redis_checkpoint import RedisSaver
    from reactgraph.service.keys import ServiceKeys

    client = guarded.client()
    garbled, poisoned, healthy = (new_thread(guarded) for _ in range(3))
    for thread in (garbled, poisoned, healthy):
        client.runs.wait(thread, "react", input=human("计算 2+3"))
    raw = redis.Redis.from_url(redis_url)
    try:
        raw.set(ServiceKeys(guarded.env["REACTGRAPH_SERVICE_PREFIX"]).thread(garbled), b"\x93garbage")
    finally:
        raw.close()
    with RedisSaver.from_url(redis_url) as saver:  # what NaN accepted by the old server left in a checkpoint
        graph = build_react_graph(checkpointer=saver)
        graph.update_state({"configurable": {"thread_id": poisoned}},
                           {"messages": [HumanMessage("x")], "final_answer": float("nan")})
    ids = [garbled, poisoned, healthy]
    found = post(guarded, "/threads/search", json.dumps({"ids": ids, "limit": 10}))
    assert found.status_code == 200 and [t["thread_id"] for t in found.json()] == [healthy]
    everyone = post(guarded, "/threads/search", json.dumps({"limit": 1000}))
    assert everyone.status_code == 200 and healthy in [t["thread_id"] for t in everyone.json()]
    assert post(guarded, "/threads/count", json.dumps({"ids": ids})).status_code == 200
    for thread in (garbled, poisoned):
        answer = httpx.get(f"{guarded.url}/threads/{thread}", timeout=WAIT_S)
        assert answer.status_code == 500 and thread in one_line(answer) and "unreadable" in one_line(answer)
    state = httpx.get(f"{guarded.url}/threads/{poisoned}/state", timeout=WAIT_S)
    assert state.status_code == 500 and "JSON cannot carry" in one_line(state)
    assert "Traceback" not in stderr_of(guarded)


def test_a_misspelt_cors_setting_refuses_to_start_with_one_line(tmp_path, refused_start):
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"http": {"cors": {"allow_origin": ["https://app.example"]}}}))
    code, _, err = refused_start("serve", "--port", str(free_port()), "--config", str(config))
    assert code != 0 and "allow_origin" in err and "Traceback" not in err, err
