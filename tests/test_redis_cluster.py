"""react-graph on a Redis Cluster: a local three-master cluster that this module starts (redis-server in cluster
mode on loopback ports), named `redis+cluster://…`. LangGraph's conformance suite for both savers, the
store, session leases, `reactgraph ask`, `reactgraph serve` through langgraph-sdk and the debugger page
(`reactgraph ui`: its API, and the page clicked through in Chromium) — and, read back with CLUSTER KEYSLOT,
every key of one thread in one hash slot."""

from __future__ import annotations

import asyncio
import contextlib
import operator
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, TypedDict

import httpx
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph_sdk.errors import NotFoundError

from reactgraph.memory import AsyncRedisSaver, InvalidRedisURL, RedisSaver, RedisStore
from reactgraph.memory.checkpointer import open_checkpointer
from reactgraph.memory.redis_checkpoint.layout import thread_of
from reactgraph.memory.session_lease import SessionBusy, asession_lease, session_lease
from support.cli_env import run_in_process
from support.debugger_browser import run_page_script
from support.local_servers import http_recorder
from support.redis_cluster import LocalCluster, local_cluster
from test_debugger_ui import start_ui
from test_delta_checkpoints import DeltaState, agent
from test_redis_checkpointer import assert_full_conformance, run_conformance
from test_serve import human, start_service, stop


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("cluster")) as started:
        yield started


@pytest.fixture
def prefix() -> str:
    return f"clu-{uuid.uuid4().hex[:8]}:"


def keys_under(cluster: LocalCluster, pattern: str) -> list[str]:
    """Every key matching `pattern` on every master (a cluster's SCAN is per node)."""
    found = []
    for port in cluster.ports:
        node = cluster.node(port)
        found += [k.decode() for k in node.scan_iter(match=pattern, count=1000)]
        node.close()
    return found


def slots_by_thread(cluster: LocalCluster, keys: list[str], prefix: str) -> dict[str, set[int]]:
    """The hash slots (as the server computes them) of each thread's keys."""
    node, slots = cluster.node(cluster.ports[0]), defaultdict(set)
    for key in keys:
        slots[thread_of(prefix, key)].add(node.cluster("keyslot", key))
    node.close()
    return slots


def ids_on_each_master(cluster: LocalCluster, count: int = 3) -> list[str]:
    """Thread ids whose hash slots belong to `count` different masters."""
    client, by_node = cluster.client(), {}
    for n in range(1000):
        thread = f"t{n}"
        by_node.setdefault(client.get_node_from_key("{" + thread + "}").name, thread)
        if len(by_node) == count:
            break
    client.close()
    assert len(by_node) == count, "no thread ids found on every master"
    return list(by_node.values())


class Counted(TypedDict, total=False):
    said: Annotated[list[str], operator.add]


def echo_graph(saver):
    graph = StateGraph(Counted)
    graph.add_node("echo", lambda state: {"said": [f"echo {len(state.get('said', []))}"]})
    graph.add_edge(START, "echo")
    graph.add_edge("echo", END)
    return graph.compile(checkpointer=saver)


# --- naming a cluster --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("url", "words"), [
    ("redis+cluster://127.0.0.1:7000/3", "only database 0"),
    ("redis+cluster://127.0.0.1:7000,127.0.0.1:x/", "Port could not be cast"),
    ("redis+cluster://127.0.0.1:7000/?db=2", "unknown option 'db'"),
])
def test_a_bad_cluster_url_is_one_line_without_the_password(url, words):
    secret_url = url.replace("://", "://user:s3cret@")
    with pytest.raises(InvalidRedisURL) as raised:
        RedisSaver.from_url(secret_url)
    message = str(raised.value)
    assert words in message and "s3cret" not in message and "\n" not in message


def test_open_checkpointer_names_the_cluster_and_reaches_every_master(cluster):
    opened = open_checkpointer(cluster.url)  # pings every master
    try:
        assert opened.description == f"Redis {cluster.url}" and opened.redis_url == cluster.url
    finally:
        opened.saver.close()  # type: ignore[attr-defined]


