"""The local debugger page (reactgraph/ui): a real `reactgraph ui` on loopback, its page driven in headless Chromium
by tests/js/browser_debugger_ui.mjs (playwright-core from tests/js/prepare.py; Debian's Chromium, no download),
which refuses and reports any request the page makes to anything but loopback. One browser session clicks
through the graph, a question, the state tree, time travel, the server's search of the sessions, a session of many
turns opened a page of history at a time, approvals (approved, edited, rejected), a hostile tool output, two
graphs side by side, a comparison, and on a phone the newer panels by keyboard alone; the tests below each read
their part of what it saw. The sessions' search through HTTP (`text`, `title`). Then `reactgraph ui` and `serve
--ui` as commands: their help, their refusals in one line, the page's headers, and its place behind the
service's Host, Origin and auth checks.
"""

from __future__ import annotations

import json
import random
import re
import socket
import string
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from support.debugger_browser import BrowserUnavailable, run_page_script
from support.forked_commands import ForkedCommand, forked_run
from support.local_servers import free_port, http_recorder, http_request
from test_serve import PortTaken, Service, service_env, stop

STATIC = Path(__file__).resolve().parent.parent / "reactgraph" / "ui" / "static"
SCRIPT_TIMEOUT_S = 300
LONG_TURNS = 15  # about 9 checkpoints each: three pages of the page's history (60 checkpoints a page)
STARTUP_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def fetched_page() -> Iterator[tuple[str, list]]:
    """The loopback page the approved `http_get` fetches, and the requests it got."""
    with http_recorder() as (url, seen):
        yield url, seen


def start_ui(redis_url: str, tmp: Path, *options: str) -> Service:
    """`reactgraph ui OPTIONS…` on a free loopback port and `redis_url`, with the hostile `get_weather` and a
    loopback `http_get` (support/ui_tools.py), answering /ok before this returns. A port another test's server
    took between `free_port()` and the bind is given up for another one, at most twice."""
    for attempt in range(3):
        port = free_port()
        (tmp / "ui.err").write_text("")  # this attempt's errors only
        env = service_env(redis_url, f"svc-ui-{port}", tmp / "calls.log", REACTGRAPH_TOOLS="support.ui_tools:TOOLS")
        service = Service(f"http://127.0.0.1:{port}", env, tmp / "calls.log", [])
        process = ForkedCommand(["ui", "--port", str(port), *options], env, stdout=tmp / "ui.out",
                                stderr=tmp / "ui.err")
        service.processes.append(process)
        try:
            service.wait_answering(process, service.url, tmp / "ui.err")
            return service
        except PortTaken:
            stop(service)
            if attempt == 2:
                raise
        except BaseException:
            stop(service)
            raise
    raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def debugger(redis_url: str, tmp_path_factory) -> Iterator[Service]:
    """`reactgraph ui` (start_ui) with a real comparison's outputs for the page's Comparisons."""
    tmp = tmp_path_factory.mktemp("ui")
    # offline, four tasks, two graphs
    compared = forked_run(["compare", "--graphs", "react,plan_solve", "--limit", "4", "--out",
                           str(tmp / "results" / "first")], service_env(redis_url, "svc-ui-compare", tmp / "c.log"),
                          timeout=STARTUP_TIMEOUT_S * 2)
    assert compared.returncode == 0, compared.stderr[-2000:]
    service = start_ui(redis_url, tmp, "--results", str(tmp / "results"))
    try:
        yield service
    finally:
        stop(service)


@pytest.fixture(scope="module")
def clicked(debugger: Service, fetched_page) -> dict:
    """What the page showed as the browser script clicked through it (one session for the tests below)."""
    url, _seen = fetched_page
    long_thread = str(uuid.uuid4())  # many turns: more than one page of history
    for turn in range(LONG_TURNS):
        _asked(debugger.url, long_thread, f"计算 {turn} + 1 等于多少")
    try:
        return run_page_script("browser_debugger_ui.mjs", [f"{debugger.url}/ui/", url, long_thread],
                               SCRIPT_TIMEOUT_S)
    except BrowserUnavailable as exc:
        pytest.fail(str(exc))


