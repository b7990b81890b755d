"""`reactgraph serve`'s assistants that clients create (kept in Redis, versioned) and its /store endpoints on the
graphs' long-term store, driven by langgraph-sdk's own client over loopback, on the test Redis."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import httpx
import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError

from support.local_servers import http_request
from test_serve import Service, human, start_service, stop

PLAN_SOLVE_NODES = {"plan", "execute_step", "solve"}


@pytest.fixture(scope="module")
def served(redis_url: str, tmp_path_factory) -> Iterator[Service]:
    service = start_service(redis_url, tmp_path_factory.mktemp("assistants"), workers=1)
    yield service
    stop(service)


@pytest.fixture
def notes(served) -> Iterator[list[str]]:
    """A namespace of this test's own in the store; what it holds is deleted afterwards."""
    namespace = ["test-notes", uuid.uuid4().hex]
    yield namespace
    client = served.client()
    for item in client.store.search_items(namespace, limit=1000)["items"]:
        client.store.delete_item(item["namespace"], item["key"])


def status_and_detail(response: httpx.Response) -> tuple[int, str]:
    detail = response.json().get("detail", "") if response.headers.get("content-type") == "application/json" else ""
    assert "\n" not in detail
    return response.status_code, detail


# -- assistants -----------------------------------------------------------------------------------------------

def test_an_assistant_is_created_updated_into_versions_set_back_and_deleted(served):
    client = served.client()
    created = client.assistants.create("react", context={"max_iterations": 3}, metadata={"team": "blue"},
                                       name="Short answers", description="three rounds at most")
    assistant_id = created["assistant_id"]
    assert uuid.UUID(assistant_id)
    assert (created["graph_id"], created["version"], created["name"]) == ("react", 1, "Short answers")
    assert created["context"] == {"max_iterations": 3}
    assert created["config"] == {"configurable": {"max_iterations": 3}}  # mirrored, as the Agent Server does
    assert client.assistants.get(assistant_id) == created

    found = client.assistants.search(metadata={"team": "blue"})
    assert [a["assistant_id"] for a in found] == [assistant_id]
    assert [a["assistant_id"] for a in client.assistants.search(name="short ANSWERS")] == [assistant_id]
    assert client.assistants.count(graph_id="react") == 2  # the graph's own and this one
    assert client.assistants.search(metadata={"team": "blue"}, select=["assistant_id", "version"]) == [
        {"assistant_id": assistant_id, "version": 1}]

    updated = client.assistants.update(assistant_id, context={"max_iterations": 4}, metadata={"stage": "two"})
    assert (updated["version"], updated["context"], updated["name"]) == (2, {"max_iterations": 4}, "Short answers")
    assert updated["metadata"] == {"team": "blue", "stage": "two"}  # merged into the old
    versions = client.assistants.get_versions(assistant_id)
    assert [(v["version"], v["context"]) for v in versions] == [(2, {"max_iterations": 4}), (1, {"max_iterations": 3})]

    tagged = client.assistants.update(assistant_id, config={"tags": ["short"], "recursion_limit": 40})
    assert tagged["version"] == 3 and tagged["context"] == {"max_iterations": 4}  # a config alone keeps the context
    assert tagged["config"] == {"tags": ["short"], "recursion_limit": 40, "configurable": {"max_iterations": 4}}

    back = client.assistants.set_latest(assistant_id, 1)
    assert (back["version"], back["context"], back["metadata"]) == (1, {"max_iterations": 3}, {"team": "blue"})
    assert client.assistants.get(assistant_id)["version"] == 1
    assert len(client.assistants.get_versions(assistant_id)) == 3  # setting the latest keeps every version
    with pytest.raises(NotFoundError):
        client.assistants.set_latest(assistant_id, 7)

    client.assistants.delete(assistant_id)
    with pytest.raises(NotFoundError):
        client.assistants.get(assistant_id)
    assert client.assistants.count(graph_id="react") == 1


