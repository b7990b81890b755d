"""`reactgraph serve` and `reactgraph worker`, driven by langgraph-sdk (the client LangGraph users have) over
loopback HTTP, on the test Redis: assistants, threads, state, history, runs, streams, interrupts, cancel,
multitask strategies, and the CLI and the service sharing sessions."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from support.cli_env import clean_env, run_in_process
from support.forked_commands import ForkedCommand
from support.local_servers import free_port, http_client

TESTS = str(Path(__file__).parent)
STARTUP_TIMEOUT_S = 60
WEATHER = "北京和上海的天气分别怎么样？哪个城市更热？"


def service_env(redis_url: str, prefix: str, log: Path, **extra: str) -> dict[str, str]:
    env = clean_env()
    env.update(REDIS_URL=redis_url, REACTGRAPH_SERVICE_PREFIX=prefix, REACTGRAPH_TOOLS="support.service_tools:TOOLS",
               SERVICE_LOG=str(log), REACTGRAPH_SESSION_LEASE_TTL="3",
               PYTHONPATH=os.pathsep.join(filter(None, [TESTS, env.get("PYTHONPATH")])))
    env.update(extra)  # a test's own settings win (e.g. a longer lease)
    return env


def wait_for(predicate, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} not reached in {timeout:g} s")


class PortTaken(AssertionError):
    """`reactgraph serve` could not bind its port: something else listens there."""


@dataclass
class Service:
    url: str
    env: dict[str, str]
    log: Path
    processes: list[ForkedCommand]
    _client: Any = field(default=None, init=False, repr=False)

    def client(self):
        """One langgraph-sdk client for the service's tests: each client made anew would load the CA bundle
        into a TLS context of its own (≈ 20 ms of CPU), for a server that speaks plain HTTP."""
        if self._client is None:
            self._client = get_sync_client(url=self.url, api_key=None)
        return self._client

    def calls(self) -> list[str]:
        return [line.rsplit(" pid=", 1)[0] for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def _spawn(self, argv: list[str], extra: dict[str, str]) -> ForkedCommand:
        """`reactgraph ARGV` (forked: support.forked_commands), its stderr in a file of its own."""
        output = self.log.parent / f"{argv[0]}-{len(self.processes)}.err"
        process = ForkedCommand(argv, {**self.env, **extra}, stderr=output)
        self.processes.append(process)
        return process

    def start_worker(self, *options: str, **extra: str) -> ForkedCommand:
        return self._spawn(["worker", "--concurrency", "2", *options], extra)

    def start_api(self, port: int, workers: int = 0, *options: str, **extra: str) -> ForkedCommand:
        """`reactgraph serve` on `port` (with `options`), answering /ok before this returns. A port another test's
        server took between `free_port()` and the bind (the kernel hands a released port out again) moves the
        service to another free port, at most twice: `url` follows."""
        for attempt in range(3):
            process = self._spawn(["serve", "--port", str(port), "--workers", str(workers), *options], extra)
            try:
                self.wait_answering(process, f"http://127.0.0.1:{port}")
                return process
            except PortTaken:
                if attempt == 2:
                    raise
                port, self._client = free_port(), None
                self.url = f"http://127.0.0.1:{port}"
        raise AssertionError("unreachable")

    def wait_answering(self, process: ForkedCommand, url: str, errors: Path | None = None) -> None:
        """Until the process (`reactgraph serve`, or `ui`) answers /ok at `url` — its own answer: another server may
        hold the port; its stderr (`errors`, else the newest serve-*.err) if it exits first, PortTaken if it could
        not bind."""
        def answers() -> bool:
            if process.poll() is not None:
                written = [errors] if errors else sorted(self.log.parent.glob("serve-*.err"),
                                                         key=lambda path: path.stat().st_mtime)
                said = written[-1].read_text()[-2000:] if written else ""
                raise (PortTaken if "address already in use" in said.lower() else AssertionError)(
                    f"{' '.join(process.args)} exited: {said}")
            try:
                answer = client.get(f"{url}/ok")
                return answer.status_code == 200 and answer.json() == {"ok": True}
            except (httpx.HTTPError, ValueError):
                return False

        with http_client(timeout=1) as client:  # one client for the polls
            wait_for(answers, STARTUP_TIMEOUT_S, "the server answering /ok")


def start_service(redis_url: str, tmp: Path, *, workers: int = 2, options: tuple[str, ...] = (),
                  **extra: str) -> Service:
    port = free_port()
    prefix = f"svc-test-{uuid.uuid4().hex[:8]}"
    log = tmp / "calls.log"
    service = Service(f"http://127.0.0.1:{port}", service_env(redis_url, prefix, log, **extra), log, [])
    service.start_api(port, workers, *options)
    return service


def stop(service: Service) -> None:
    """Stop its processes, then remove what it kept in Redis: its own keys, and its threads' checkpoints and
    long-term items (under the CLI's prefixes), so test runs do not pile up threads in the test database."""
    for process in service.processes:
        if process.poll() is None:
            process.terminate()
    for process in service.processes:
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    forget(service.env["REDIS_URL"], service.env["REACTGRAPH_SERVICE_PREFIX"])


def forget(redis_url: str, prefix: str) -> None:
    """Remove what a test service kept: its own keys, and the checkpoints and store items of the threads it made.
    Threads it only listed — CLI sessions other tests left in the database, which a search of every thread gives
    a record (metadata `source: cli`) — are theirs to remove, not this service's."""
    import json

    import redis

    from reactgraph.graph.sessions import session_namespaces
    from reactgraph.memory import RedisStore
    from reactgraph.memory.redis_checkpoint import RedisSaver
    from reactgraph.memory.retention import drop_items, session_items
    from reactgraph.service.keys import ServiceKeys

    if "+cluster://" in redis_url:
        return  # the cluster tests' cluster goes away whole
    client = redis.Redis.from_url(redis_url, socket_connect_timeout=2)
    keys_of = ServiceKeys(prefix)
    try:
        threads = [t.decode() for t in client.zrange(keys_of.threads, 0, -1)]
        with RedisSaver.from_url(redis_url) as saver, RedisStore.from_url(redis_url) as store:
            for thread_id in threads:
                try:
                    record = json.loads(client.get(keys_of.thread(thread_id)) or "{}")
                except ValueError:
                    record = {}  # a test damaged it on purpose: the thread is still this service's
                if isinstance(record, dict) and (record.get("metadata") or {}).get("source") == "cli":
                    continue
                saver.delete_thread(thread_id)
                drop_items(store, session_items(store, session_namespaces(thread_id)))
        keys = list(client.scan_iter(match=f"{keys_of.prefix}*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start:start + 500])
    except redis.RedisError:
        pass  # a test that stopped its Redis on purpose leaves nothing reachable to remove
    finally:
        client.close()


@pytest.fixture(scope="module")
def served(redis_url: str, tmp_path_factory) -> Iterator[Service]:
    service = start_service(redis_url, tmp_path_factory.mktemp("serve"), SLOW_CITIES="广州", SLOW_S="60")
    yield service
    stop(service)


def human(question: str) -> dict:
    return {"messages": [{"role": "human", "content": question}]}


def ask_stream(client, thread_id: str, question: str, **options):
    return list(client.runs.stream(thread_id, "react", input=human(question),
                                   **options))


# -- assistants -----------------------------------------------------------------------------------------------

def test_every_graph_is_an_assistant_found_by_id_or_by_name(served):
    client = served.client()
    found = client.assistants.search()
    assert sorted(a["graph_id"] for a in found) == ["plan_solve", "react", "reflexion"]
    for assistant in found:
        assert client.assistants.get(assistant["assistant_id"])["graph_id"] == assistant["graph_id"]
        assert client.assistants.get(assistant["graph_id"])["assistant_id"] == assistant["assistant_id"]
    drawn = client.assistants.get_graph("react")
    assert {"think", "act", "observe", "reflect", "finalize"} <= {node["id"] for node in drawn["nodes"]}
    schemas = client.assistants.get_schemas("react")
    assert "messages" in schemas["input_schema"]["properties"]
    assert "max_iterations" in schemas["context_schema"]["properties"]
    with pytest.raises(NotFoundError):
        client.assistants.get("no-such-graph")


# -- runs -----------------------------------------------------------------------------------------------------

def test_a_streamed_run_sends_metadata_then_each_node_update_and_the_answer(served):
    client = served.client()
    thread = client.threads.create()
    parts = ask_stream(client, thread["thread_id"], WEATHER, stream_mode=["updates", "values"])
    assert parts[0].event == "metadata" and parts[0].data["run_id"]
    nodes = [next(iter(p.data)) for p in parts if p.event == "updates"]
    assert nodes[:3] == ["load_memory", "think", "act"] and "finalize" in nodes
    # the turn's reset of the step records (LangGraph's Overwrite, in the first node) reaches clients as the plain
    # list it sets
    start = next(p.data["load_memory"] for p in parts if p.event == "updates" and "load_memory" in p.data)
    assert isinstance(start["steps"], list) and "__overwrite__" not in json.dumps(start)
    final = [p.data for p in parts if p.event == "values"][-1]
    assert final["status"] == "answered" and "上海" in final["final_answer"]
    (run,) = client.runs.list(thread["thread_id"])
    assert run["status"] == "success" and run["run_id"] == parts[0].data["run_id"]
    assert client.threads.get(thread["thread_id"])["status"] == "idle"


def test_messages_tuple_streams_message_chunks_with_their_metadata(served):
    client = served.client()
    thread = client.threads.create()
    parts = ask_stream(client, thread["thread_id"], "计算 2 + 3 等于多少", stream_mode="messages-tuple")
    messages = [p.data for p in parts if p.event == "messages"]
    assert messages and all(len(m) == 2 and "type" in m[0] and "langgraph_node" in m[1] for m in messages)


@pytest.mark.parametrize(("mode", "event"), [("values", "values"), ("updates", "updates"), ("debug", "debug"),
                                             ("tasks", "tasks"), ("checkpoints", "checkpoints")])
def test_each_stream_mode_streams_its_events(served, mode, event):
    client = served.client()
    parts = ask_stream(client, client.threads.create()["thread_id"], "现在几点了？", stream_mode=mode)
    assert parts[0].event == "metadata"
    assert {p.event for p in parts[1:]} == {event}


def test_wait_answers_with_the_final_values_and_join_waits_for_a_background_run(served):
    client = served.client()
    thread = client.threads.create()
    final = client.runs.wait(thread["thread_id"], "react",
                             input=human("计算 10 * 7 等于多少"))
    assert final["status"] == "answered" and "70" in final["final_answer"]
    assert final["usage"]["input_tokens"] > 0 and final["usage"]["output_tokens"] > 0  # the run's output counts
    run = client.runs.create(thread["thread_id"], "plan_solve",
                             input=human("计算 6 * 7 等于多少"))
    assert run["status"] == "pending"
    joined = client.runs.join(thread["thread_id"], run["run_id"])
    assert "42" in joined["final_answer"]
    assert client.runs.get(thread["thread_id"], run["run_id"])["status"] == "success"
    humans = [m["content"] for m in joined["messages"] if m["type"] == "human"]
    assert humans == ["计算 10 * 7 等于多少", "计算 6 * 7 等于多少"]  # one thread, two turns, in order


def test_a_run_pauses_for_approval_and_resumes_with_the_decision(served):
    client = served.client()
    thread = client.threads.create()
    parts = ask_stream(client, thread["thread_id"], "Fetch https://example.com/page", stream_mode=["updates", "custom"])
    assert [p.data["event"] for p in parts if p.event == "custom"] == ["approval_requested"]
    (pause,) = next(p.data for p in parts if p.event == "updates" and "__interrupt__" in p.data)["__interrupt__"]
    # LangChain's HITL request, as HumanInTheLoopMiddleware raises it (what agent-chat-ui renders)
    assert [c["name"] for c in pause["value"]["action_requests"]] == ["http_get"]
    assert pause["value"]["review_configs"] == [{"action_name": "http_get",
                                                 "allowed_decisions": ["approve", "edit", "reject", "respond"]}]
    state = client.threads.get_state(thread["thread_id"])
    assert state["next"] == ["approve"] and client.threads.get(thread["thread_id"])["status"] == "interrupted"
    assert [i["value"] for i in state["interrupts"]] == [pause["value"]]  # the thread's state shows the same
    final = client.runs.wait(thread["thread_id"], "react",
                             command={"resume": {"decisions": [{"type": "reject",
                                                                 "message": "not from the service"}]}})
    decided = [s for s in final["steps"] if s["node"] == "approve"]
    assert [(s["action"], s["status"]) for s in decided] == [("http_get", "rejected")]
    assert client.threads.get(thread["thread_id"])["status"] == "idle"


def test_a_per_call_approval_carries_its_response_schema_and_takes_one_decision(served):
    client = served.client()
    thread = client.threads.create()
    client.runs.wait(thread["thread_id"], "react", input=human("Fetch https://example.com/page"),
                     context={"approval_mode": "per_call"})
    (pause,) = client.threads.get_state(thread["thread_id"])["interrupts"]
    assert pause["value"]["type"] == "tool_approval" and pause["value"]["name"] == "http_get"
    assert [b["properties"]["type"]["const"] for b in pause["response_schema"]["oneOf"]] == [
        "approve", "edit", "reject", "respond"]
    final = client.runs.wait(thread["thread_id"], "react", context={"approval_mode": "per_call"},
                             command={"resume": {pause["id"]: {"type": "respond", "message": "the page is down"}}})
    assert [(s["action"], s["status"]) for s in final["steps"] if s["node"] == "approve"] == [
        ("http_get", "responded")]


def test_a_stream_rejoined_with_last_event_id_gets_exactly_the_rest(served):
    client = served.client()
    thread = client.threads.create()
    run = client.runs.create(thread["thread_id"], "react", stream_mode=["updates"], stream_resumable=True,
                             input=human(WEATHER))
    client.runs.join(thread["thread_id"], run["run_id"])
    everything = httpx.get(f"{served.url}/threads/{thread['thread_id']}/runs/{run['run_id']}/stream", timeout=30)
    events = [block for block in everything.text.split("\r\n\r\n") if "event:" in block]
    ids = [line.split(": ", 1)[1] for block in events for line in block.splitlines() if line.startswith("id: ")]
    assert len(ids) == len(events) >= 5
    rest = list(client.runs.join_stream(thread["thread_id"], run["run_id"], last_event_id=ids[2]))
    assert len(rest) == len(events) - 3
    assert [p.event for p in rest] == ["updates"] * len(rest)


# -- cancel and multitask strategies --------------------------------------------------------------------------

def start_slow_run(client, thread_id: str, **options):
    """A run that waits on a slow tool, once it reads `running` (for cancel and multitask tests)."""
    run = client.runs.create(thread_id, "react", input=human("广州的天气怎么样？"),
                             **options)
    wait_for(lambda: client.runs.get(thread_id, run["run_id"])["status"] == "running", 30, "the slow run running")
    return run


def test_cancel_stops_a_running_run_and_the_thread_takes_the_next(served):
    client = served.client()
    thread = client.threads.create()
    run = start_slow_run(client, thread["thread_id"])
    client.runs.cancel(thread["thread_id"], run["run_id"], wait=True)
    assert client.runs.get(thread["thread_id"], run["run_id"])["status"] == "interrupted"
    final = client.runs.wait(thread["thread_id"], "react",
                             input=human("计算 2 + 3 等于多少"))
    assert "5" in final["final_answer"]


def test_reject_refuses_a_second_run_on_a_busy_thread(served):
    client = served.client()
    thread = client.threads.create()
    run = start_slow_run(client, thread["thread_id"])
    with pytest.raises(ConflictError):
        client.runs.create(thread["thread_id"], "react", multitask_strategy="reject",
                           input=human("计算 1 + 1 等于多少"))
    client.runs.cancel(thread["thread_id"], run["run_id"], wait=True)


def test_enqueue_runs_the_second_after_the_first_and_interrupt_stops_the_first(served):
    client = served.client()
    thread = client.threads.create()
    first = start_slow_run(client, thread["thread_id"])
    queued = client.runs.create(thread["thread_id"], "react", multitask_strategy="enqueue",
                                input=human("计算 1 + 1 等于多少"))
    assert client.runs.get(thread["thread_id"], queued["run_id"])["status"] == "pending"
    jumping = client.runs.create(thread["thread_id"], "react", multitask_strategy="interrupt",
                                 input=human("计算 3 + 4 等于多少"))
    final = client.runs.join(thread["thread_id"], jumping["run_id"])
    assert "7" in final["final_answer"]
    statuses = {r["run_id"]: r["status"] for r in client.runs.list(thread["thread_id"])}
    assert statuses == {first["run_id"]: "interrupted", queued["run_id"]: "interrupted", jumping["run_id"]: "success"}


def test_rollback_removes_the_interrupted_run_and_what_it_wrote(served):
    client = served.client()
    thread = client.threads.create()
    client.runs.wait(thread["thread_id"], "react", input=human("计算 1 + 2 等于多少"))
    first = start_slow_run(client, thread["thread_id"])
    final = client.runs.wait(thread["thread_id"], "react", multitask_strategy="rollback",
                             input=human("计算 3 + 4 等于多少"))
    humans = [m["content"] for m in final["messages"] if m["type"] == "human"]
    assert humans == ["计算 1 + 2 等于多少", "计算 3 + 4 等于多少"]  # the rolled-back turn left nothing
    assert first["run_id"] not in {r["run_id"] for r in client.runs.list(thread["thread_id"])}


# -- threads, state, history ----------------------------------------------------------------------------------

def test_threads_are_created_found_patched_copied_and_deleted(served):
    client = served.client()
    mark = uuid.uuid4().hex
    thread = client.threads.create(metadata={"mark": mark})
    with pytest.raises(ConflictError):
        client.threads.create(thread_id=thread["thread_id"])
    same = client.threads.create(thread_id=thread["thread_id"], if_exists="do_nothing")
    assert same["thread_id"] == thread["thread_id"]
    client.runs.wait(thread["thread_id"], "react", input=human("现在几点了？"))
    assert [t["thread_id"] for t in client.threads.search(metadata={"mark": mark})] == [thread["thread_id"]]
    assert client.threads.count(metadata={"mark": mark}) == 1
    client.threads.update(thread["thread_id"], metadata={"owner": "me"})
    assert client.threads.get(thread["thread_id"])["metadata"]["owner"] == "me"
    copy = client.threads.copy(thread["thread_id"])
    assert client.threads.get_state(copy["thread_id"])["values"]["messages"] == \
        client.threads.get_state(thread["thread_id"])["values"]["messages"]
    client.threads.delete(thread["thread_id"])
    with pytest.raises(NotFoundError):
        client.threads.get(thread["thread_id"])
    with pytest.raises(NotFoundError):
        client.threads.get_state(thread["thread_id"])


def test_history_lists_checkpoints_and_a_run_from_one_forks_the_thread(served):
    client = served.client()
    thread = client.threads.create()
    for question in ("计算 2 + 3 等于多少", "计算 10 * 7 等于多少"):
        client.runs.wait(thread["thread_id"], "react", input=human(question))
    history = client.threads.get_history(thread["thread_id"], limit=100)
    assert len(history) > 4 and all(h["checkpoint"]["checkpoint_id"] for h in history)
    after_first = next(h for h in history if h["values"].get("status") == "answered"
                       and sum(m["type"] == "human" for m in h["values"]["messages"]) == 1 and not h["next"])
    forked = client.runs.wait(thread["thread_id"], "react", checkpoint_id=after_first["checkpoint"]["checkpoint_id"],
                              input=human("现在几点了？"))
    humans = [m["content"] for m in forked["messages"] if m["type"] == "human"]
    assert humans == ["计算 2 + 3 等于多少", "现在几点了？"]
    updated = client.threads.update_state(thread["thread_id"], {"final_answer": "edited by hand"})
    assert updated["checkpoint"]["checkpoint_id"]
    assert client.threads.get_state(thread["thread_id"])["values"]["final_answer"] == "edited by hand"


def test_a_cli_session_is_a_thread_of_the_service_and_back(served, monkeypatch, capfd):
    """`reactgraph ask` here runs in the test's process, with the service's settings: the service, in its own,
    finds the CLI's session in Redis, and the CLI the service's turn."""
    session = f"cli-{uuid.uuid4().hex[:8]}"
    asked = run_in_process(monkeypatch, capfd, ["ask", "计算 2 + 3 等于多少", "--session", session, "--json"],
                           **served.env)
    assert asked.returncode == 0, asked.stderr
    client = served.client()
    try:
        assert session in [t["thread_id"] for t in client.threads.search(limit=1000)]
        state = client.threads.get_state(session)
        assert [m["content"] for m in state["values"]["messages"] if m["type"] == "human"] == ["计算 2 + 3 等于多少"]
        client.runs.wait(session, "react", input=human("计算 10 * 7 等于多少"))
        again = run_in_process(monkeypatch, capfd, ["ask", "现在几点了？", "--session", session, "--json"],
                               **served.env)
        assert again.returncode == 0, again.stderr
        humans = [m["content"] for m in client.threads.get_state(session)["values"]["messages"] if m["type"] == "human"]
        assert humans == ["计算 2 + 3 等于多少", "计算 10 * 7 等于多少", "现在几点了？"]
    finally:
        client.threads.delete(session)  # a CLI session outlives the service that showed it: the test made it


def test_a_new_cli_session_is_found_among_many_older_ones_the_service_never_saw(served, monkeypatch, capfd):
    """A database of more CLI sessions than one search takes in (each older, each sorted before the new one by
    id): the session just asked is on the search's first page all the same."""
    from reactgraph.memory.redis_checkpoint import RedisSaver

    older = [f"0-{uuid.uuid4().hex[:8]}-{k:03d}" for k in range(150)]
    session = f"cli-{uuid.uuid4().hex[:8]}"
    client = served.client()
    with RedisSaver.from_url(served.env["REDIS_URL"]) as saver:
        try:
            first = run_in_process(monkeypatch, capfd, ["ask", "计算 2 + 3 等于多少", "--session", older[0], "--json"],
                                   **served.env)
            assert first.returncode == 0, first.stderr
            for thread_id in older[1:]:
                saver.copy_thread(older[0], thread_id)
            asked = run_in_process(monkeypatch, capfd, ["ask", "现在几点了？", "--session", session, "--json"],
                                   **served.env)
            assert asked.returncode == 0, asked.stderr
            assert session == client.threads.search(limit=1)[0]["thread_id"]
            assert set(older) <= {t["thread_id"] for t in client.threads.search(limit=1000)}
        finally:
            for thread_id in [*older, session]:
                try:
                    client.threads.delete(thread_id)
                except NotFoundError:
                    saver.delete_thread(thread_id)  # never shown by a search: only its checkpoints are there


# -- bad requests ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "body", "status", "words"), [
    ("/threads", b"{not json", 422, "not JSON"),
    ("/threads", b"[1, 2]", 422, "JSON object"),
    ("/threads", b"{" + b'"a": "' + b"x" * (5 * 1024 * 1024) + b'"}', 413, "over the limit"),
    ("/threads", json.dumps({"thread_id": "a\nb"}).encode(), 422, "session id"),
    ("/threads/THREAD/runs", json.dumps({"assistant_id": "nope"}).encode(), 404, "assistant 'nope' not found"),
    ("/threads/THREAD/runs", json.dumps({"assistant_id": "react", "stream_mode": "everything"}).encode(), 422,
     "stream_mode"),
    ("/threads/THREAD/runs", json.dumps({"assistant_id": "react", "context": {"max_iterations": 0}}).encode(), 422,
     "max_iterations"),
    ("/threads/THREAD/runs", json.dumps({"assistant_id": "react", "multitask_strategy": "race"}).encode(), 422,
     "multitask_strategy"),
    ("/threads/THREAD/runs", json.dumps({"assistant_id": "react", "input": human("hi"), "command": {"resume": 1}})
     .encode(), 422, "not both"),
    ("/threads/no-such-thread/runs", json.dumps({"assistant_id": "react", "input": {}}).encode(), 404, "not found"),
])
def test_a_bad_request_gets_its_status_and_one_line_naming_the_cause(served, path, body, status, words):
    thread = served.client().threads.create()
    answer = httpx.post(served.url + path.replace("THREAD", thread["thread_id"]), content=body,
                        headers={"Content-Type": "application/json"}, timeout=30)
    assert answer.status_code == status
    detail = answer.json()["detail"]
    assert words in detail and "\n" not in detail


def test_what_the_sdk_knows_and_we_do_not_serve_is_a_501_naming_it_and_an_unknown_route_a_404_naming_it(served):
    from langgraph_sdk.errors import APIStatusError

    client = served.client()
    calls = {"threads.prune": lambda: client.threads.prune([str(uuid.uuid4())]),
             "runs.create_batch": lambda: client.runs.create_batch([{"assistant_id": "react", "input": {}}]),
             "crons.create": lambda: client.crons.create("react", schedule="* * * * *")}
    for name, call in calls.items():
        with pytest.raises((APIStatusError, httpx.HTTPStatusError)) as caught:  # the sdk raises either
            call()
        assert caught.value.response.status_code == 501, name
        detail = caught.value.response.json()["detail"]
        assert "is not served by reactgraph serve" in detail and "\n" not in detail, detail
    unknown = httpx.post(f"{served.url}/no/such/route", json={})
    assert unknown.status_code == 404
    assert unknown.json() == {"detail": "Not Found: POST /no/such/route is not a route of reactgraph serve"}


def test_a_thread_search_returns_only_the_selected_fields(served):
    client = served.client()
    thread = client.threads.create(metadata={"team": "select-test"})
    (found,) = client.threads.search(metadata={"team": "select-test"}, select=["thread_id", "status"])
    assert found == {"thread_id": thread["thread_id"], "status": "idle"}
    (whole,) = client.threads.search(metadata={"team": "select-test"})
    assert {"thread_id", "metadata", "values", "created_at"} <= whole.keys()
    refused = httpx.post(f"{served.url}/threads/search", json={"select": ["thread_id", "password"]})
    assert refused.status_code == 422 and "'password'" in refused.json()["detail"]


def test_unknown_runs_and_threads_are_404s(served):
    client = served.client()
    with pytest.raises(NotFoundError):
        client.runs.get(str(uuid.uuid4()), str(uuid.uuid4()))
    thread = client.threads.create()
    with pytest.raises(httpx.HTTPStatusError, match="404"):
        client.runs.join(thread["thread_id"], str(uuid.uuid4()))
    with pytest.raises(NotFoundError):
        client.runs.get(thread["thread_id"], "../../" + "x" * 500)
    with pytest.raises(UnprocessableEntityError):
        client.threads.search(status="sleeping")


# -- health and metrics (last: it counts what the tests above ran) ----------------------------------------------

def test_ok_answers_and_metrics_count_runs_workers_and_tool_calls(served):
    from prometheus_client.parser import text_string_to_metric_families

    assert httpx.get(f"{served.url}/ok", timeout=10).json() == {"ok": True}
    client = served.client()
    thread = client.threads.create()
    client.runs.wait(thread["thread_id"], "react", input=human("计算 2 + 3 等于多少"))
    answer = httpx.get(f"{served.url}/metrics", timeout=10)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(answer.text) for s in family.samples}
    assert samples[("reactgraph_workers_alive", ())] == 2
    assert samples[("reactgraph_runs_queued", ())] == 0 and samples[("reactgraph_runs_running", ())] == 0
    assert samples[("reactgraph_runs_finished_total", (("status", "success"),))] >= 10
    assert samples[("reactgraph_runs_finished_total", (("status", "interrupted"),))] >= 3
    assert samples[("reactgraph_runs_created_total", ())] >= 15
    assert samples[("reactgraph_run_latency_seconds_count", ())] == sum(
        v for (name, _labels), v in samples.items() if name == "reactgraph_runs_finished_total")
    assert samples[("reactgraph_tool_calls_total", (("status", "ok"), ("tool", "calculator")))] >= 5


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_serve_and_worker_refuse_a_store_that_is_not_redis_in_one_line(cli, command):
    code, out, err = cli(command, "--store", "memory")
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0 and "keeps its threads, runs and queue in Redis" in err


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_serve_and_worker_without_the_serve_extra_say_what_to_install(cli, command, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "uvicorn" else real(name, *a))
    code, _out, err = cli(command)
    assert code == 2 and "pip install 'react-graph[serve]'" in err and "uvicorn" in err