def kinds(shown: dict) -> list[str]:
    return [entry["kind"] for entry in shown["entries"]]


def test_reactgraph_ui_prints_the_pages_address(debugger):
    assert f"reactgraph ui: {debugger.url}/ui/" in (debugger.log.parent / "ui.out").read_text()


def test_the_page_draws_each_graph_from_the_compiled_graph(clicked):
    assert clicked["graphs"] == ["plan_solve", "react", "reflexion"]
    assert clicked["nodes"] == ["__start__", "load_memory", "think", "approve", "act", "observe", "reflect",
                                "finalize", "save_memory", "__end__"]
    assert clicked["edges"] == 15  # every edge of GET /assistants/react/graph


def test_a_question_streams_its_steps_into_the_timeline_and_ends_with_the_answer(clicked):
    shown = clicked["question"]
    assert kinds(shown) == ["thought", "call", "verdict", "final"]
    call = shown["entries"][1]
    assert call["tool"] == "calculator" and call["status"] == "ok" and " ms" in call["text"]
    assert "enough" in shown["entries"][2]["text"]
    assert "5" in shown["answer"] and shown["status"] == "answered" and shown["state"] == "done"
    assert {"load_memory", "think", "act", "observe", "reflect", "finalize"} <= set(shown["ran"])  # lit up live
    assert re.search(r"tokens \d+ in · \d+ out · tool calls 1", shown["usage"])


def test_plan_and_solve_shows_its_plan_and_steps_and_reflexion_its_trial_and_verdict(clicked):
    plan = clicked["plan_solve"]
    assert {"plan", "execute_step", "replan", "solve"} <= set(plan["nodes"])
    assert kinds(plan)[0] == "plan" and "plan-step" in kinds(plan) and kinds(plan)[-1] == "final"
    assert "1 step(s)" in plan["entries"][0]["text"] and "5" in plan["answer"]
    assert {"plan", "execute_step", "act", "solve"} <= set(plan["ran"])
    trial = clicked["reflexion"]
    assert {"trial", "evaluate", "self_reflect"} <= set(trial["nodes"])
    assert kinds(trial) == ["thought", "call", "verdict", "final", "step evaluate"]
    assert "passed" in trial["entries"][-1]["text"] and "5" in trial["answer"]
    assert {"trial", "evaluate"} <= set(trial["ran"])


def test_the_state_at_any_checkpoint_opens_as_a_folding_tree(clicked):
    assert clicked["checkpoints"] >= 5
    assert 'final_answer: null' in clicked["firstState"]  # the turn's first checkpoint: nothing answered yet
    tree = clicked["tree"]
    assert {"messages", "steps", "final_answer", "status", "usage"} <= set(tree["keys"])
    assert tree["messagesOpen"] and 'status: "answered"' in tree["text"]


def test_time_travel_asks_again_from_a_checkpoint_and_runs_on_from_an_edited_state(clicked):
    # a new question from the turn's first checkpoint: a branch of its own, answered live
    assert clicked["forked"]["state"] == "done" and "7" in (clicked["forked"]["answer"] or "")
    # the newest checkpoint's state edited as finalize wrote it, and the run taken on from there (save_memory)
    assert 'final_answer: "edited on the page"' in clicked["editedState"]
    assert clicked["editRun"]["state"] == "done" and clicked["editRun"]["problem"] is None
    _, forked, edited = clicked["historyLengths"]
    assert forked >= 5 and edited > forked  # the edit and the run on from it: checkpoints of their own


def test_two_graphs_answer_one_question_side_by_side_each_with_its_cost(clicked):
    react, plan_solve = clicked["pair"]
    assert (react["graph"], plan_solve["graph"]) == ("react", "plan_solve")
    for side in (react, plan_solve):
        assert side["state"] == "done" and "answered" in side["status"], side
        assert "tokens" in side["usage"] and "tool calls 1" in side["usage"], side
        assert "126" in side["answer"] and side["kinds"][-1] == "final", side
    # each paradigm's own steps: Plan-and-Solve plans first, ReAct thinks first
    assert plan_solve["kinds"][0] == "plan" and "plan-step" in plan_solve["kinds"]
    assert react["kinds"][0] == "thought" and "plan" not in react["kinds"]
    assert clicked["pairWide"]["scroll"] <= clicked["pairWide"]["width"]


