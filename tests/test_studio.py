"""LangGraph Studio: `langgraph dev` serves the graphs of langgraph.json, offline, and answers over its HTTP API."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, fields
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client

from reactgraph.graph import studio as studio_graphs
from reactgraph.nodes.context import Context
from reactgraph.studio import launcher as studio
from reactgraph.studio import persistence as studio_persistence
from support.local_servers import free_port, http_client

STARTUP_TIMEOUT_S = 90  # a cold start on a busy 2-core machine; it takes a few seconds when idle
REACT_NODES = {"think", "act", "observe", "reflect", "finalize"}
OUTBOUND_MARK = "OUTBOUND-NETWORK"

# Loaded into the server through PYTHONPATH: reports, and refuses, any name lookup or connection that
# would leave the machine. Audit events cover the standard library's sockets (urllib, requests, httpx on
# threads); connections made inside uvloop are not seen, which is why the env vars matter on their own.
NETWORK_GUARD = textwrap.dedent(f"""
    import sys

    def _is_local(host):
        host = host.decode() if isinstance(host, bytes) else str(host)
        return host in ("", "localhost", "::1", "0.0.0.0") or host.startswith(("127.", "::ffff:127."))

    def _guard(event, args):
        if event == "socket.connect" and isinstance(args[1], tuple) and not _is_local(args[1][0]):
            sys.stderr.write(f"{OUTBOUND_MARK} connect {{args[1]!r}}\\n")
            raise OSError("outbound network refused by the Studio test")
        if event == "socket.getaddrinfo" and args[0] is not None and not _is_local(args[0]):
            sys.stderr.write(f"{OUTBOUND_MARK} getaddrinfo {{args[0]!r}}\\n")
            raise OSError("outbound name lookup refused by the Studio test")

    sys.addaudithook(_guard)
""")


@dataclass
class StudioServer:
    url: str
    log_file: Path
    process: subprocess.Popen  # run_studio's process; it stops `langgraph dev`'s own group when told to stop

    def logs(self) -> str:
        """What `reactgraph studio` printed, then the dev server's own log (which it keeps in a file)."""
        server_log = self.log_file.parent / ".langgraph_api" / "studio-server.log"
        server = server_log.read_text(encoding="utf-8", errors="replace") if server_log.exists() else ""
        return self.log_file.read_text(encoding="utf-8", errors="replace") + server

    @contextmanager
    def explained(self) -> Iterator[None]:
        """On failure, print the server's log (pytest shows a failing test's captured output)."""
        try:
            yield
        except BaseException:
            print(f"----- reactgraph studio log ({self.log_file}) -----\n{self.logs()}")
            raise

    def stop(self) -> int | None:
        """Ctrl+C, as a terminal sends it (run_studio stops the server's group); the rest is killed after 15 s."""
        code = None
        try:
            os.killpg(self.process.pid, signal.SIGINT)
            code = self.process.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        with suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # stragglers, if any, never outlive the test
        self.process.wait()
        return code


def wait_until_ready(server: StudioServer) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    with http_client(timeout=2) as client:  # one client for the polls
        _poll_until_ready(server, client, deadline)


def _poll_until_ready(server: StudioServer, client: httpx.Client, deadline: float) -> None:
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(f"reactgraph studio exited with {server.process.returncode}:\n{server.logs()}", pytrace=False)
        if "Application startup failed" in server.logs():  # the reloader would wait for a code change
            pytest.fail(f"langgraph dev could not start:\n{server.logs()}", pytrace=False)
        try:
            if client.get(f"{server.url}/ok").status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    pytest.fail(f"langgraph dev did not answer /ok within {STARTUP_TIMEOUT_S} s:\n{server.logs()}", pytrace=False)


