"""Every route of `reactgraph serve`, fuzzed from the service's own OpenAPI document (`/openapi.json`) with
hypothesis: each operation's path parameters, query string and body drawn from what the document describes
(each field of its type, realistic values among them) and from what it does not (other types, other fields, bodies
that are no object or no JSON, lone surrogates), path ids now and then ones that exist (a thread with a
checkpoint, an assistant, a run), against a real server on a Redis of its own. Every answer is one JSON line naming
its cause: no bare `Internal Server Error`, no 500 for an exception nothing answered (those carry a request id),
and no traceback in the server's log without a request id.

$REACTGRAPH_SERVICE_FUZZ_REQUESTS sets how many requests (default 400; `.ci/run` sends 20,000). The figures
(requests, answers by status class, bare 500s, 500s with a request id) are printed.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.local_servers import free_port, private_redis
from test_serve import Service, service_env

REQUESTS = int(os.environ.get("REACTGRAPH_SERVICE_FUZZ_REQUESTS", "400"))
# Waits and streams of a run no worker takes (the server runs none) are cut off: the answer is what is fuzzed.
ANSWER_S = 3.0


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory) -> Iterator[tuple[Service, dict[str, list[str]]]]:
    tmp = tmp_path_factory.mktemp("fuzz")
    start_redis, processes = private_redis(tmp / "redis")  # what the fuzz creates goes with it
    try:
        redis_url = start_redis()
        port = free_port()  # once the Redis listens: not its port
        env = service_env(redis_url, f"svc-fuzz-{uuid.uuid4().hex[:8]}", tmp / "calls.log",
                          REACTGRAPH_LOG_FORMAT="text")
        service = Service(f"http://127.0.0.1:{port}", env, tmp / "calls.log", [])
        service.start_api(port, 0)
        try:
            yield service, known_ids(service)
        finally:
            for process in service.processes:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:  # a wait for a run no worker takes holds its connection
                    process.kill()
                    process.wait()
    finally:
        for process in processes:
            process.kill()
            process.wait()


def known_ids(service: Service) -> dict[str, list[str]]:
    """Ids that exist, for path parameters: threads (one with a checkpoint), an assistant, a run."""
    client = service.client()
    threads = [client.threads.create()["thread_id"] for _ in range(2)]
    client.threads.update_state(threads[0], {"messages": [{"role": "human", "content": "计算 2+3"}]})
    assistant = client.assistants.create("react", name="fuzzed")["assistant_id"]
    run = client.runs.create(threads[1], "react", input={"messages": [{"role": "human", "content": "hi"}]})
    return {"thread_id": threads, "assistant_id": [assistant, "react"], "run_id": [run["run_id"]],
            "checkpoint_id": [client.threads.get_state(threads[0])["checkpoint"]["checkpoint_id"]]}


def server_log(service: Service) -> str:
    return "".join(p.read_text(errors="replace") for p in sorted(service.log.parent.glob("serve-*.err")))


def anonymous_tracebacks(log: str) -> list[str]:
    """Tracebacks whose record (the line before) carries no request id; a chained one (its cause's, above it)
    belongs to the record of the first."""
    lines = log.splitlines()
    chained = ("The above exception was the direct cause", "During handling of the above exception")
    return [lines[i - 1] if i else "" for i, line in enumerate(lines)
            if line.startswith("Traceback") and (i == 0 or "request id" not in lines[i - 1])
            and not (i >= 2 and lines[i - 2].startswith(chained))]


# Values the handlers know, so that draws reach past their first checks; and text no handler expects.
WORDS = ["react", "plan_solve", "", "__end__", "__start__", "think", "asc", "desc", "updated_at", "created_at",
         "true", "false", "1", "interrupt", "rollback", "enqueue", "reject", "keep", "delete", "create", "raise",
         "do_nothing", "idle", "busy", "error", "values", "updates", "messages", "human", "ai", "sub|1", "a.b"]
SURROGATES = st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=2)
TEXT = st.one_of(st.sampled_from(WORDS), st.text(max_size=20), SURROGATES)
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                    max_leaves=12)
MESSAGES = st.fixed_dictionaries({"messages": st.lists(st.fixed_dictionaries(
    {"role": st.sampled_from(["human", "user", "ai", "system", "tool", "nope"]), "content": TEXT | JSON}),
    max_size=3) | JSON})
BY_TYPE = {"string": TEXT, "integer": st.integers(-5, 2000) | st.integers(), "number": st.floats(allow_nan=False),
           "boolean": st.booleans(), "object": st.dictionaries(TEXT, JSON, max_size=4) | MESSAGES,
           "array": st.lists(TEXT, max_size=4) | st.lists(JSON, max_size=3), None: JSON | MESSAGES}


def of_type(schema: dict) -> st.SearchStrategy:
    """A value of the field's declared type, or (now and then) any JSON at all."""
    return st.one_of(BY_TYPE[schema.get("type")], JSON) if schema else BY_TYPE[None]


def requests_of(operation: dict, ids: dict[str, list[str]]) -> st.SearchStrategy:
    """(path parameters, query, body bytes or None) for one operation of the document."""
    params = operation.get("parameters", [])
    path = st.fixed_dictionaries({p["name"]: st.sampled_from(ids.get(p["name"]) or ["x"]) | TEXT.filter(bool)
                                  for p in params if p["in"] == "path"})
    query = st.fixed_dictionaries({}, optional={p["name"]: st.one_of(TEXT, st.integers().map(str))
                                                for p in params if p["in"] == "query"})
    fields = (((operation.get("requestBody") or {}).get("content") or {}).get("application/json") or {}).get(
        "schema", {}).get("properties")
    if fields is None:
        return st.tuples(path, query, st.none())
    document = st.fixed_dictionaries({}, optional={name: of_type(schema) for name, schema in fields.items()})
    body = st.one_of(document.map(_encoded), document.flatmap(
        lambda d: st.dictionaries(TEXT, JSON, max_size=3).map(lambda extra: _encoded({**extra, **d}))),
        JSON.map(_encoded), st.binary(max_size=40), st.just(b""))
    return st.tuples(path, query, body)


def _encoded(value) -> bytes:
    return json.dumps(value).encode()  # ASCII: a lone surrogate goes as its \\ud800 escape, as a client sends it


@pytest.mark.timeout(max(300, REQUESTS // 20))  # 20,000 requests took 130 s alone, more beside other work
def test_no_route_answers_a_bare_500_or_logs_a_traceback_without_a_request_id(fuzzed):
    service, ids = fuzzed
    paths = httpx.get(f"{service.url}/openapi.json", timeout=30).json()["paths"]
    operations = [(path, method, operation) for path, methods in paths.items()
                  for method, operation in methods.items()]
    assert len(operations) >= 50  # every route is in the document
    figures: Counter[str] = Counter()
    bare: list[str] = []
    started = time.monotonic()
    with httpx.Client(base_url=service.url, timeout=ANSWER_S) as http:
        while figures["requests"] < REQUESTS:  # rounds: an operation with few inputs (GET /ok) is done sooner
            per_operation = max(1, math.ceil((REQUESTS - figures["requests"]) / len(operations)))
            for path, method, operation in operations:
                fuzz_operation(http, path, method, requests_of(operation, ids), per_operation, figures, bare)
    took = time.monotonic() - started
    print(f"\nservice fuzz: {figures['requests']} requests to {len(operations)} operations in {took:.1f} s: "
          f"{figures['2xx']} 2xx, {figures['4xx']} 4xx, {figures['5xx']} 5xx, "
          f"{len(bare) - figures['500 with a request id']} bare 500s, "
          f"{figures['500 with a request id']} 500s with a request id, {figures['cut off']} waits cut off; by status: "
          + ", ".join(f"{status} {count}" for status, count in sorted(figures.items()) if status.isdigit()))
    assert bare == []
    assert anonymous_tracebacks(server_log(service)) == []
    assert figures["requests"] >= REQUESTS


def fuzz_operation(http: httpx.Client, path: str, method: str, drawn: st.SearchStrategy, examples: int,
                   figures: Counter, bare: list[str]) -> None:
    """`examples` requests to one operation; each answer counted, a bare 5xx (or one with a request id: an
    exception nothing answered) kept with its request."""
    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(request=drawn)
    def send(request) -> None:
        path_params, query, body = request
        url = path.format(**{name: _quoted(value) for name, value in path_params.items()})
        if query:  # a lone surrogate goes as the bytes it would be (no UTF-8), as a careless client sends it
            url += "?" + "&".join(f"{_quoted(name)}={_quoted(value)}" for name, value in query.items())
        headers = {"content-type": "application/json"} if body else {}
        figures["requests"] += 1
        try:
            answer = http.request(method.upper(), url, content=body, headers=headers)
        except httpx.TimeoutException:
            figures["cut off"] += 1
            return
        figures[f"{answer.status_code // 100}xx"] += 1
        figures[str(answer.status_code)] += 1
        if answer.status_code >= 500:
            detail = _detail(answer)
            if detail is None:
                bare.append(f"{answer.status_code} {method.upper()} {url} {query} {body!r}: {answer.text[:200]!r}")
            elif "request id" in detail:  # not bare, but an exception no handler expected: a bug all the same
                figures["500 with a request id"] += 1
                bare.append(f"{answer.status_code} {method.upper()} {url} {body!r}: {detail}")

    send()


def _quoted(text: str) -> str:
    return quote(text, safe="", errors="surrogatepass")


def _detail(answer: httpx.Response) -> str | None:
    """The one line of an answer in the service's error shape; None for anything else (a bare 500)."""
    try:
        detail = answer.json().get("detail")
    except (ValueError, AttributeError):
        return None
    return detail if isinstance(detail, str) and "\n" not in detail else None