def test_a_comparison_is_shown_as_its_tables_with_intervals_and_its_plots(clicked):
    shown = clicked["comparison"]
    assert shown["listed"] and "react · plan_solve" in shown["listed"][0]
    assert "Per graph" in shown["text"] and "Pairs" in shown["text"]
    assert re.search(r"react\d+\d+(\.\d+)? % \[", shown["text"])  # runs, then success with its interval
    assert "not distinguishable from noise" in shown["text"] and "80 % power" in shown["text"]
    assert shown["plots"] >= 1 and shown["loaded"] == shown["plots"]  # the PNGs, fetched with the page's credentials


def test_the_comparisons_are_api_data_a_name_outside_the_folder_is_refused(debugger):
    listed = httpx.get(f"{debugger.url}/comparisons", timeout=5).json()
    assert listed["folder"] and [c["name"] for c in listed["comparisons"]] == ["first"]
    assert httpx.get(f"{debugger.url}/comparisons/first/summary.json", timeout=5).json()["graphs"]
    for name, file in (("..", "summary.json"), ("first", "..%2Frun.json"), ("first", "results.jsonl"),
                       ("%2Fetc", "passwd"), ("first", "run.json")):
        assert httpx.get(f"{debugger.url}/comparisons/{name}/{file}", timeout=5).status_code == 404, (name, file)


def test_sessions_are_listed_and_searched_by_the_server(clicked):
    assert any("2 + 3" in text and "react" in text for text in clicked["searchHit"])  # its first question
    (found,) = clicked["searchById"]  # a piece of its id, in capitals: found case-insensitively, and only it
    assert found.startswith("计算 2 + 3 等于多少")
    assert clicked["searchMiss"] == "no session matches"
    # the server searched: the page asked for one page of sessions with the text, and no session's state
    texts = [body.get("text") for body in clicked["searches"]]
    assert "2 + 3" in texts and "no-such-session-anywhere" in texts
    for body in clicked["searches"]:
        assert body["limit"] <= 50 and "values" not in body["select"] and "extract" not in body, body


def test_an_approval_is_shown_with_its_decisions_and_approved_from_the_page(clicked, fetched_page):
    _url, seen = fetched_page
    assert clicked["asked"]["state"] == "waiting" and kinds(clicked["asked"])[:2] == ["thought", "call"]
    approval = clicked["approval"]
    assert approval["tools"] == ["http_get"] and approval["buttons"] == ["approve", "edit", "reject", "respond"]
    assert "needs a person's approval" in approval["text"] and approval["waitingNode"] == ["approve"]
    approved = clicked["approved"]
    assert "approval-step" in kinds(approved) and approved["state"] == "done"
    (call,) = [entry for entry in approved["entries"] if entry["kind"] == "call"]
    assert call["tool"] == "http_get" and call["status"] == "ok"
    assert clicked["approvalHidden"] and "ok" in approved["answer"]
    # what reached the page: the approved call and the edited one (never the model's edited-away call or the
    # rejected one), each once
    assert [path for path, _headers, _body in seen] == ["/approved", "/as-edited"]


def test_an_approval_is_edited_and_rejected_from_the_page(clicked, fetched_page):
    url, _seen = fetched_page
    edited = clicked["edited"]
    first = next(entry for entry in edited["entries"] if entry["kind"] == "call")  # one card, its new arguments
    assert first["status"] == "ok" and first["text"].startswith(f'tool callhttp_get{{"url":"{url}/as-edited"}}')
    assert "[A person edited this call" in first["text"]
    assert any(e["kind"] == "approval-step" and "edited" in e["text"] for e in edited["entries"])
    rejected = clicked["rejected"]
    (call,) = [entry for entry in rejected["entries"] if entry["kind"] == "call"]
    assert call["status"] == "rejected" and "not that page" in call["text"]
    assert any(e["kind"] == "approval-step" and "rejected: not that page" in e["text"] for e in rejected["entries"])
    assert rejected["state"] == "done" and "not that page" in rejected["answer"]