def test_a_search_sorts_selects_and_pages_the_graphs_own_assistants_with_the_created_ones(served):
    client = served.client()
    made = [client.assistants.create("reflexion", name=name, metadata={"sorted": True}) for name in ("b", "c", "a")]
    by_name = client.assistants.search(metadata={"sorted": True}, sort_by="name", sort_order="asc")
    assert [a["name"] for a in by_name] == ["a", "b", "c"]
    newest = client.assistants.search(graph_id="reflexion", limit=2, response_format="object")
    assert [a["name"] for a in newest["assistants"]] == ["a", "c"] and newest["next"] == "2"
    rest = client.assistants.search(graph_id="reflexion", limit=2, offset=2, response_format="object")
    assert [a["name"] for a in rest["assistants"]] == ["b", "reflexion"] and rest["next"] is None
    refused = httpx.post(f"{served.url}/assistants/search", json={"sort_by": "config"}, timeout=30)
    assert status_and_detail(refused)[0] == 422
    for assistant in made:
        client.assistants.delete(assistant["assistant_id"])


def test_if_exists_raise_refuses_an_id_in_use_and_do_nothing_returns_the_one_there(served):
    client = served.client()
    assistant_id = str(uuid.uuid4())
    first = client.assistants.create("react", assistant_id=assistant_id, name="first")
    with pytest.raises(ConflictError):
        client.assistants.create("react", assistant_id=assistant_id, name="second")
    assert client.assistants.create("reflexion", assistant_id=assistant_id, if_exists="do_nothing") == first
    react_id = client.assistants.get("react")["assistant_id"]
    with pytest.raises(ConflictError):  # a graph's own assistant's id is taken too
        client.assistants.create("react", assistant_id=react_id)
    client.assistants.delete(assistant_id)


def test_a_run_on_a_created_assistant_runs_its_graph_with_its_settings_under_the_runs_own(served):
    client = served.client()
    assistant = client.assistants.create("plan_solve", context={"max_iterations": 6, "max_tool_calls": 7},
                                         config={"recursion_limit": 50})
    nodes = {node["id"] for node in client.assistants.get_graph(assistant["assistant_id"])["nodes"]}
    assert nodes >= PLAN_SOLVE_NODES
    assert client.assistants.get_schemas(assistant["assistant_id"])["graph_id"] == "plan_solve"
    assert client.assistants.get_subgraphs(assistant["assistant_id"]) == {}

    thread = client.threads.create()
    state = client.runs.wait(thread["thread_id"], assistant["assistant_id"], input=human("计算 (15 + 27) * 3 等于多少"),
                             context={"max_tool_calls": 5})
    assert state["status"] == "answered" and "126" in state["final_answer"]
    assert "plan" in state  # plan_solve's state, not react's
    (run,) = client.runs.list(thread["thread_id"])
    assert run["assistant_id"] == assistant["assistant_id"]
    assert run["kwargs"]["context"] == {"max_iterations": 6, "max_tool_calls": 5}
    assert run["kwargs"]["config"]["recursion_limit"] == 50
    assert client.threads.get(thread["thread_id"])["metadata"]["graph_id"] == "plan_solve"
    client.assistants.delete(assistant["assistant_id"])


def test_deleting_an_assistant_with_delete_threads_deletes_the_threads_it_ran_on_and_no_others(served):
    client = served.client()
    assistant = client.assistants.create("react", context={"max_iterations": 3})
    its, other = client.threads.create(), client.threads.create()
    client.runs.wait(its["thread_id"], assistant["assistant_id"], input=human("计算 2 + 3 等于多少"))
    client.runs.wait(other["thread_id"], "react", input=human("计算 2 + 3 等于多少"))
    assert client.threads.get(its["thread_id"])["metadata"]["assistant_id"] == assistant["assistant_id"]
    client.assistants.delete(assistant["assistant_id"], delete_threads=True)
    with pytest.raises(NotFoundError):
        client.threads.get(its["thread_id"])
    assert client.threads.get(other["thread_id"])["thread_id"] == other["thread_id"]
    client.threads.delete(other["thread_id"])


def test_deleting_an_assistant_cancels_its_waiting_runs(redis_url, tmp_path):
    """Its runs are found among the threads given work (the queue's with-work index), however many threads the
    server holds; threads made after the run's are no matter."""
    service = start_service(redis_url, tmp_path, workers=0)  # nothing runs: the run waits
    try:
        client = service.client()
        assistant = client.assistants.create("react")
        thread = client.threads.create()
        run = client.runs.create(thread["thread_id"], assistant["assistant_id"], input=human("计算 2 + 3 等于多少"))
        for _ in range(30):
            client.threads.create()
        client.assistants.delete(assistant["assistant_id"])
        assert client.runs.get(thread["thread_id"], run["run_id"])["status"] == "interrupted"
    finally:
        stop(service)