# --- the savers ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["sync", "async", "sync-as-async", "async-as-sync"])
async def test_both_savers_pass_every_conformance_test_on_a_cluster(kind, cluster):
    report = await run_conformance(f"RedisCluster-{kind}", cluster.url, f"conf-{uuid.uuid4().hex[:6]}:", kind)
    assert_full_conformance(report)


def test_every_key_of_a_thread_shares_one_slot_and_threads_spread_over_the_masters(cluster, prefix):
    threads = ids_on_each_master(cluster)
    with RedisSaver.from_url(cluster.url, prefix=prefix) as saver:
        graph = echo_graph(saver)
        for thread in threads:
            for _ in range(2):
                graph.invoke({"said": []}, {"configurable": {"thread_id": thread}})
        assert list(saver.thread_ids()) == sorted(threads)  # a SCAN over every master
        assert [len(graph.get_state({"configurable": {"thread_id": t}}).values["said"]) for t in threads] == [2] * 3
    slots = slots_by_thread(cluster, keys_under(cluster, prefix + "*"), prefix)
    assert set(slots) == set(threads)
    assert all(len(s) == 1 for s in slots.values()), slots
    assert len({next(iter(s)) for s in slots.values()}) == 3


def test_delta_channels_are_rebuilt_on_every_master_in_one_script_call(cluster, prefix):
    threads = ids_on_each_master(cluster)
    with RedisSaver.from_url(cluster.url, prefix=prefix) as saver:
        graph = agent(DeltaState, saver)
        for thread in threads:
            config = {"configurable": {"thread_id": thread}}
            for question in ("q1", "q2", "q3"):
                graph.invoke({"messages": [HumanMessage(question)]}, config)
            for tup in saver.list(config):
                mine = saver.get_delta_channel_history(config=tup.config, channels=["messages", "steps"])
                assert mine == BaseCheckpointSaver.get_delta_channel_history(saver, config=tup.config,
                                                                             channels=["messages", "steps"])
            assert graph.get_state(config).values["messages"][-1].text == "answer to q3"


async def test_a_thread_is_copied_to_a_thread_on_another_master_and_runs_taken_back(cluster, prefix):
    source, target, _ = ids_on_each_master(cluster)
    saver = AsyncRedisSaver.from_url(cluster.url, prefix=prefix)
    try:
        graph = echo_graph(saver)
        await graph.ainvoke({"said": []}, {"configurable": {"thread_id": source}})
        await graph.ainvoke({"said": []}, {"configurable": {"thread_id": source, "run_id": "run-two"}})
        await saver.acopy_thread(source, target)
        copied = await graph.aget_state({"configurable": {"thread_id": target}})
        assert copied.values["said"] == ["echo 0", "echo 1"]
        await saver.adelete_for_runs(["run-two"])  # on both threads, found by a SCAN over every master
        for thread in (source, target):
            state = await graph.aget_state({"configurable": {"thread_id": thread}})
            assert state.values["said"] == ["echo 0"]
    finally:
        await saver.aclose()
    slots = slots_by_thread(cluster, keys_under(cluster, prefix + "*"), prefix)
    assert all(len(s) == 1 for s in slots.values()) and slots[source] != slots[target]


# --- the store and the leases ---------------------------------------------------------------------------------

def test_the_store_puts_gets_searches_lists_and_deletes_on_a_cluster_in_one_slot(cluster, prefix):
    with RedisStore.from_url(cluster.url, prefix=prefix + "store") as store:
        store.put(("users", "alice"), "prefs", {"lang": "zh"})
        store.put(("users", "bob"), "prefs", {"lang": "en"})
        store.put(("docs",), "a", {"n": 1}, ttl=5)
        assert store.get(("users", "alice"), "prefs").value == {"lang": "zh"}
        assert [i.namespace for i in store.search(("users",), filter={"lang": "en"})] == [("users", "bob")]
        assert store.list_namespaces(prefix=("users",)) == [("users", "alice"), ("users", "bob")]
        store.delete(("users", "alice"), "prefs")
        assert store.get(("users", "alice"), "prefs") is None
        assert store.list_namespaces() == [("docs",), ("users", "bob")]
    keys = keys_under(cluster, "{" + prefix + "store}:*")
    node = cluster.node(cluster.ports[0])
    assert keys and len({node.cluster("keyslot", k) for k in keys}) == 1
    node.close()


