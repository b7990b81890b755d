"""LangGraph Studio: `langgraph dev` serves the graphs of langgraph.json, offline, and answers over its HTTP API."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, fields
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client

from reactgraph.graph import studio
from reactgraph.nodes.shared.context import Context

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
    process: subprocess.Popen  # run_studio's process; `langgraph dev` and its worker share its group

    def logs(self) -> str:
        return self.log_file.read_text(encoding="utf-8", errors="replace")

    @contextmanager
    def explained(self) -> Iterator[None]:
        """On failure, print the server's log (pytest shows a failing test's captured output)."""
        try:
            yield
        except BaseException:
            print(f"----- reactgraph studio log ({self.log_file}) -----\n{self.logs()}")
            raise

    def stop(self) -> int | None:
        """Ctrl+C to the whole group, as a terminal would send it; whatever is left after 15 s is killed."""
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
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(f"reactgraph studio exited with {server.process.returncode}:\n{server.logs()}", pytrace=False)
        if "Application startup failed" in server.logs():  # the reloader would wait for a code change
            pytest.fail(f"langgraph dev could not start:\n{server.logs()}", pytrace=False)
        try:
            if httpx.get(f"{server.url}/ok", timeout=2).status_code == 200:
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
    port = studio.free_port()
    launch = ("import sys; from pathlib import Path; from reactgraph.graph.studio import run_studio; "
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
        assert pause["value"]["type"] == "approval"
        assert [(c["name"], c["args"]) for c in pause["value"]["calls"]] == [
            ("http_get", {"url": "https://example.com/page"})]
        assert state["next"] == ["approve"]
        final = client.runs.wait(thread["thread_id"], "react",
                                 command={"resume": {"decision": "reject", "reason": "not from Studio"}})
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
    assert studio.react.checkpointer is None
    assert studio.react.context_schema is Context


def test_studio_also_exports_plan_solve_and_reflexion():
    config = json.loads(studio.CONFIG_FILE.read_text(encoding="utf-8"))
    assert config["graphs"]["plan_solve"] == "./graph/studio.py:plan_solve"
    assert config["graphs"]["reflexion"] == "./graph/studio.py:reflexion"
    assert {"plan", "execute_step", "act", "observe", "replan", "solve"} <= set(studio.plan_solve.get_graph().nodes)
    assert {"load_lessons", "trial", "evaluate", "self_reflect"} <= set(studio.reflexion.get_graph().nodes)
    for graph in (studio.plan_solve, studio.reflexion):
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

    command = studio.studio_command("127.0.0.1", studio.free_port())
    assert "--no-browser" in command and "--tunnel" not in command
    assert command[command.index("--host") + 1] == "127.0.0.1"
