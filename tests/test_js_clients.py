"""LangChain's own JS clients against `reactgraph serve`: the JS `@langchain/langgraph-sdk` (tests/js/sdk_smoke.mjs)
and a page on its React `useStream` in headless Chromium (tests/js/browser_use_stream.mjs), each asking a question
and then approving an `http_get`, editing one and rejecting one, in LangChain's HITL format. The scripts print
what the client saw; the assertions are here. `http_get` fetches a page this test serves on 127.0.0.1 (the service
gets an `http_get` allowed to reach loopback from tests/support/loopback_tools.py); the page's requests show what
ran. Packages: tests/js/prepare.py (`npm ci` once per lockfile; .ci/run runs it first); browser: the machine's
Chromium ($CHROMIUM or /usr/bin/chromium).

agent-chat-ui itself is not on npm (create-agent-chat-app bundles an older copy that predates LangChain's HITL
format), so its test runs when $REACTGRAPH_AGENT_CHAT_UI names a checkout of it, installed and built
(`npm install && npx next build`): tests/js/browser_agent_chat_ui.mjs drives it in Chromium."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.local_servers import free_port, http_recorder
from test_serve import Service, service_env, stop

JS = Path(__file__).parent / "js"
SCRIPT_TIMEOUT_S = 300
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
AGENT_CHAT_UI = os.environ.get("REACTGRAPH_AGENT_CHAT_UI", "")
UI_START_TIMEOUT_S = 60
sys.path.insert(0, str(JS))
from prepare import prepare  # noqa: E402 - tests/js is not a package


@pytest.fixture(scope="module")
def js_dir(tmp_path_factory) -> Path:
    """A folder with the scripts and the lockfile's node_modules (linked from the cache)."""
    if shutil.which("node") is None:
        pytest.fail("node is not installed (apt-get install -y nodejs npm): .ci/run installs it")
    run = tmp_path_factory.mktemp("js")
    (run / "node_modules").symlink_to(prepare() / "node_modules", target_is_directory=True)
    for script in ("sdk_smoke.mjs", "browser_use_stream.mjs", "use_stream_app.jsx", "browser_agent_chat_ui.mjs"):
        shutil.copy(JS / script, run / script)
    return run


@pytest.fixture(scope="module")
def page() -> Iterator[tuple[str, list]]:
    with http_recorder() as (url, seen):
        yield url, seen


@pytest.fixture(scope="module")
def browser_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def ui_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def served(redis_url: str, tmp_path_factory, browser_port: int, ui_port: int) -> Iterator[Service]:
    """`reactgraph serve` with loopback http_get and CORS for the browser page's origin, as a user configures it
    for a chat UI served from another origin (LangGraph's server reads `http.cors` the same way)."""
    tmp = tmp_path_factory.mktemp("js-serve")
    config = tmp / "langgraph.json"
    config.write_text(json.dumps({"graphs": {}, "http": {"cors": {
        "allow_origins": [f"http://127.0.0.1:{browser_port}", f"http://127.0.0.1:{ui_port}"],
        "allow_methods": ["*"], "allow_headers": ["*"],
        "expose_headers": ["content-location", "x-pagination-total", "x-pagination-next"]}}}))
    port = free_port()
    env = service_env(redis_url, f"svc-js-{port}", tmp / "calls.log", REACTGRAPH_TOOLS="support.loopback_tools:TOOLS")
    service = Service(f"http://127.0.0.1:{port}", env, tmp / "calls.log", [])
    service.start_api(port, 1, "--config", str(config))
    yield service
    stop(service)


def run_node(js_dir: Path, *args: str) -> dict:
    done = subprocess.run(["node", *args], cwd=js_dir, capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S,
                          check=False, env={**os.environ, "CHROMIUM": CHROMIUM})
    assert done.returncode == 0, f"node {args[0]} failed: {done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def fetched(seen: list, *paths: str) -> list[str]:
    return [path for path, _headers, _body in seen if path in paths]