@pytest.mark.parametrize(("options", "words"), [
    (["--thread-ttl", "0"], "bad duration"),
    (["--thread-ttl", "7d", "--ttl-strategy", "forget"], "delete or keep_latest"),
    (["--config", "no-such-langgraph.json"], "cannot read"),
])
def test_bad_retention_settings_are_one_line_before_anything_starts(cli, options, words):
    code, out, err = cli("worker", *options)
    assert code == 2 and out == "" and words in err and err.strip().count("\n") == 0


def test_remote_graph_runs_a_served_graph_as_if_it_were_local(served):
    from langgraph.pregel.remote import RemoteGraph

    remote = RemoteGraph("react", url=served.url, api_key=None)
    thread = served.client().threads.create()
    config = {"configurable": {"thread_id": thread["thread_id"]}}
    result = remote.invoke(human("计算 2 + 3 等于多少"), config)
    assert result["status"] == "answered" and "5" in result["final_answer"]
    nodes = [next(iter(chunk)) for chunk in remote.stream(human("计算 10 * 7 等于多少"), config, stream_mode="updates")]
    assert "finalize" in nodes
    state = remote.get_state(config)
    humans = [m["content"] for m in state.values["messages"] if m["type"] == "human"]
    assert humans == ["计算 2 + 3 等于多少", "计算 10 * 7 等于多少"]
    assert {"think", "act", "finalize"} <= {node.id for node in remote.get_graph().nodes.values()}
