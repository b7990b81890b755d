"""`reactgraph server status|stop`: a user sees whether the embedded Redis runs, what it holds, and stops it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from reactgraph.cli.server import server_app
from reactgraph.memory.embedded_redis import ensure_running, stop
from support.cli_env import clean_env

# Runs the real `reactgraph` entry point with the `server` group registered as reactgraph/cli/app.py registers it
# (added here only if app.py does not yet), so the subprocess sees what a user's shell would.
CLI = """\
import sys
from reactgraph.cli.app import app, main
from reactgraph.cli.server import server_app
if not any(group.name == "server" for group in app.registered_groups):
    app.add_typer(server_app, name="server")
code = main(sys.argv[1:])
heavy = sorted(name for name in ("langgraph", "langchain_core", "numpy", "faiss") if name in sys.modules)
print("heavy modules:", heavy, file=sys.stderr)
sys.exit(code)
"""


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A $REACTGRAPH_HOME of this test's own, and no REDIS_URL: the embedded Redis is the store."""
    monkeypatch.setenv("REACTGRAPH_HOME", str(tmp_path))
    monkeypatch.delenv("REDIS_URL", raising=False)
    yield tmp_path
    stop(tmp_path / "redis")


def run_server(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True, timeout=60,
                          env=clean_env())


def test_status_and_stop_before_anything_ran_say_not_running_and_start_nothing(home):
    runner = CliRunner()
    shown = runner.invoke(server_app, ["status"])
    assert shown.exit_code == 0 and "not running" in shown.output and str(home / "redis") in shown.output
    report = json.loads(runner.invoke(server_app, ["status", "--json"]).output)
    assert report["running"] is False and report["data_dir"] == str((home / "redis").resolve())
    assert "not running" in runner.invoke(server_app, ["stop"]).output
    assert not (home / "redis" / "redis.sock").exists()


def test_status_shows_the_running_server_and_stop_stops_it_keeping_the_data(home):
    ensure_running(home / "redis")
    runner = CliRunner()
    shown = runner.invoke(server_app, ["status"])
    assert shown.exit_code == 0, shown.output
    assert "running, valkey 9." in shown.output and "keys" in shown.output and "unix://" in shown.output
    stopped = runner.invoke(server_app, ["stop"])
    assert stopped.exit_code == 0 and "stopped" in stopped.output
    assert json.loads(runner.invoke(server_app, ["status", "--json"]).output)["running"] is False


def test_a_session_from_ask_shows_up_in_server_status_and_server_stop_ends_it(home):
    asked = subprocess.run([sys.executable, "-m", "reactgraph", "ask", "计算 2+3", "--json"], capture_output=True,
                           text=True, timeout=120, env=clean_env())
    assert asked.returncode == 0, asked.stderr
    status = run_server("server", "status", "--json")
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["running"] is True and report["keys"] > 0 and report["server"] == "valkey"
    assert "heavy modules: []" in status.stderr  # the command imports redis-py, not the agent machinery
    stopped = run_server("server", "stop")
    assert stopped.returncode == 0 and stopped.stdout.startswith("stopped"), stopped.stderr
    assert json.loads(run_server("server", "status", "--json").stdout)["running"] is False