def test_the_js_sdk_streams_a_run_reads_the_approval_and_resumes_it_three_ways(served, js_dir, page):
    url, seen = page
    got = run_node(js_dir, "sdk_smoke.mjs", served.url, url)
    assert got["assistants"] == ["plan_solve", "react", "reflexion"]
    question = got["question"]
    assert question["events"] == ["metadata", "values", "messages"] and question["tuplesWellFormed"]
    assert "5" in question["answer"] and question["threadStatus"] == "idle"
    assert got["messagesMode"] == ["messages/complete", "messages/metadata", "metadata"]
    pause = got["interrupt"]
    (request,) = pause["streamed"]
    assert [(a["name"], a["args"]) for a in request["action_requests"]] == [("http_get", {"url": f"{url}/approved"})]
    assert request["review_configs"] == [{"action_name": "http_get",
                                          "allowed_decisions": ["approve", "edit", "reject", "respond"]}]
    # useStream reads the interrupt from the values stream, the thread's state or its task: the same everywhere
    assert pause["inValues"] == pause["inState"] == pause["inTasks"] == [request]
    assert pause["next"] == ["approve"] and pause["threadStatus"] == "interrupted"
    assert got["approve"]["approvals"] == [["http_get", "approved"]] and "ok" in got["approve"]["answer"]
    assert got["approve"]["status"] == "answered" and got["approve"]["thread"] == "idle"
    assert got["edit"]["approvals"] == [["http_get", "edited"]]
    assert got["reject"]["approvals"] == [["http_get", "rejected"]] and got["reject"]["thread"] == "idle"
    assert "not that page" in got["reject"]["answer"]
    # what reached the page: the approved call, the edited one instead of the model's; never a rejected one
    assert fetched(seen, "/approved", "/as-asked", "/as-edited", "/rejected") == ["/approved", "/as-edited"]


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
def test_a_use_stream_page_in_chromium_answers_and_shows_approve_edit_and_reject(served, js_dir, page,
                                                                                  browser_port):
    url, seen = page
    before = len(seen)
    got = run_node(js_dir, "browser_use_stream.mjs", served.url, url, str(browser_port))
    assert got["console"] == [] and got["failed"] == []  # no refused request, no CORS error, no script error
    assert [kind for kind, _text in got["question"]["messages"]] == ["human", "ai", "tool", "ai"]
    assert "5" in got["question"]["answer"]
    asked = got["asked"]
    assert asked["interrupt"] == f'http_get {{"url":"{url}/approved"}}'
    assert asked["buttons"] == ["Approve", "Edit", "Reject"]
    assert got["approve"]["interrupt"] is None and "ok" in got["approve"]["answer"]
    edit_result = [text for kind, text in got["edit"]["messages"] if kind == "tool"]
    assert edit_result and edit_result[0].startswith("[A person edited this call") and "/as-edited" in edit_result[0]
    assert got["reject"]["interrupt"] is None and "a person said no" in got["reject"]["answer"]
    assert fetched(seen[before:], "/approved", "/as-asked", "/as-edited", "/rejected") == ["/approved", "/as-edited"]


@pytest.fixture
def agent_chat_ui(ui_port: int, tmp_path: Path) -> Iterator[str]:
    """The built agent-chat-ui checkout at $REACTGRAPH_AGENT_CHAT_UI served by `next start` on 127.0.0.1."""
    import httpx

    from test_serve import wait_for

    log = (tmp_path / "next.log").open("wb")
    process = subprocess.Popen([str(Path(AGENT_CHAT_UI) / "node_modules" / ".bin" / "next"), "start", "-H",
                                "127.0.0.1", "-p", str(ui_port)], cwd=AGENT_CHAT_UI, stdout=log, stderr=log,
                               env={**os.environ, "NEXT_TELEMETRY_DISABLED": "1"})
    url = f"http://127.0.0.1:{ui_port}"

    def answers() -> bool:
        assert process.poll() is None, f"next start exited: {(tmp_path / 'next.log').read_text()[-2000:]}"
        try:
            return httpx.get(url, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(answers, UI_START_TIMEOUT_S, "agent-chat-ui answering")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=15)
        log.close()


@pytest.mark.skipif(not AGENT_CHAT_UI, reason="agent-chat-ui is not on npm: set REACTGRAPH_AGENT_CHAT_UI to a built "
                                              "checkout of it (npm install && npx next build) to run this")
def test_agent_chat_ui_in_chromium_answers_and_takes_approve_edit_and_reject(served, js_dir, page, agent_chat_ui):
    url, seen = page
    before = len(seen)
    got = run_node(js_dir, "browser_agent_chat_ui.mjs", agent_chat_ui, served.url, url)
    assert "error" not in got and got["failed"] == [], got.get("error") or got["failed"]
    assert "计算结果：2 + 3 = 5" in got["question"]
    # its inbox renders our interrupt as LangChain's HITL request: the edit/approve card and the reject card
    assert all(words in got["asked"] for words in ("Edit/Approve", "Approve", "Submit rejection", f"{url}/approved"))
    assert "Content: ok" in got["approve"]
    assert "A person edited this call" in got["edit"] and f"{url}/as-edited" in got["edit"]
    assert "rejected at the approval step: not that page" in got["reject"]
    assert fetched(seen[before:], "/approved", "/as-asked", "/as-edited", "/rejected") == ["/approved", "/as-edited"]
