"""The same auth.py (tests/support/auth_owner.py, a `langgraph_sdk.Auth`) under `langgraph dev` and under `reactgraph
serve`: the same requests of three users get the same statuses and show the same number of threads.

`langgraph dev` (langgraph-cli[inmem]) runs custom auth offline with no licence: its in-memory runtime ships
a no-op licence check. It serves a one-node graph named `react` here; what is compared is authorisation,
not answers.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from support.local_servers import http_request
from test_serve import TESTS, Service, stop
from test_serve_auth import start_with
from test_studio import StudioServer, launch_studio

ECHO_GRAPH = textwrap.dedent("""
    from langgraph.graph import START, MessagesState, StateGraph

    def answer(state):
        return {"messages": [{"role": "ai", "content": "ok"}]}

    graph = StateGraph(MessagesState).add_node(answer).add_edge(START, "answer").compile()
""")
TOKENS = {"alice": "token-alice", "bob": "token-bob", "carol": "token-carol", "mallory": "token-mallory"}
# Where the two servers differ on purpose (docs/security.md says why); everything else must be equal.
DELIBERATE = {
    # langgraph-api answers a copy of a thread it will not show you 409 (as for one that does not exist);
    # reactgraph answers 404 for both, like every other route on such a thread
    "bob copies alice's thread": (409, 404),
}


@pytest.fixture(scope="module")
def servers(redis_url: str, tmp_path_factory) -> Iterator[dict[str, str]]:
    work = tmp_path_factory.mktemp("compare")
    shutil.copy(Path(TESTS) / "support" / "auth_owner.py", work / "auth_owner.py")
    (work / "echo_graph.py").write_text(ECHO_GRAPH, encoding="utf-8")
    (work / "langgraph.json").write_text(json.dumps({
        "dependencies": ["."], "graphs": {"react": "./echo_graph.py:graph"},
        "auth": {"path": "./auth_owner.py:auth"}}), encoding="utf-8")
    dev: StudioServer = launch_studio(work, redis_url, work / "langgraph.json")
    ours: Service | None = None
    try:
        ours = start_with(redis_url, work, "--config", str(work / "langgraph.json"))
        yield {"langgraph dev": dev.url, "reactgraph serve": ours.url}
    finally:
        if ours is not None:
            stop(ours)
        dev.stop()


def session(url: str) -> list[tuple[str, int | str]]:
    """The story, told to one server: (what was asked, status or what was seen)."""
    answers: list[tuple[str, int | str]] = []

    def ask(what: str, user: str | None, method: str, path: str, body: dict | None = None,
            seen: Callable[[httpx.Response], str] | None = None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {TOKENS[user]}"} if user else {}
        answer = http_request(method, url + path, headers=headers, json=body)
        answers.append((what, answer.status_code))
        if seen is not None and answer.status_code == 200:
            answers.append((f"{what}: seen", seen(answer)))
        return answer

    count_of = lambda answer: str(answer.json())  # noqa: E731
    listed = lambda answer: str(len(answer.json()))  # noqa: E731
    ask("no token", None, "POST", "/threads/search", {})
    ask("unknown token", "mallory", "POST", "/threads/search", {})
    ask("open /ok", None, "GET", "/ok")
    ask("open /info", None, "GET", "/info")
    made = ask("alice creates a thread", "alice", "POST", "/threads", {"metadata": {"topic": "t", "owner": "bob"}},
               seen=lambda a: a.json()["metadata"].get("owner"))
    thread = made.json()["thread_id"]
    ask("carol may not create", "carol", "POST", "/threads", {})
    ask("alice runs on her thread", "alice", "POST", f"/threads/{thread}/runs/wait",
        {"assistant_id": "react", "input": {"messages": [{"role": "human", "content": "计算 2 + 3 等于多少"}]}})
    runs = ask("alice lists her runs", "alice", "GET", f"/threads/{thread}/runs", seen=listed)
    run = runs.json()[0]["run_id"]
    ask("alice sees her thread", "alice", "GET", f"/threads/{thread}")
    ask("alice searches", "alice", "POST", "/threads/search", {"limit": 100}, seen=listed)
    ask("alice counts", "alice", "POST", "/threads/count", {}, seen=count_of)
    ask("bob gets alice's thread", "bob", "GET", f"/threads/{thread}")
    ask("bob searches", "bob", "POST", "/threads/search", {"limit": 100}, seen=listed)
    ask("bob searches by id", "bob", "POST", "/threads/search", {"ids": [thread]}, seen=listed)
    ask("bob counts", "bob", "POST", "/threads/count", {}, seen=count_of)
    ask("bob reads alice's state", "bob", "GET", f"/threads/{thread}/state")
    ask("bob writes alice's state", "bob", "POST", f"/threads/{thread}/state", {"values": {"messages": []}})
    ask("bob reads alice's history", "bob", "POST", f"/threads/{thread}/history", {})
    ask("bob patches alice's thread", "bob", "PATCH", f"/threads/{thread}", {"metadata": {"owner": "bob"}})
    ask("bob copies alice's thread", "bob", "POST", f"/threads/{thread}/copy", {})
    ask("bob deletes alice's thread", "bob", "DELETE", f"/threads/{thread}")
    ask("bob runs on alice's thread", "bob", "POST", f"/threads/{thread}/runs",
        {"assistant_id": "react", "input": {"messages": []}})
    ask("bob lists alice's runs", "bob", "GET", f"/threads/{thread}/runs")
    ask("bob gets alice's run", "bob", "GET", f"/threads/{thread}/runs/{run}")
    ask("bob joins alice's run", "bob", "GET", f"/threads/{thread}/runs/{run}/join")
    ask("bob cancels alice's run", "bob", "POST", f"/threads/{thread}/runs/{run}/cancel")
    ask("bob deletes alice's run", "bob", "DELETE", f"/threads/{thread}/runs/{run}")
    ask("alice's thread is still hers", "alice", "GET", f"/threads/{thread}",
        seen=lambda a: a.json()["metadata"]["owner"])
    ask("alice deletes her thread", "alice", "DELETE", f"/threads/{thread}")
    ask("alice counts again", "alice", "POST", "/threads/count", {}, seen=count_of)
    return answers


def test_the_same_auth_file_gets_the_same_answers_from_both_servers(servers):
    told = {name: session(url) for name, url in servers.items()}
    theirs, ours = told["langgraph dev"], told["reactgraph serve"]
    assert [what for what, _ in theirs] == [what for what, _ in ours]
    differences = {what: (a, b) for (what, a), (_, b) in zip(theirs, ours, strict=True) if a != b}
    assert differences == DELIBERATE, json.dumps(list(zip(theirs, ours, strict=True)), ensure_ascii=False)