def test_a_session_lease_is_held_off_others_and_sits_in_the_threads_slot(cluster, prefix):
    thread = ids_on_each_master(cluster)[1]
    with RedisSaver.from_url(cluster.url, prefix=prefix) as saver:
        echo_graph(saver).invoke({"said": []}, {"configurable": {"thread_id": thread}})
        with session_lease(saver, thread, ttl_s=5):
            def another_turn() -> None:
                with session_lease(saver, thread, ttl_s=5, wait_s=0):
                    pass

            with ThreadPoolExecutor(1) as elsewhere, pytest.raises(SessionBusy):
                elsewhere.submit(another_turn).result(timeout=30)
            lease_keys = keys_under(cluster, prefix + "*:lease")
            assert len(lease_keys) == 1
            slots = slots_by_thread(cluster, keys_under(cluster, prefix + "*"), prefix)
            assert len(slots[thread]) == 1
    assert not keys_under(cluster, prefix + "*:lease")  # released


async def test_an_asyncio_session_lease_on_a_cluster_saver(cluster, prefix):
    saver = AsyncRedisSaver.from_url(cluster.url, prefix=prefix)
    try:
        async def another_turn() -> None:
            async with asession_lease(saver, "a-session", ttl_s=5, wait_s=0):
                pass

        async with asession_lease(saver, "a-session", ttl_s=5):
            with pytest.raises(SessionBusy):
                await asyncio.wait_for(asyncio.create_task(another_turn()), 30)  # another task: not nested
        await asyncio.wait_for(asyncio.create_task(another_turn()), 30)  # released: free again
    finally:
        await saver.aclose()


async def test_an_asyncio_lease_on_a_cluster_outlives_a_blocked_event_loop(cluster, prefix):
    """Renewed from its own thread over a sync twin of the cluster client: the loop blocked past the expiry."""
    saver = AsyncRedisSaver.from_url(cluster.url, prefix=prefix)
    try:
        # 2 s, renewed every 0.67 s: room for a renewal 1.3 s late on a loaded machine (0.6 s left 0.4 s)
        async with asession_lease(saver, "blocked", ttl_s=2) as lease:
            time.sleep(4.5)  # noqa: ASYNC251 - the event loop held past two expiries, as a blocking tool would
            assert not lease.lost
            with pytest.raises(SessionBusy):  # from another task (in this one, a nested lease shares it)
                await asyncio.create_task(_take_at_once(saver, "blocked"))
    finally:
        await saver.aclose()


# --- the CLI and the service -----------------------------------------------------------------------------------

def test_reactgraph_ask_answers_and_resumes_a_session_on_the_cluster(cluster, monkeypatch, capfd):
    session = f"cli-{uuid.uuid4().hex[:8]}"
    for question in ("计算 2 + 3 等于多少", "计算 10 * 7 等于多少"):  # each a `reactgraph ask` of its own, in process
        asked = run_in_process(monkeypatch, capfd, ["ask", question, "--session", session, "--store", cluster.url,
                                                    "--json"])
        assert asked.returncode == 0, asked.stderr
    with RedisSaver.from_url(cluster.url) as saver:
        found = saver.get_tuple({"configurable": {"thread_id": session, "checkpoint_ns": ""}})
        assert found is not None
        humans = [m.content for m in found.checkpoint["channel_values"]["messages"] if m.type == "human"]
    assert humans == ["计算 2 + 3 等于多少", "计算 10 * 7 等于多少"]
    slots = slots_by_thread(cluster, keys_under(cluster, "reactgraph:{" + session + "}:*"), "reactgraph:")
    assert len(slots[session]) == 1