def test_a_hostile_tool_output_is_shown_as_text_and_nothing_is_made_of_it(clicked):
    (call,) = [entry for entry in clicked["hostile"]["entries"] if entry["kind"] == "call"]
    assert '<img src=x onerror="window.__pwned = 1"><script>window.__pwned = 2</script>' in call["text"]
    assert clicked["injected"] == {"images": 0, "scripts": 1, "bold": 0, "pwned": None}  # the page's own script


def test_a_long_session_opens_with_two_requests_and_its_earlier_turns_are_read_when_asked_for(clicked):
    long = clicked["long"]
    history = [f for f in long["openedWith"] if f.endswith("/history")]
    assert len(long["openedWith"]) == 2 and len(history) == 1, long["openedWith"]  # the thread, one page
    assert 0 < long["turnsFirst"] < LONG_TURNS and long["moreShown"]
    # every turn once the earlier ones are read, numbered from the session's start, in order
    assert long["turns"] == [f"{n + 1}. 计算 {n} + 1 等于多少" for n in range(LONG_TURNS)]
    assert long["firstTimeline"][-1] == "final" and long["firstCheckpoints"] >= 5
    assert "final_answer: null" in long["firstState"]  # the first turn's first checkpoint: nothing answered yet


def test_nothing_the_page_loads_leaves_loopback_and_nothing_fails(clicked):
    assert clicked["requests"] > 20 and clicked["offLoopback"] == []
    assert clicked["console"] == [] and clicked["failed"] == []  # no CSP refusal, no script error, no 4xx/5xx
    assert "default-src 'none'" in clicked["csp"] and "script-src 'self'" in clicked["csp"]


def test_the_page_fits_a_laptop_and_a_phone(clicked):
    assert clicked["wide"]["scroll"] <= clicked["wide"]["width"] == 1280
    assert clicked["phone"]["scroll"] <= clicked["phone"]["width"] == 390 and clicked["phone"]["columns"] == 1


def test_time_travel_side_by_side_and_comparisons_work_by_keyboard_on_a_phone(clicked):
    keys = clicked["phoneKeys"]
    # every control of those panels, reached with Tab
    assert len(keys["reached"]) > 20 and keys["unreached"] == [], keys["reached"]
    assert keys["outside"] == [] and keys["wide"]["scroll"] <= keys["wide"]["width"] == 390
    assert keys["fork"]["state"] == "done" and "13" in (keys["fork"]["answer"] or "")  # a fork asked with Enter
    assert keys["pair"] == ["done", "done"] and keys["pairOutside"] == []  # both graphs, one under the other
    assert keys["pairWide"]["scroll"] <= keys["pairWide"]["width"] == 390


# --- the sessions' search, on the server -------------------------------------------------------------------------

