"""Durable sessions on Redis, through the real CLI: crash and resume, Redis restarts, stateless workers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from reactgraph.memory import RedisSaver
from support.cli_env import clean_env
from support.forked_commands import ForkedCommand, forked_run

TESTS = str(Path(__file__).parent)
QUESTION = "北京和上海的天气分别怎么样？哪个城市更热？"
# A killed holder's lease must expire before the resuming command may take the session: 3 s instead of the
# default 30 s keeps these tests about resuming, not about waiting (renewals still run every second).
LEASE_TTL_S = "3"


def cli_env(redis_url: str, log: Path, **extra: str) -> dict[str, str]:
    env = clean_env()
    env.update(REDIS_URL=redis_url, DURABLE_LOG=str(log), REACTGRAPH_TOOLS="support.durable_tools:TOOLS",
               PYTHONPATH=os.pathsep.join(filter(None, [TESTS, env.get("PYTHONPATH")])),
               REACTGRAPH_SESSION_LEASE_TTL=LEASE_TTL_S, **extra)
    return env


def ask(session: str, env: dict[str, str], question: str = QUESTION) -> subprocess.CompletedProcess:
    return forked_run(["ask", question, "--session", session, "--json", "--reflection", "rules"], env, timeout=120)


def wait_for(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def saved_tool_results(redis_url: str, session: str) -> list[str]:
    """The tool results Redis holds for the session's unfinished step (writes of the `act` tasks that ended)."""
    with RedisSaver.from_url(redis_url) as saver:
        saved = saver.get_tuple({"configurable": {"thread_id": session}})
    writes = saved.pending_writes if saved else []
    messages = [m for _task, channel, value in writes if channel == "messages"
                for m in (value if isinstance(value, list) else [value])]
    return [str(m.content) for m in messages if getattr(m, "type", "") == "tool"]


@pytest.fixture
def session(redis_url: str):
    name = f"durable-{uuid.uuid4().hex[:10]}"
    yield name
    with RedisSaver.from_url(redis_url) as saver:
        saver.delete_thread(name)


def test_a_killed_run_resumes_and_no_finished_tool_call_runs_again(redis_url, session, tmp_path):
    log = tmp_path / "calls.log"
    worker = ForkedCommand(["ask", QUESTION, "--session", session, "--json", "--reflection", "rules"],
                           cli_env(redis_url, log, HANG_CITY="上海"))
    try:
        wait_for(lambda: log.exists() and {"done 北京", "start 上海"} <= set(log.read_text().splitlines()))
        # The finished call's result is saved right after it returns: kill only once it is in Redis.
        wait_for(lambda: any("北京" in result for result in saved_tool_results(redis_url, session)))
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()
    assert worker.returncode == -signal.SIGKILL

    done = ask(session, cli_env(redis_url, log))
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["resumed"] is True and payload["status"] == "answered"
    assert "上海" in payload["answer"]
    calls = log.read_text().splitlines()
    assert calls.count("start 北京") == 1  # finished before the kill: not run again
    assert calls.count("start 上海") == 2  # unfinished at the kill: run again on resume


def test_redis_going_away_mid_run_is_one_clear_line_and_the_same_command_resumes(own_redis, tmp_path):
    url = own_redis()
    log = tmp_path / "calls.log"
    env = cli_env(url, log, STOP_REDIS_CITY="北京")
    failed = ask("restart-1", env)
    assert failed.returncode == 2 and failed.stdout == ""
    assert len(failed.stderr.strip().splitlines()) == 1
    assert f"cannot reach Redis at {url}" in failed.stderr and "run the same command again" in failed.stderr

    own_redis()  # Redis is back, with its data
    done = ask("restart-1", env)
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["resumed"] is True and payload["status"] == "answered"


def test_two_worker_processes_alternate_the_turns_of_one_session(redis_url, session, tmp_path):
    env = cli_env(redis_url, tmp_path / "calls.log")
    questions = ["计算 2 + 3 等于多少", "计算 10 * 7 等于多少", "现在几点了？"]
    answers = []
    for question in questions:  # each turn in a fresh worker process: the session lives only in Redis
        done = ask(session, env, question)
        assert done.returncode == 0, done.stderr
        answers.append(json.loads(done.stdout))
    assert [a["resumed"] for a in answers] == [False, False, False]
    with RedisSaver.from_url(redis_url) as saver:
        state = saver.get_tuple({"configurable": {"thread_id": session}}).checkpoint["channel_values"]
    humans = [m.content for m in state["messages"] if m.type == "human"]
    assert humans == questions