@pytest.mark.parametrize(("body", "status", "words"), [
    ({"graph_id": "react", "context": {"model": "openai:gpt-4o"}}, 403, "not offered by this server"),
    ({"graph_id": "react", "config": {"configurable": {"model": "openai:gpt-4o"}}}, 403, "not offered"),
    ({"graph_id": "react", "context": {"max_iterations": 0}}, 422, "max_iterations"),
    ({"graph_id": "react", "context": {"password": "x"}}, 422, "unknown Context field(s) password"),
    ({"graph_id": "react", "context": {"system_prompt": "You obey me."}}, 403, "system_prompt"),
    ({"graph_id": "react", "context": {"max_iterations": 3}, "config": {"configurable": {"max_iterations": 3}}},
     400, "not both"),
    ({"graph_id": "react", "config": {"callbacks": []}}, 422, "'config' takes configurable"),
    ({"graph_id": "react", "config": {"recursion_limit": 10**9}}, 422, "recursion_limit"),
    ({"graph_id": "someone-elses"}, 404, "graph 'someone-elses' not found"),
    ({}, 422, "'graph_id' is required"),
    ({"graph_id": "react", "assistant_id": "not-a-uuid"}, 422, "must be a UUID"),
    ({"graph_id": "react", "if_exists": "replace"}, 422, "'if_exists'"),
    ({"graph_id": "react", "name": "n" * 201}, 422, "over the limit of 200"),
    ({"graph_id": "react", "metadata": {"blob": "x" * 70_000}}, 413, "'metadata' is"),
    ({"graph_id": "react", "metadata": ["a"]}, 422, "'metadata' must be dict"),
])
def test_an_assistant_a_run_could_not_have_is_refused_with_one_line_naming_why(served, body, status, words):
    before = served.client().assistants.count()
    code, detail = status_and_detail(http_request("POST", f"{served.url}/assistants", json=body))
    assert code == status and words in detail, detail
    assert served.client().assistants.count() == before


def test_the_graphs_own_assistants_are_read_only_and_a_bad_update_changes_nothing(served):
    client = served.client()
    react = client.assistants.get("react")
    for call in (lambda: client.assistants.update("react", name="mine"),
                 lambda: client.assistants.delete(react["assistant_id"])):
        with pytest.raises(ConflictError) as caught:
            call()
        assert "operator's" in caught.value.response.json()["detail"]
    assert [v["version"] for v in client.assistants.get_versions("react")] == [1]
    assert client.assistants.set_latest("react", 1)["assistant_id"] == react["assistant_id"]

    created = client.assistants.create("react", context={"max_iterations": 3})
    refused = httpx.patch(f"{served.url}/assistants/{created['assistant_id']}",
                          json={"context": {"model": "openai:gpt-4o"}}, timeout=30)
    assert refused.status_code == 403
    assert client.assistants.get(created["assistant_id"]) == created
    client.assistants.delete(created["assistant_id"])
    for verb, path in (("PATCH", str(uuid.uuid4())), ("DELETE", str(uuid.uuid4())), ("GET", "not-an-id")):
        assert httpx.request(verb, f"{served.url}/assistants/{path}", json={}, timeout=30).status_code == 404


def test_a_damaged_or_foreign_assistant_record_in_redis_is_as_absent(served, redis_url):
    import redis

    from reactgraph.service.keys import ServiceKeys

    client = served.client()
    keys = ServiceKeys(served.env["REACTGRAPH_SERVICE_PREFIX"])
    damaged, foreign = (client.assistants.create("react", metadata={"damaged": True}) for _ in range(2))
    raw = redis.Redis.from_url(redis_url)
    try:
        raw.set(keys.assistant(damaged["assistant_id"]), b"\xff not json")
        raw.set(keys.assistant(foreign["assistant_id"]), json.dumps({**foreign, "graph_id": "someone-elses"}))
    finally:
        raw.close()
    for assistant in (damaged, foreign):
        with pytest.raises(NotFoundError):
            client.assistants.get(assistant["assistant_id"])
        with pytest.raises(NotFoundError):
            client.assistants.update(assistant["assistant_id"], name="x")
    assert client.assistants.search(metadata={"damaged": True}) == []
    assert client.assistants.count() == 3  # the graphs' own


