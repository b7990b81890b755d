"""Ctrl-C during `reactgraph ask` as a user presses it: the first stops the turn at the next step boundary with one
line saying how to resume, and asking again resumes the turn without running a finished tool call again; the second
stops at once and still loses no finished step. Python callers get the same through `sessions.run(control=…)`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphDrained
from langgraph.runtime import RunControl

from reactgraph.graph import Context, build_react_graph
from reactgraph.graph.sessions import plan_run, run
from support.lease_cli import ask, cli_env, run_to_end
from support.scripted import ScriptedChatModel, call, notes_gateway, tool_reply

Q = "北京和上海的天气分别怎么样？哪个城市更热？"
REACTGRAPH = str(Path(sys.executable).parent / "reactgraph")


def wait_for(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def tool_calls(log: Path) -> list[str]:
    return [line.split()[1] for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []


@pytest.fixture
def session() -> str:
    return f"ctrl-c-{uuid.uuid4().hex[:10]}"


@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_saves_the_turn_says_how_to_resume_and_the_resumed_turn_runs_no_finished_call_again(
        presses, redis_url, session, tmp_path):
    gate, log, err = tmp_path / "gate", tmp_path / "calls.log", tmp_path / "err"
    # the console script itself, as a user runs it: its exit after a second Ctrl-C is part of what is tested
    first = subprocess.Popen([REACTGRAPH, *ask(Q, session)], env=cli_env(redis_url, log, LEASE_GATE=str(gate)),
                             stdout=subprocess.DEVNULL, stderr=err.open("w"))
    wait_for(lambda: len(tool_calls(log)) == 2)  # both get_weather calls are under way
    os.kill(first.pid, signal.SIGINT)
    wait_for(lambda: "stopping after the step under way" in err.read_text(encoding="utf-8"))
    if presses == 2:
        os.kill(first.pid, signal.SIGINT)  # at once: the calls under way are abandoned, the process ends
        assert first.wait(timeout=30) == 130
    gate.touch()
    assert first.wait(timeout=60) == 130
    line = err.read_text(encoding="utf-8").strip().splitlines()[-1]
    assert line.startswith("interrupted: the turn is saved up to its last finished step; to resume it, ask the "
                           f"same question on the session: reactgraph ask --session {session} ")

    resumed = run_to_end(ask(Q, session), cli_env(redis_url, log))
    assert resumed.returncode == 0, resumed.stderr
    answer = json.loads(resumed.stdout)
    assert answer["status"] == "answered" and answer["resumed"] is True
    # Drained after the step finished, its calls are kept; stopped at once, the calls under way ran again.
    assert sorted(tool_calls(log)) == sorted(["北京", "上海"] * presses)


def test_a_python_caller_drains_a_turn_with_run_control_and_resumes_it():
    control = RunControl()

    def lookup_then_drain(messages):
        control.request_drain("test")  # as a signal handler would, while the model call is under way
        return tool_reply("look it up", call("lookup", topic="x"))

    model = ScriptedChatModel.of(lookup_then_drain, tool_reply("done?"), *["done"] * 4)
    graph = build_react_graph(notes_gateway(), checkpointer=InMemorySaver(), model=model)
    context = Context(reflection="rules")
    with pytest.raises(GraphDrained):
        run(graph, plan_run(graph, "q", "s1"), context, control=control)
    plan = plan_run(graph, "q", "s1")
    assert plan.mode == "resume"
    result = run(graph, plan, context)
    assert result["status"] in {"answered", "partial"}
    assert [step["action"] for step in result["steps"] if step["action"]] == ["lookup"]