def test_the_service_serves_threads_and_runs_from_the_cluster(cluster, tmp_path):
    service = start_service(cluster.url, tmp_path, workers=1)
    try:
        client = service.client()
        thread = client.threads.create()["thread_id"]
        waited = client.runs.wait(thread, "react", input=human("计算 2 + 3 等于多少"))
        assert "5" in waited["messages"][-1]["content"]
        parts = list(client.runs.stream(thread, "react", input=human("计算 10 * 7 等于多少"), stream_mode="values"))
        assert parts[0].event == "metadata" and parts[-1].event == "values"
        assert "70" in parts[-1].data["messages"][-1]["content"]
        state = client.threads.get_state(thread)
        assert [m["content"] for m in state["values"]["messages"] if m["type"] == "human"] == [
            "计算 2 + 3 等于多少", "计算 10 * 7 等于多少"]
        assert [r["status"] for r in client.runs.list(thread)] == ["success", "success"]
        service_prefix = service.env["REACTGRAPH_SERVICE_PREFIX"] + ":"
        keys = keys_under(cluster, "*{" + thread + "}*")  # checkpoints, lease, records, runs, event streams
        assert any(k.startswith(service_prefix) for k in keys) and any(k.startswith("reactgraph:") for k in keys)
        node = cluster.node(cluster.ports[0])
        assert len({node.cluster("keyslot", k) for k in keys}) == 1
        node.close()
        # a stateless run's thread, made and deleted on the cluster; a cancel read back at once
        assert "5" in client.runs.wait(None, "react", input=human("计算 2 + 3 等于多少"))["final_answer"]
        run = client.runs.create(thread, "react", input=human("计算 6 * 7 等于多少"))
        with contextlib.suppress(NotFoundError):  # it had ended already: nothing to cancel (langgraph-api's 404)
            client.runs.cancel(thread, run["run_id"])
        assert client.runs.get(thread, run["run_id"])["status"] in ("interrupted", "success")  # it may have ended
        assert client.threads.get(thread)["status"] != "busy"  # and the thread reads so at once
        client.runs.join(thread, run["run_id"])
    finally:
        stop(service)


def test_the_service_keeps_created_assistants_and_serves_the_store_on_the_cluster(cluster, tmp_path):
    service = start_service(cluster.url, tmp_path, workers=0)
    try:
        client = service.client()
        made = [client.assistants.create("react", context={"max_iterations": 3}) for _ in range(4)]
        for assistant in made:
            client.assistants.update(assistant["assistant_id"], context={"max_iterations": 4})
        assert client.assistants.set_latest(made[0]["assistant_id"], 1)["context"] == {"max_iterations": 3}
        assert len(client.assistants.get_versions(made[0]["assistant_id"])) == 2
        assert client.assistants.count() == 3 + len(made)  # read across the masters
        node = cluster.node(cluster.ports[0])
        for assistant in made:  # a record and its versions: one slot, for the scripts that change both
            keys = keys_under(cluster, "*{assistant:" + assistant["assistant_id"] + "}*")
            assert len(keys) == 2 and len({node.cluster("keyslot", k) for k in keys}) == 1
        node.close()
        namespace = ["cluster-notes", uuid.uuid4().hex]
        client.store.put_item(namespace, "k", {"v": 1})
        assert client.store.search_items(namespace)["items"][0]["value"] == {"v": 1}
        client.store.delete_item(namespace, "k")
        assert client.store.get_item(namespace, "k") is None
    finally:
        stop(service)


async def _take_at_once(target, session: str) -> None:
    async with asession_lease(target, session, wait_s=0):
        pass


# --- the debugger page ---------------------------------------------------------------------------------------

def uuids_on_each_master(cluster: LocalCluster, count: int = 3) -> list[str]:
    """New thread ids (UUIDs, as the page makes them) whose hash slots belong to `count` different masters."""
    client, by_node = cluster.client(), {}
    while len(by_node) < count:
        thread = str(uuid.uuid4())
        by_node.setdefault(client.get_node_from_key("{" + thread + "}").name, thread)
    client.close()
    return list(by_node.values())