def launch_studio(work: Path, redis_url: str, config: Path | None) -> StudioServer:
    """`run_studio` in `work` on the test Redis, behind the network guard; `config` None: as `reactgraph studio`
    picks it. Ready when it answers /ok; stop it with `stop()`."""
    (work / "guard").mkdir()
    (work / "guard" / "sitecustomize.py").write_text(NETWORK_GUARD, encoding="utf-8")
    # A LangSmith key and tracing switched on in the caller's environment must not reach the server.
    python_path = os.pathsep.join(filter(None, [str(work / "guard"), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, REACTGRAPH_MODEL="offline", LANGSMITH_API_KEY="lsv2_test_dummy",
               LANGSMITH_TRACING="true", PYTHONPATH=python_path, PYTHONUNBUFFERED="1", REDIS_URL=redis_url)
    port = free_port()
    launch = ("import sys; from pathlib import Path; from reactgraph.studio.launcher import run_studio; "
              "sys.exit(run_studio(port=int(sys.argv[1]), config=Path(sys.argv[2]) if sys.argv[2] else None))")
    log_file = work / "studio.log"
    with log_file.open("w", encoding="utf-8") as log:
        process = subprocess.Popen([sys.executable, "-c", launch, str(port), str(config or "")],
                                   cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    server = StudioServer(f"http://127.0.0.1:{port}", log_file, process)
    try:
        wait_until_ready(server)
    except BaseException:
        server.stop()
        raise
    return server


@pytest.fixture(scope="module")
def studio_server(tmp_path_factory, redis_url) -> Iterator[StudioServer]:
    """`run_studio` serving the project's graphs, from a scratch directory so that its files stay there."""
    try:
        import langgraph_api  # noqa: F401
    except ImportError:
        pytest.fail("the Studio tests need the dev server: pip install -e '.[dev]' (langgraph-cli[inmem])",
                    pytrace=False)
    work = tmp_path_factory.mktemp("studio")
    # The project's langgraph.json with absolute paths: `langgraph dev` resolves them against its working
    # directory, and it keeps its dev database (.langgraph_api/) there.
    config = json.loads(studio.CONFIG_FILE.read_text(encoding="utf-8"))
    config["dependencies"] = [str(studio.PROJECT_DIR)]
    config["graphs"] = {name: str(studio.PROJECT_DIR / target.removeprefix("./"))
                        for name, target in config["graphs"].items()}
    (work / "langgraph.json").write_text(json.dumps(config), encoding="utf-8")
    server = launch_studio(work, redis_url, work / "langgraph.json")
    yield server
    # Ctrl+C ends `reactgraph studio` cleanly: exit code 0, within the stop() grace period.
    if (code := server.stop()) != 0:
        pytest.fail(f"after Ctrl+C, run_studio exited with {code}:\n{server.logs()}", pytrace=False)


def test_studio_serves_the_react_graph_and_answers_offline(studio_server):
    client = get_sync_client(url=studio_server.url, api_key=None)  # no key: nothing to send to a local server
    with studio_server.explained():
        assistants = client.assistants.search(graph_id="react")
        assert [a["graph_id"] for a in assistants] == ["react"]
        assistant_id = assistants[0]["assistant_id"]

        nodes = {node["id"] for node in client.assistants.get_graph(assistant_id)["nodes"]}
        assert nodes >= REACT_NODES

        # Studio renders the context schema as the run's configuration form: every field is documented.
        context_schema = client.assistants.get_schemas(assistant_id)["context_schema"]
        described = {name: prop.get("description") for name, prop in context_schema["properties"].items()}
        assert set(described) == {f.name for f in fields(Context)}
        assert all(described.values()), f"Context fields without a description: {described}"

        thread = client.threads.create()
        state = client.runs.wait(
            thread["thread_id"], "react",
            input={"messages": [{"role": "human", "content": "计算 (15 + 27) * 3 等于多少"}]},
            context={"model": "offline", "reflection": "llm"})
        assert "126" in state["final_answer"]
        assert state["status"] == "answered"
        assert any(step["action"] == "calculator" for step in state["steps"])

        # A run from Studio with an untouched form sends no context: Context's defaults apply.
        state = client.runs.wait(
            thread["thread_id"], "react",
            input={"messages": [{"role": "human", "content": "北京和上海的天气分别怎么样？哪个城市更热？"}]})
        assert state["status"] == "answered"
        assert "上海" in state["final_answer"] and "126" not in state["final_answer"]

        logs = studio_server.logs()
        assert f"LangGraph Studio: https://smith.langchain.com/studio/?baseUrl={studio_server.url}" in logs
        assert OUTBOUND_MARK not in logs
        # react-graph's saver, with every method the server asks for (it warns about each one missing)
        assert "Using custom checkpointer: RedisSaver" in logs and "Custom checkpointer missing" not in logs
        assert "Using custom store: RedisStore" in logs
        assert "skipping metadata loop" in logs  # no license/LangSmith key reached the server
        for sign in ("Starting metadata loop", "Cloudflare", "newer version", "Failed to retrieve latest"):
            assert sign not in logs


def test_studio_shows_an_approval_interrupt_and_resumes_with_the_decision(studio_server):
    client = get_sync_client(url=studio_server.url, api_key=None)
    with studio_server.explained():
        thread = client.threads.create()
        client.runs.wait(thread["thread_id"], "react",
                         input={"messages": [{"role": "human", "content": "Fetch https://example.com/page"}]})
        state = client.threads.get_state(thread["thread_id"])
        (pause,) = state["interrupts"]  # what Studio shows: the request, with every call and why it asks
        assert [(c["name"], c["args"]) for c in pause["value"]["action_requests"]] == [
            ("http_get", {"url": "https://example.com/page"})]
        assert state["next"] == ["approve"]
        final = client.runs.wait(thread["thread_id"], "react",
                                 command={"resume": {"decisions": [{"type": "reject",
                                                                     "message": "not from Studio"}]}})
        assert final["status"] in ("no_answer", "partial", "answered") and final["final_answer"]
        decided = [s for s in final["steps"] if s["node"] == "approve"]
        assert [(s["action"], s["status"]) for s in decided] == [("http_get", "rejected")]
        assert "not from Studio" in decided[0]["observation"]
        assert OUTBOUND_MARK not in studio_server.logs()


def test_studio_gets_the_input_output_and_state_schemas(studio_server):
    # pydantic builds these from the state TypedDicts; on Python < 3.12 only typing_extensions' kind works.
    client = get_sync_client(url=studio_server.url, api_key=None)
    with studio_server.explained():
        assistant_id = client.assistants.search(graph_id="react")[0]["assistant_id"]
        schemas = client.assistants.get_schemas(assistant_id)
        assert schemas["input_schema"] and "messages" in schemas["input_schema"]["properties"]
        assert schemas["output_schema"] and "final_answer" in schemas["output_schema"]["properties"]
        assert schemas["state_schema"] and {"steps", "status"} <= schemas["state_schema"]["properties"].keys()


def test_studio_module_exports_a_graph_the_dev_server_can_persist():
    config = json.loads(studio.CONFIG_FILE.read_text(encoding="utf-8"))
    assert config["graphs"]["react"] == "./graph/studio.py:react"
    # `langgraph dev` refuses a graph compiled with its own checkpointer.
    assert studio_graphs.react.checkpointer is None
    assert studio_graphs.react.context_schema is Context


def test_studio_also_exports_plan_solve_and_reflexion():
    config = json.loads(studio.CONFIG_FILE.read_text(encoding="utf-8"))
    assert config["graphs"]["plan_solve"] == "./graph/studio.py:plan_solve"
    assert config["graphs"]["reflexion"] == "./graph/studio.py:reflexion"
    plan_solve_nodes = set(studio_graphs.plan_solve.get_graph().nodes)
    assert {"plan", "execute_step", "act", "observe", "replan", "solve"} <= plan_solve_nodes
    assert {"load_lessons", "trial", "evaluate", "self_reflect"} <= set(studio_graphs.reflexion.get_graph().nodes)
    for graph in (studio_graphs.plan_solve, studio_graphs.reflexion):
        assert graph.checkpointer is None and graph.context_schema is Context


def test_studio_server_environment_makes_no_outside_calls():
    env = studio.studio_env({"PATH": "/bin", "LANGSMITH_API_KEY": "k", "LANGCHAIN_API_KEY": "k",
                             "LANGGRAPH_CLOUD_LICENSE_KEY": "lcl_k", "LANGSMITH_TRACING": "true",
                             "OPENAI_API_KEY": "kept"})
    assert env["LANGGRAPH_CLI_NO_ANALYTICS"] == "1"
    assert env["LANGGRAPH_NO_VERSION_CHECK"] == "true"
    assert env["LANGSMITH_TRACING"] == "false"
    assert not {"LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGGRAPH_CLOUD_LICENSE_KEY"} & env.keys()
    assert env["OPENAI_API_KEY"] == "kept"  # a model the user chose still works

    command = studio.studio_command("127.0.0.1", free_port())
    assert "--no-browser" in command and "--tunnel" not in command
    assert command[command.index("--host") + 1] == "127.0.0.1"


# --- Studio and the CLI share their sessions (one Redis) ---------------------------------------------------

REGISTER_WAIT_S = 30  # the server registers new CLI sessions every few seconds; a busy machine may lag


@pytest.fixture
def uuid_session(redis_url):
    """A session id the server accepts (a UUID), removed from Redis afterwards, Q&A log included."""
    from reactgraph.memory import RedisStore
    from reactgraph.memory.redis_checkpoint import RedisSaver

    names: list[str] = [str(uuid.uuid4())]
    yield names  # a test may add the threads it makes in Studio, to be removed too
    with RedisSaver.from_url(redis_url) as saver, RedisStore.from_url(redis_url) as store:
        for name in names:
            saver.delete_thread(name)
            for item in store.search(("sessions", name), limit=1000):
                store.delete(item.namespace, item.key)


def listed_thread(client, thread_id: str) -> dict:
    """The thread as `threads.search` lists it, once the server has registered it (bounded wait)."""
    deadline = time.monotonic() + REGISTER_WAIT_S
    while time.monotonic() < deadline:
        if found := client.threads.search(ids=[thread_id], limit=1):
            return found[0]
        time.sleep(0.25)
    pytest.fail(f"thread {thread_id} was not listed within {REGISTER_WAIT_S} s", pytrace=False)


def cli_history(cli, session: str) -> list[dict]:
    code, out, err = cli("history", "--session", session, "--json", "--limit", "200")
    assert code == 0, err
    return json.loads(out)


def test_a_cli_session_appears_in_studio_with_its_history_and_can_be_forked_there(studio_server, cli,
                                                                                 uuid_session):
    session = uuid_session[0]
    client = get_sync_client(url=studio_server.url, api_key=None)
    with studio_server.explained():
        code, out, err = cli("ask", "计算 2+3", "--session", session, "--json")
        assert code == 0, err
        assert json.loads(out)["status"] == "answered"

        listed = listed_thread(client, session)  # in Studio's thread list, under the CLI's graph
        assert listed["metadata"]["graph_id"] == "react"
        assert client.threads.get(session)["metadata"]["assistant_id"] == (
            client.assistants.search(graph_id="react")[0]["assistant_id"])
        state = client.threads.get_state(session)
        assert "5" in state["values"]["final_answer"] and state["values"]["status"] == "answered"
        assert state["next"] == []
        history = client.threads.get_history(session, limit=200)
        ids = [snapshot["checkpoint"]["checkpoint_id"] for snapshot in history]
        assert ids == [row["checkpoint"] for row in cli_history(cli, session)]  # the same checkpoints

        # Fork in Studio from the checkpoint the turn started at: a new branch, the CLI's turn kept.
        (start,) = [s for s in history if s["metadata"]["source"] == "input"]
        forked = client.runs.wait(session, "react", checkpoint_id=start["checkpoint"]["checkpoint_id"],
                                  input={"messages": [{"role": "human", "content": "计算 3+4"}]})
        assert "7" in forked["final_answer"] and "5" not in forked["final_answer"]
        branch = client.threads.get_history(session, limit=200)
        assert ids[0] in {s["checkpoint"]["checkpoint_id"] for s in branch}  # the CLI's turn is still there
        assert len(branch) > len(history)

        # An edit in Studio is a new checkpoint on the CLI's latest one; the CLI reads it and goes on from it.
        edited = client.threads.update_state(session, {"final_answer": "edited in Studio"}, as_node="finalize",
                                             checkpoint_id=ids[0])
        assert client.threads.get_state(session)["parent_checkpoint"]["checkpoint_id"] == ids[0]
        newest = cli_history(cli, session)[0]
        assert newest["checkpoint"] == edited["checkpoint"]["checkpoint_id"]
        code, out, err = cli("ask", "计算 6*7", "--session", session, "--json")
        assert code == 0, err
        assert "42" in json.loads(out)["answer"]
        assert "42" in client.threads.get_state(session)["values"]["final_answer"]
        assert OUTBOUND_MARK not in studio_server.logs()


def test_a_thread_started_in_studio_is_listed_by_reactgraph_history(studio_server, cli, uuid_session):
    client = get_sync_client(url=studio_server.url, api_key=None)
    with studio_server.explained():
        thread_id = client.threads.create()["thread_id"]
        uuid_session.append(thread_id)
        state = client.runs.wait(thread_id, "react",
                                 input={"messages": [{"role": "human", "content": "计算 6*7"}]})
        assert "42" in state["final_answer"]
        rows = cli_history(cli, thread_id)
        assert [row["checkpoint"] for row in rows] == [
            s["checkpoint"]["checkpoint_id"] for s in client.threads.get_history(thread_id, limit=200)]
        # the CLI continues the thread where Studio left it: one conversation, two turns
        code, _, err = cli("ask", "计算 2+3", "--session", thread_id, "--json")
        assert code == 0, err
        humans = [m for m in client.threads.get_state(thread_id)["values"]["messages"] if m["type"] == "human"]
        assert [m["content"] for m in humans] == ["计算 6*7", "计算 2+3"]


def test_studio_copies_and_deletes_threads_in_redis(studio_server, redis_url, uuid_session):
    from reactgraph.memory.redis_checkpoint import RedisSaver

    client = get_sync_client(url=studio_server.url, api_key=None)
    with studio_server.explained(), RedisSaver.from_url(redis_url) as saver:
        thread_id = client.threads.create()["thread_id"]
        uuid_session.append(thread_id)
        client.runs.wait(thread_id, "react", input={"messages": [{"role": "human", "content": "计算 2+3"}]})
        copy_id = client.threads.copy(thread_id)["thread_id"]
        uuid_session.append(copy_id)
        assert {thread_id, copy_id} <= set(saver.thread_ids())
        assert "5" in client.threads.get_state(copy_id)["values"]["final_answer"]
        client.threads.delete(copy_id)
        assert copy_id not in saver.thread_ids() and thread_id in saver.thread_ids()


def _preflight(url: str, origin: str) -> httpx.Response:
    return httpx.options(f"{url}/threads/search", timeout=10, headers={
        "Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})


def _listening(url: str) -> bool:
    try:
        httpx.get(f"{url}/ok", timeout=1)
    except httpx.HTTPError:
        return False
    return True


def test_reactgraph_studio_serves_the_packaged_config_only_to_studios_origin_and_sigterm_stops_it(tmp_path,
                                                                                                redis_url):
    """One `reactgraph studio` started as a user would, in a directory without a langgraph.json: it serves the
    packaged config's graphs and answers offline, answers only Studio's origin, and SIGTERM stops all of it."""
    assert not (tmp_path / "langgraph.json").exists()
    server = launch_studio(tmp_path, redis_url, config=None)
    try:
        with server.explained():
            client = get_sync_client(url=server.url, api_key=None)
            assert {a["graph_id"] for a in client.assistants.search()} == {"react", "plan_solve", "reflexion"}
            thread_id = client.threads.create()["thread_id"]
            state = client.runs.wait(thread_id, "react",
                                     input={"messages": [{"role": "human", "content": "计算 2+3"}]})
            assert "5" in state["final_answer"]
            client.threads.delete(thread_id)
            logs = server.logs()
            assert f"config: the packaged {studio.PACKAGED_CONFIG} (no langgraph.json in {tmp_path.resolve()})" in logs
            assert "threads: Redis redis://" in logs
            assert (tmp_path / ".langgraph_api").is_dir()  # its files in the working directory, not site-packages
            # Our lines and "ready", not the dev server's dozens: those are in its log file (--verbose: here).
            server_log = tmp_path / ".langgraph_api" / "studio-server.log"
            printed = server.log_file.read_text(encoding="utf-8").splitlines()
            assert printed[-1] == "ready" and len(printed) == 6, printed
            assert f"server log: {server_log} (--verbose shows it here)" in logs
            assert server_log.stat().st_size > 0

            studio_page = _preflight(server.url, studio.STUDIO_ORIGIN)
            assert studio_page.headers.get("access-control-allow-origin") == studio.STUDIO_ORIGIN
            other = _preflight(server.url, "https://evil.example")
            assert "access-control-allow-origin" not in other.headers  # the browser refuses the page's request
            simple = httpx.get(f"{server.url}/ok", headers={"Origin": "https://evil.example"}, timeout=10)
            assert "access-control-allow-origin" not in simple.headers
            server.process.send_signal(signal.SIGTERM)  # to reactgraph studio alone, as systemd or kill would
            assert server.process.wait(timeout=studio.STOP_GRACE_S + 5) == 0
            deadline = time.monotonic() + 10
            while _listening(server.url) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not _listening(server.url), "langgraph dev still serves the port after SIGTERM"
    finally:
        server.stop()


def test_a_server_that_cannot_start_says_why_with_the_end_of_its_log(tmp_path, redis_url):
    """A graph that fails to import: `reactgraph studio` stops waiting, prints the log's last lines (the cause
    among them) on stderr and exits non-zero, where the dev server's reloader would wait for a code change."""
    (tmp_path / "broken.py").write_text("raise RuntimeError('the broken graph module')\n", encoding="utf-8")
    config = {"dependencies": ["."], "graphs": {"broken": "./broken.py:graph"}}
    (tmp_path / "langgraph.json").write_text(json.dumps(config), encoding="utf-8")
    launch = ("import sys; from pathlib import Path; from reactgraph.studio.launcher import run_studio; "
              "sys.exit(run_studio(config=Path(sys.argv[1])))")
    done = subprocess.run([sys.executable, "-c", launch, str(tmp_path / "langgraph.json")], cwd=tmp_path,
                          env=dict(os.environ, REDIS_URL=redis_url), capture_output=True, text=True,
                          timeout=studio.STARTUP_TIMEOUT_S + 30, start_new_session=True)
    assert done.returncode != 0
    assert "error: the Studio server did not start; the end of " in done.stderr
    assert "the broken graph module" in done.stderr
    assert "ready" not in done.stdout


def test_a_configs_own_http_cors_is_left_to_it(tmp_path):
    own = tmp_path / "langgraph.json"
    own.write_text(json.dumps({"graphs": {}, "http": {"cors": {"allow_origins": ["https://mine.example"]}}}))
    assert "CORS_CONFIG" not in studio.studio_env({"CORS_CONFIG": "{}"}, config=own)
    assert json.loads(studio.studio_env({}, config=studio.PACKAGED_CONFIG)["CORS_CONFIG"])["allow_origins"] == [
        studio.STUDIO_ORIGIN]


# --- which config, which store -------------------------------------------------------------------------


def test_the_config_is_the_working_directorys_else_the_packaged_one(tmp_path):
    assert studio.choose_config(cwd=tmp_path) == (
        studio.PACKAGED_CONFIG, tmp_path.resolve(), f"the packaged {studio.PACKAGED_CONFIG} (no langgraph.json in "
                                                    f"{tmp_path.resolve()})")
    (tmp_path / "langgraph.json").write_text("{}", encoding="utf-8")
    assert studio.choose_config(cwd=tmp_path)[:2] == (tmp_path.resolve() / "langgraph.json", tmp_path.resolve())
    elsewhere = tmp_path / "sub" / "langgraph.json"
    assert studio.choose_config(elsewhere, cwd=tmp_path)[:2] == (elsewhere.resolve(), elsewhere.parent.resolve())
    assert not studio.uses_our_persistence(tmp_path / "langgraph.json")  # a user's own config: not ours
    assert studio.uses_our_persistence(studio.CONFIG_FILE) and studio.uses_our_persistence(studio.PACKAGED_CONFIG)


def test_the_packaged_config_names_the_checkouts_graphs_by_module_path():
    checkout = json.loads(studio.CONFIG_FILE.read_text(encoding="utf-8"))
    packaged = json.loads(studio.PACKAGED_CONFIG.read_text(encoding="utf-8"))
    assert packaged["graphs"] == {name: "reactgraph.graph.studio:" + target.rsplit(":", 1)[1]
                                  for name, target in checkout["graphs"].items()}
    assert packaged["checkpointer"] == checkout["checkpointer"] == {
        "path": "reactgraph.studio.persistence.checkpointer"}
    assert packaged["store"] == checkout["store"] == {"path": "reactgraph.studio.persistence.store"}
    assert set(packaged["graphs"]) == set(studio_persistence.STUDIO_GRAPHS)


@pytest.mark.parametrize("store", ["memory", "sqlite:///sessions.db"])
def test_studio_on_a_store_that_is_not_redis_is_one_line_before_any_server_starts(store, tmp_path, monkeypatch,
                                                                                 capsys):
    monkeypatch.chdir(tmp_path)
    assert studio.run_studio(port=free_port(), store=store) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "a server can share only Redis" in err and store in err
    assert not (tmp_path / "sessions.db").exists() and not (tmp_path / ".langgraph_api").exists()


def test_an_unreachable_redis_is_one_line_before_any_server_starts(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    url = f"redis://127.0.0.1:{free_port()}/0"
    assert studio.run_studio(port=free_port(), store=url) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and url in err


async def test_the_store_s_uuid_sessions_are_registered_under_the_graph_they_ran(redis_url, redis_prefix):
    from reactgraph.graph.react import build_react_graph
    from reactgraph.memory.redis_checkpoint import RedisSaver

    cli_turn, studio_turn, named = str(uuid.uuid4()), str(uuid.uuid4()), "alice"
    with RedisSaver.from_url(redis_url, prefix=redis_prefix) as saver:
        graph = build_react_graph(checkpointer=saver)
        question = {"messages": [{"role": "human", "content": "计算 2+3"}]}
        for thread_id in (cli_turn, named, cli_turn.upper()):
            await graph.ainvoke(question, {"configurable": {"thread_id": thread_id}})
        # the server tags a run's checkpoints with its graph
        await graph.ainvoke(question, {"configurable": {"thread_id": studio_turn},
                                       "metadata": {"graph_id": "reflexion"}})
        registered: list[tuple[str, str]] = []

        async def register(thread_id: str, graph_id: str) -> None:
            registered.append((thread_id, graph_id))

        known: set[str] = set()
        assert await studio_persistence.register_sessions(saver, register, known) == 2
        # only the spelling the server passes on (str(UUID)); other ids stay out of its reach
        assert sorted(registered) == sorted([(cli_turn, "react"), (studio_turn, "reflexion")])
        assert await studio_persistence.register_sessions(saver, register, known) == 0  # once each


async def test_a_session_new_since_the_last_pass_is_registered_before_the_backlog(redis_url, redis_prefix,
                                                                                  monkeypatch):
    from reactgraph.graph.react import build_react_graph
    from reactgraph.memory.redis_checkpoint import RedisSaver

    monkeypatch.setattr(studio_persistence, "MAX_REGISTERED_PER_PASS", 2)
    question = {"messages": [{"role": "human", "content": "计算 2+3"}]}
    with RedisSaver.from_url(redis_url, prefix=redis_prefix) as saver:
        graph = build_react_graph(checkpointer=saver)
        for _ in range(5):  # a backlog larger than a pass
            await graph.ainvoke(question, {"configurable": {"thread_id": str(uuid.uuid4())}})
        registered: list[str] = []

        async def register(thread_id: str, graph_id: str) -> None:
            registered.append(thread_id)

        known: set[str] = set()
        listed: set[str] = set()
        assert await studio_persistence.register_sessions(saver, register, known, listed) == 2
        fresh = str(uuid.uuid4())  # just asked from the CLI
        await graph.ainvoke(question, {"configurable": {"thread_id": fresh}})
        assert await studio_persistence.register_sessions(saver, register, known, listed) == 2
        assert fresh in registered[2:]  # in the very next pass, ahead of the three still waiting


def test_only_the_canonical_uuid_spelling_is_a_server_thread_id():
    tid = uuid.uuid4()
    assert studio_persistence.is_server_thread_id(str(tid))
    for other in (tid.hex, str(tid).upper(), f"{{{tid}}}", "alice", ""):
        assert not studio_persistence.is_server_thread_id(other)
    assert studio_persistence.graph_of({"graph_id": "plan_solve"}) == "plan_solve"
    for metadata in ({"graph_id": "someone-elses"}, {"graph_id": ["react"]}, {}, None):
        assert studio_persistence.graph_of(metadata) == "react"


# -- the same answers from `reactgraph serve` ------------------------------------------------------------------

def shape(value):
    """A JSON value's shape: objects by their keys, lists by their first item, scalars by type (null is any). A
    node's `Overwrite` is the value it sets: langgraph dev sends the object (`{"value", "type": "__overwrite__"}`),
    reactgraph serve the value (docs/serving.md, Streams), which is what a client's state then holds."""
    if isinstance(value, dict) and value.get("type") == "__overwrite__" and set(value) == {"value", "type"}:
        return shape(value["value"])
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return None if value is None else type(value).__name__


def shape_gaps(ours, theirs, where: str = "") -> list[str]:
    """What `langgraph dev` answers that `reactgraph serve` does not, as paths (`$.values.messages[0].id`)."""
    if theirs is None or ours is None:
        return []
    if isinstance(theirs, dict):
        if not isinstance(ours, dict):
            return [f"{where or '$'}: object expected"]
        if where.endswith((".metadata", ".configurable")):  # free-form maps: what is in them is the server's own
            return []
        return [gap for key in theirs for gap in ([f"{where or '$'}.{key}: missing"] if key not in ours
                                                  else shape_gaps(ours[key], theirs[key], f"{where}.{key}"))]
    if isinstance(theirs, list):
        if not isinstance(ours, list):
            return [f"{where or '$'}: list expected"]
        return shape_gaps(ours[0], theirs[0], f"{where}[0]") if ours and theirs else []
    return [] if ours == theirs or {ours, theirs} <= {"int", "float"} else [f"{where or '$'}: {ours} vs {theirs}"]

def assert_same_shapes(ours: dict, theirs: dict, skip: tuple[str, ...] = ()) -> None:
    """Every answer of ours has the shape of `langgraph dev`'s (the names in `skip` are compared otherwise)."""
    gaps = {name: shape_gaps(shape(ours[name]), shape(answer)) for name, answer in theirs.items() if name not in skip}
    missing = {name: found for name, found in gaps.items() if found}
    assert not missing, json.dumps(missing, indent=1, ensure_ascii=False)



def studio_opening_a_graph_and_a_thread(url: str) -> dict[str, object]:
    """The requests Studio sends when it opens the react graph, starts a thread and shows it; their answers."""
    client = get_sync_client(url=url, api_key=None)
    answers: dict[str, object] = {"info": httpx.get(f"{url}/info", timeout=30).json()}
    (assistant,) = client.assistants.search(graph_id="react", limit=10)
    answers["assistants.search"] = assistant
    answers["assistants.get"] = client.assistants.get(assistant["assistant_id"])
    answers["assistants.graph"] = client.assistants.get_graph(assistant["assistant_id"], xray=True)
    answers["assistants.schemas"] = client.assistants.get_schemas(assistant["assistant_id"])
    answers["threads.create"] = thread = client.threads.create()
    events = list(client.runs.stream(thread["thread_id"], assistant["assistant_id"],
                                     input={"messages": [{"role": "human", "content": "计算 2 + 3 等于多少"}]},
                                     stream_mode=["values", "updates", "messages-tuple"]))
    answers["stream events"] = sorted({e.event for e in events})
    answers["stream values"] = next(e.data for e in reversed(events) if e.event == "values")
    answers["threads.get"] = client.threads.get(thread["thread_id"])
    answers["threads.get_state"] = client.threads.get_state(thread["thread_id"])
    answers["threads.get_history"] = client.threads.get_history(thread["thread_id"], limit=100)
    answers["runs.list"] = client.runs.list(thread["thread_id"])
    answers["threads.search"] = client.threads.search(ids=[thread["thread_id"]], limit=1) or \
        client.threads.search(limit=1)
    return answers


@pytest.fixture(scope="module")
def reactgraph_serve(redis_url: str, tmp_path_factory) -> Iterator[object]:
    """One `reactgraph serve` (one worker) for the tests that compare its answers with `langgraph dev`'s: they
    only ask it, so one start serves them all."""
    from test_serve import start_service, stop

    service = start_service(redis_url, tmp_path_factory.mktemp("reactgraph-serve"), workers=1)
    yield service
    stop(service)


def test_reactgraph_serve_answers_what_studio_asks_in_the_shapes_langgraph_dev_does(studio_server,
                                                                                   reactgraph_serve):
    theirs = studio_opening_a_graph_and_a_thread(studio_server.url)
    ours = studio_opening_a_graph_and_a_thread(reactgraph_serve.url)
    assert ours["stream events"] == theirs["stream events"]
    assert_same_shapes(ours, theirs, skip=("stream events", "info"))


def changing_assistants_and_the_store(url: str) -> dict[str, object]:
    """What a program for `langgraph dev` does with assistants and the store; the answers (what it made is removed)."""
    client = get_sync_client(url=url, api_key=None)
    answers: dict[str, object] = {}
    answers["assistants.create"] = made = client.assistants.create(
        "react", context={"max_iterations": 3}, metadata={"shape": "test"}, name="shape", description="compared")
    answers["assistants.update"] = client.assistants.update(made["assistant_id"], context={"max_iterations": 4},
                                                            metadata={"round": 2})
    answers["assistants.get_versions"] = client.assistants.get_versions(made["assistant_id"])
    answers["assistants.set_latest"] = client.assistants.set_latest(made["assistant_id"], 1)
    answers["assistants.search created"] = client.assistants.search(metadata={"shape": "test"})
    answers["assistants.count created"] = client.assistants.count(metadata={"shape": "test"})
    answers["assistants.schemas created"] = client.assistants.get_schemas(made["assistant_id"])
    client.assistants.delete(made["assistant_id"])
    namespace = ["shape-test", uuid.uuid4().hex]
    client.store.put_item(namespace, "k", {"kind": "note", "n": 1})
    answers["store.get_item"] = client.store.get_item(namespace, "k")
    answers["store.search_items"] = client.store.search_items(namespace, filter={"kind": "note"})
    answers["store.list_namespaces"] = client.store.list_namespaces(prefix=namespace)
    client.store.delete_item(namespace, "k")
    answers["store.get_item missing"] = client.store.get_item(namespace, "k")
    return answers


def test_reactgraph_serve_changes_assistants_and_the_store_in_the_shapes_langgraph_dev_does(studio_server,
                                                                                          reactgraph_serve):
    theirs = changing_assistants_and_the_store(studio_server.url)
    ours = changing_assistants_and_the_store(reactgraph_serve.url)
    assert ours["assistants.count created"] == theirs["assistants.count created"] == 1
    assert ours["store.get_item missing"] is theirs["store.get_item missing"] is None
    assert_same_shapes(ours, theirs)


def sdk_runs_beyond_studio(url: str) -> dict[str, object]:
    """What a program for `langgraph dev` also calls: stateless runs, the `messages` and `events` stream modes, and
    an interrupt (the approval's) read back from the state, its task and the thread; their answers."""
    client = get_sync_client(url=url, api_key=None)
    ask = {"messages": [{"role": "human", "content": "计算 2 + 3 等于多少"}]}
    answers: dict[str, object] = {"runs.wait stateless": client.runs.wait(None, "react", input=ask)}
    answers["runs.create stateless"] = client.runs.create(None, "react", input=ask)
    messages = list(client.runs.stream(None, "react", input=ask, stream_mode="messages"))
    answers["messages events"] = sorted({e.event for e in messages})
    for name in ("messages/metadata", "messages/complete"):
        found = next(e.data for e in messages if e.event == name)
        answers[f"{name} data"] = list(found.values()) if name == "messages/metadata" else found
    events = list(client.runs.stream(None, "react", input=ask, stream_mode="events"))
    answers["events events"] = sorted({e.event for e in events})
    answers["events data"] = next(e.data for e in events if e.event == "events" and e.data["event"] == "on_chain_end")
    thread = client.threads.create()
    answers["wait paused"] = client.runs.wait(thread["thread_id"], "react", input={
        "messages": [{"role": "human", "content": "Fetch https://example.com/page"}]})
    answers["paused state"] = client.threads.get_state(thread["thread_id"])
    # the thread's interrupts by task id: the id is each server's own
    answers["paused thread interrupts"] = list(client.threads.get(thread["thread_id"])["interrupts"].values())
    return answers


def test_reactgraph_serve_answers_stateless_runs_stream_modes_and_interrupts_as_langgraph_dev_does(
        studio_server, reactgraph_serve):
    theirs = sdk_runs_beyond_studio(studio_server.url)
    ours = sdk_runs_beyond_studio(reactgraph_serve.url)
    for names in ("messages events", "events events"):
        assert ours[names] == theirs[names], names
    assert len(ours["paused thread interrupts"]) == len(theirs["paused thread interrupts"]) == 1  # type: ignore[arg-type]
    assert_same_shapes(ours, theirs, skip=("messages events", "events events"))
