"""Created assistants and the store under auth (tests/support/auth_assistant_owner.py, a `langgraph_sdk.Auth`):
each user sees, changes and runs only the assistants they created, and reaches only their own store namespace."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from test_serve import TESTS, Service, human, stop
from test_serve_auth import client_of, start_with, status_of


@pytest.fixture(scope="module")
def served(redis_url: str, tmp_path_factory) -> Iterator[Service]:
    tmp = tmp_path_factory.mktemp("assistants-auth")
    config = tmp / "langgraph.json"
    owner = Path(TESTS) / "support" / "auth_assistant_owner.py"
    config.write_text(json.dumps({"auth": {"path": f"{owner}:auth"}}), encoding="utf-8")
    service = start_with(redis_url, tmp, "--config", str(config))
    yield service
    stop(service)


def test_a_users_assistant_is_theirs_alone_to_see_change_and_run(served):
    alice, bob = client_of(served, "token-alice"), client_of(served, "token-bob")
    mine = alice.assistants.create("react", context={"max_iterations": 3}, name="alice's")
    assistant_id = mine["assistant_id"]
    assert mine["metadata"] == {"owner": "alice"}  # what the create handler wrote
    assert [a["assistant_id"] for a in alice.assistants.search()] == [assistant_id]
    assert bob.assistants.search() == [] and bob.assistants.count() == 0

    for call in (lambda: bob.assistants.get(assistant_id), lambda: bob.assistants.get_graph(assistant_id),
                 lambda: bob.assistants.get_versions(assistant_id),
                 lambda: bob.assistants.update(assistant_id, name="bob's now"),
                 lambda: bob.assistants.set_latest(assistant_id, 1), lambda: bob.assistants.delete(assistant_id)):
        assert status_of(call) == 404
    assert status_of(lambda: bob.assistants.create("react", assistant_id=assistant_id, if_exists="do_nothing")) == 409
    bobs_thread = bob.threads.create()
    assert status_of(lambda: bob.runs.wait(bobs_thread["thread_id"], assistant_id, input=human("1 + 1"))) == 404

    thread = alice.threads.create()
    state = alice.runs.wait(thread["thread_id"], assistant_id, input=human("计算 2 + 3 等于多少"))
    assert state["status"] == "answered"
    assert alice.assistants.update(assistant_id, name="still alice's")["metadata"] == {"owner": "alice"}
    # the update handler sees the metadata: handing the assistant to bob is refused, and it stays alice's
    assert status_of(lambda: alice.assistants.update(assistant_id, metadata={"owner": "bob"})) == 403
    assert alice.assistants.get(assistant_id)["metadata"] == {"owner": "alice"}
    assert bob.assistants.search() == []
    alice.assistants.delete(assistant_id)
    for client, one in ((alice, thread), (bob, bobs_thread)):
        client.threads.delete(one["thread_id"])


def test_a_users_store_items_are_kept_under_their_own_namespace(served):
    alice, bob = client_of(served, "token-alice"), client_of(served, "token-bob")
    alice.store.put_item(["notes"], "plan", {"text": "alice's"})
    assert alice.store.get_item(["notes"], "plan")["value"] == {"text": "alice's"}
    assert bob.store.get_item(["notes"], "plan") is None
    assert bob.store.search_items(["notes"])["items"] == []
    assert ["alice", "notes"] in alice.store.list_namespaces()["namespaces"]
    assert ["alice", "notes"] not in bob.store.list_namespaces()["namespaces"]
    bob.store.delete_item(["notes"], "plan")  # bob's own (absent) item: alice's stays
    assert alice.store.get_item(["notes"], "plan") is not None
    alice.store.delete_item(["notes"], "plan")
    assert alice.store.get_item(["notes"], "plan") is None