def _search(url: str, **body) -> list[dict]:
    answer = http_request("POST", f"{url}/threads/search", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _asked(url: str, thread: str, question: str, **context) -> None:
    answer = http_request("POST", f"{url}/threads/{thread}/runs/wait", timeout=60, json={
        "assistant_id": "react", "if_not_exists": "create", "context": context,
        "input": {"messages": [{"role": "human", "content": question}]}})
    assert answer.status_code == 200, answer.text


def test_the_server_finds_sessions_by_a_text_in_their_first_question_id_graph_or_status(debugger):
    url, word = debugger.url, "".join(random.choices(string.ascii_lowercase, k=10))  # in no other session
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    _asked(url, first, f"计算 2 + 3 等于多少（备注 {word}）")
    _asked(url, second, f"计算 4 + 4 等于多少（备注 {word.upper()}）")  # found case-insensitively
    # a long session: its first question folded into the summary, out of its state, still its title
    for question in (f"计算 1 + 1 等于多少（起 {word}x）", "计算 2 + 2 等于多少", "计算 3 + 3 等于多少"):
        _asked(url, second + "-long", question, memory_window=2)
    long_state = httpx.get(f"{url}/threads/{second}-long/state", timeout=10).json()["values"]
    assert f"{word}x" not in json.dumps(long_state["messages"], ensure_ascii=False)
    select = ["thread_id", "title", "status"]
    found = _search(url, text=word, select=select, limit=10)
    assert sorted(t["thread_id"] for t in found) == sorted([first, second, second + "-long"])
    assert {t["thread_id"]: t["title"] for t in found}[second + "-long"] == f"计算 1 + 1 等于多少（起 {word}x）"
    assert set(found[0]) == set(select) and "values" not in found[0]  # no state read for a list
    assert [t["thread_id"] for t in _search(url, text=f"  {word}X ", select=select)] == [second + "-long"]
    assert [t["thread_id"] for t in _search(url, text=first[4:20].upper(), select=["thread_id"])] == [first]
    # newest first, a page at a time; counted as searched
    pages = [_search(url, text=word, select=["thread_id"], limit=1, offset=n) for n in range(4)]
    assert [page[0]["thread_id"] for page in pages[:3]] == [second + "-long", second, first] and pages[3] == []
    counted = httpx.post(f"{url}/threads/count", json={"text": word}, timeout=10).json()
    assert counted == 3
    # with the Agent Server's own filters: metadata and status narrow it, as without a text
    graph = _search(url, text=word, metadata={"graph_id": "plan_solve"}, select=["thread_id"])
    assert graph == [] and len(_search(url, text=word, status="idle", select=["thread_id"])) == 3


@pytest.mark.parametrize(("text", "words"), [
    (5, "'text' must be a string, not int"),
    (["a"], "'text' must be a string, not list"),
    ("x" * 201, "'text' may hold at most 200 characters, got 201"),
])
def test_a_search_text_that_is_no_string_or_too_long_is_refused_in_one_line(debugger, text, words):
    answer = httpx.post(f"{debugger.url}/threads/search", json={"text": text}, timeout=10)
    assert answer.status_code == 422 and answer.json()["detail"] == words
    assert httpx.post(f"{debugger.url}/threads/count", json={"text": text}, timeout=10).status_code == 422


def test_a_title_is_selected_only_by_name_and_an_unknown_field_is_still_refused(debugger):
    refused = httpx.post(f"{debugger.url}/threads/search", json={"select": ["thread_id", "titles"]}, timeout=10)
    assert refused.status_code == 422 and "'titles'" in refused.json()["detail"]
    whole = _search(debugger.url, limit=1)
    assert whole and "title" not in whole[0]  # the Agent Server's thread, as langgraph-sdk reads it


# --- the page's files and headers ------------------------------------------------------------------------------

def test_the_page_is_served_with_a_strict_policy_and_only_its_own_files(debugger):
    redirect = httpx.get(f"{debugger.url}/ui", timeout=5)
    assert redirect.status_code == 308 and redirect.headers["location"] == "ui/"
    page = httpx.get(f"{debugger.url}/ui/", timeout=5)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert policy.startswith("default-src 'none'; script-src 'self'; style-src 'self'")
    assert "connect-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "require-trusted-types-for 'script'" in policy and page.headers["x-content-type-options"] == "nosniff"
    module = httpx.get(f"{debugger.url}/ui/app.js", timeout=5)
    assert module.headers["content-type"].startswith("text/javascript")
    assert module.headers["content-security-policy"] == policy
    for missing in ("nothing.js", "..%2Fpage.py", "%2E%2E"):
        answer = httpx.get(f"{debugger.url}/ui/{missing}", timeout=5)
        assert answer.status_code == 404 and "detail" in answer.json()


def test_the_pages_sources_hold_no_inline_script_no_html_sink_and_no_other_host():
    html = (STATIC / "index.html").read_text(encoding="utf-8")
    assert re.findall(r"<script[^>]*>", html) == ['<script type="module" src="app.js">']
    assert " style=" not in html and not re.search(r"\son[a-z]+=", html)  # no inline style, no handler attribute
    for path in STATIC.glob("*.js"):
        text = path.read_text(encoding="utf-8")
        sinks = re.findall(r"\.(?:inner|outer)HTML\b|insertAdjacentHTML|document\.write|\beval\(|new Function", text)
        assert sinks == [], f"{path.name} uses {sinks}"
        assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", text), f"{path.name} names a host"


# --- the commands ----------------------------------------------------------------------------------------------

@pytest.fixture
def never_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should `reactgraph ui` get as far as serving, the test fails at once instead of serving until its timeout."""
    import reactgraph.cli.ui

    def started(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("it started serving, where it should have refused to start")

    monkeypatch.setattr(reactgraph.cli.ui, "_serve", started)


def test_ui_help_says_what_it_shows_and_where_it_serves(cli):
    code, out, _err = cli("--help")
    assert code == 0 and re.search(r"\bui\s+Open the local debugger page in a browser\.", out)
    code, out, _err = cli("ui", "--help")
    assert code == 0
    for words in ("nothing it loads or sends leaves", "--open", "--store", "--port", "0: a free one", "loopback"):
        assert words in " ".join(out.split()), words


def test_ui_refuses_a_non_loopback_address_without_auth_in_one_line(cli, never_serves):
    code, out, err = cli("ui", "--host", "0.0.0.0")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--host 0.0.0.0 is not loopback" in err and "--no-auth" in err


def test_ui_on_a_taken_port_is_one_line_naming_it(cli, never_serves):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        code, _out, err = cli("ui", "--port", str(port))
    assert code == 2 and err.count("\n") == 1
    assert f"cannot serve on 127.0.0.1 port {port}" in err and "--port 0 picks a free one" in err


def test_serve_refuses_a_ui_setting_that_is_no_boolean_in_one_line(cli, refused_start, tmp_path):
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"graphs": {}, "reactgraph": {"ui": "yes"}}))
    code, _out, err = cli("serve", "--config", str(config))
    assert code == 2 and err.count("\n") == 1 and "reactgraph.ui must be true or false, not 'yes'" in err


def test_serve_ui_puts_the_page_behind_the_host_and_origin_checks_and_its_api_behind_auth():
    """The page's files are open (they hold no data; a browser adds no key to a navigation), its API is not."""
    from starlette.testclient import TestClient

    from reactgraph.service.app import build_app
    from reactgraph.service.auth import AuthSettings
    from reactgraph.service.server_config import ServerSettings

    settings = ServerSettings(auth=AuthSettings(api_keys={"me": "k" * 24}, source="test keys"), ui=True)
    client = TestClient(build_app("redis://127.0.0.1:1/0", None, workers=0, settings=settings),
                        base_url="http://127.0.0.1")  # no lifespan: nothing here reaches Redis
    assert client.get("/ui/").status_code == 200 and "content-security-policy" in client.get("/ui/").headers
    assert client.get("/threads/x").status_code == 401  # the API still needs the key
    assert client.get("/ui/", headers={"host": "evil.example"}).status_code == 421  # DNS rebinding
    assert client.get("/ui/", headers={"origin": "http://evil.example"}).status_code == 403
    plain = TestClient(build_app("redis://127.0.0.1:1/0", None, workers=0,
                                 settings=ServerSettings(auth=settings.auth)), base_url="http://127.0.0.1")
    assert plain.get("/ui/").status_code == 401  # not served without --ui: the path is no open one then


def test_a_comparison_file_that_links_out_of_the_results_folder_is_not_served(tmp_path):
    from reactgraph.ui.comparisons import Comparisons

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.png").write_bytes(b"not yours")
    (outside / "summary.json").write_text('{"graphs": {}}')
    results = tmp_path / "results"
    (results / "first").mkdir(parents=True)
    (results / "first" / "summary.json").write_text('{"graphs": {"react": {}}, "config": {}}')
    (results / "first" / "plot.png").write_bytes(b"png")
    (results / "first" / "leak.png").symlink_to(outside / "secret.png")
    (results / "linked").symlink_to(outside, target_is_directory=True)
    comparisons = Comparisons(results)
    assert comparisons.plot("first", "plot.png") == b"png"
    assert comparisons.plot("first", "leak.png") is None
    assert comparisons.summary("linked") is None and [c["name"] for c in comparisons.listed()] == ["first"]