def test_the_debugger_pages_api_reads_searches_and_travels_sessions_on_every_master(cluster, tmp_path):
    """What the page asks of the API, on threads in three masters' slots: runs, the server's search with its
    titles, history a page at a time, the state at a checkpoint, an edited state run on (time travel)."""
    service = start_ui(cluster.url, tmp_path)
    word, threads = uuid.uuid4().hex[:12], uuids_on_each_master(cluster)
    try:
        for n, thread in enumerate(threads):
            answer = httpx.post(f"{service.url}/threads/{thread}/runs/wait", timeout=60, json={
                "assistant_id": "react", "if_not_exists": "create",
                "input": {"messages": [{"role": "human", "content": f"计算 {n} + 2 等于多少（{word}）"}]}})
            assert answer.status_code == 200 and str(n + 2) in answer.json()["final_answer"]
        found = httpx.post(f"{service.url}/threads/search", timeout=30, json={
            "text": word, "select": ["thread_id", "title", "status"], "limit": 10}).json()
        assert sorted(t["thread_id"] for t in found) == sorted(threads)
        assert {t["title"] for t in found} == {f"计算 {n} + 2 等于多少（{word}）" for n in range(3)}
        thread = threads[0]
        newest = httpx.post(f"{service.url}/threads/{thread}/history", json={"limit": 4}, timeout=10).json()
        older = httpx.post(f"{service.url}/threads/{thread}/history", timeout=10,
                           json={"limit": 100, "before": {"checkpoint_id": newest[-1]["checkpoint_id"]}}).json()
        assert len(newest) == 4 and older and older[0]["checkpoint_id"] < newest[-1]["checkpoint_id"]
        first = older[-1]["checkpoint_id"]
        at_first = httpx.get(f"{service.url}/threads/{thread}/state/{first}", timeout=10).json()
        assert at_first["checkpoint"]["checkpoint_id"] == first
        saved = httpx.post(f"{service.url}/threads/{thread}/state", timeout=10, json={
            "values": {"final_answer": "edited on the cluster"}, "checkpoint_id": newest[0]["checkpoint_id"],
            "as_node": "finalize"}).json()["checkpoint"]
        ran = httpx.post(f"{service.url}/threads/{thread}/runs/wait", timeout=60, json={
            "assistant_id": "react", "input": None, "checkpoint_id": saved["checkpoint_id"]})
        assert ran.status_code == 200 and ran.json()["final_answer"] == "edited on the cluster"
        runs = httpx.get(f"{service.url}/threads/{thread}/runs", timeout=10).json()
        assert [r["status"] for r in runs] == ["success", "success"]
        node = cluster.node(cluster.ports[0])
        title_slots = {node.cluster("keyslot", k) for k in keys_under(cluster, "*{" + thread + "}:title")}
        assert title_slots == {node.cluster("keyslot", "{" + thread + "}")}  # the title sits in its thread's slot
        node.close()
    finally:
        stop(service)


def test_the_debugger_page_is_clicked_through_on_the_cluster(cluster, tmp_path):
    """In Chromium: a question live, its session found and opened, a checkpoint's state, a new branch from it, an
    approval approved, and sessions on each master opened with their turns; nothing leaves loopback."""
    service = start_ui(cluster.url, tmp_path)
    threads = uuids_on_each_master(cluster)
    try:
        for thread in threads:
            for question in ("计算 1 + 1 等于多少", "计算 2 + 2 等于多少"):
                answer = httpx.post(f"{service.url}/threads/{thread}/runs/wait", timeout=60, json={
                    "assistant_id": "react", "if_not_exists": "create",
                    "input": {"messages": [{"role": "human", "content": question}]}})
                assert answer.status_code == 200
        with http_recorder() as (page_url, fetched):
            seen = run_page_script("browser_debugger_cluster.mjs", [f"{service.url}/ui/", page_url, *threads], 300)
            assert [path for path, _headers, _body in fetched] == ["/on-the-cluster"]
    finally:
        stop(service)
    assert seen["question"]["state"] == "done" and "5" in seen["question"]["answer"]
    assert len(seen["found"]) == 1 and seen["found"][0].startswith("计算 2 + 3 等于多少")
    assert seen["checkpoints"] >= 5 and "final_answer: null" in seen["firstState"]
    assert seen["forked"]["state"] == "done" and "7" in seen["forked"]["answer"]
    assert seen["asked"]["state"] == "waiting" and seen["approved"]["state"] == "done"
    assert [call["status"] for call in seen["approved"]["entries"] if call["kind"] == "call"] == ["ok"]
    assert [s["turns"] for s in seen["elsewhere"]] == [["1. 计算 1 + 1 等于多少", "2. 计算 2 + 2 等于多少"]] * 3
    assert all("4" in s["answer"] for s in seen["elsewhere"])
    assert seen["offLoopback"] == [] and seen["console"] == [] and seen["failed"] == []