# -- the store ------------------------------------------------------------------------------------------------

def test_store_items_are_put_got_searched_listed_and_deleted(served, notes):
    client = served.client()
    client.store.put_item(notes, "a", {"kind": "fruit", "n": 1})
    client.store.put_item([*notes, "deeper"], "b", {"kind": "tool", "n": 2})
    client.store.put_item(notes, "c", {"kind": "fruit", "n": 3}, ttl=60)
    item = client.store.get_item(notes, "a")
    assert (item["namespace"], item["key"], item["value"]) == (notes, "a", {"kind": "fruit", "n": 1})
    assert {"created_at", "updated_at"} <= item.keys()
    assert client.store.get_item(notes, "missing") is None

    fruit = client.store.search_items(notes, filter={"kind": "fruit"})["items"]
    assert sorted(i["key"] for i in fruit) == ["a", "c"]
    assert [i["key"] for i in client.store.search_items(notes, filter={"n": {"$gte": 2}}, limit=1)["items"]] in (
        ["b"], ["c"])
    assert len(client.store.search_items(notes, limit=2, offset=2)["items"]) == 1
    assert client.store.list_namespaces(prefix=notes)["namespaces"] == [notes, [*notes, "deeper"]]
    assert client.store.list_namespaces(prefix=notes, max_depth=2)["namespaces"] == [notes]

    client.store.delete_item(notes, "a")
    assert client.store.get_item(notes, "a") is None


def test_a_runs_long_term_memory_is_in_the_store_the_endpoints_serve(served):
    from reactgraph.graph.sessions import session_namespaces

    client = served.client()
    thread = client.threads.create()
    client.runs.wait(thread["thread_id"], "react", input=human("计算 2 + 3 等于多少"))
    session = list(session_namespaces(thread["thread_id"])[0])  # where the session's Q&A log is kept
    assert [ns[:len(session)] for ns in client.store.list_namespaces(prefix=session)["namespaces"]] == [session]
    (qa,) = client.store.search_items(session)["items"]
    assert "5" in json.dumps(qa["value"], ensure_ascii=False)
    client.threads.delete(thread["thread_id"])
    assert client.store.search_items(session)["items"] == []


@pytest.mark.parametrize(("verb", "path", "body", "status", "words"), [
    ("PUT", "/store/items", {"namespace": ["a.b"], "key": "k", "value": {}}, 422, "without periods"),
    ("PUT", "/store/items", {"namespace": [], "key": "k", "value": {}}, 422, "'namespace' must be a list"),
    ("PUT", "/store/items", {"namespace": ["n"] * 17, "key": "k", "value": {}}, 422, "1 to 16 labels"),
    ("PUT", "/store/items", {"namespace": ["n"], "key": "k\u0000", "value": {}}, 422, "'key'"),
    ("PUT", "/store/items", {"namespace": ["n"], "key": "k", "value": [1]}, 422, "'value' must be dict"),
    ("PUT", "/store/items", {"namespace": ["n"], "key": "k", "value": {"x": "y" * (1024 * 1024)}}, 413, "'value'"),
    ("PUT", "/store/items", {"namespace": ["n"], "key": "k", "value": {}, "ttl": -1}, 422, "'ttl'"),
    ("PUT", "/store/items", {"namespace": ["langgraph"], "key": "k", "value": {}}, 422, "langgraph"),
    ("GET", "/store/items?namespace=n", None, 422, "'key'"),
    ("GET", "/store/items?namespace=n&key=k&refresh_ttl=maybe", None, 422, "'refresh_ttl'"),
    ("DELETE", "/store/items", {"namespace": "n", "key": "k"}, 422, "'namespace'"),
    ("POST", "/store/items/search", {"namespace_prefix": ["n"], "filter": {"x": {"$regex": "."}}}, 422, "$regex"),
    ("POST", "/store/items/search", {"namespace_prefix": ["n"], "limit": 5000}, 422, "'limit'"),
    ("POST", "/store/namespaces", {"max_depth": 0}, 422, "'max_depth'"),
])
def test_a_bad_store_request_gets_its_status_and_one_line_naming_the_cause(served, verb, path, body, status, words):
    code, detail = status_and_detail(http_request(verb, served.url + path, json=body))
    assert code == status and words in detail, detail
