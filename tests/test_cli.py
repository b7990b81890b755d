"""The `reactgraph` command as a user runs it: a real subprocess, its stdout, stderr and exit code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli_env import clean_env

REACTGRAPH = str(Path(sys.executable).parent / "reactgraph")


def reactgraph(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = clean_env()
    environment.update(env or {})
    return subprocess.run([REACTGRAPH, *args], capture_output=True, text=True, timeout=120, env=environment)


def test_ask_shows_each_step_live_and_the_final_answer():
    done = reactgraph("ask", "北京和上海的天气分别怎么样？哪个城市更热？")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "scripted offline model, not an LLM" in out
    for label in ("Thought:", "Action: get_weather", "Observation", "Reflection:", "Final answer · answered"):
        assert label in out
    assert "上海更热" in out.replace("\n", "")


def test_ask_json_prints_one_object_and_nothing_else():
    done = reactgraph("ask", "计算 (15 + 27) * 3 等于多少", "--json", "--session", "s-42")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)  # the whole of stdout is one JSON document
    assert {"answer", "status", "session", "steps"} <= payload.keys()
    assert payload["session"] == "s-42" and payload["status"] == "answered" and "126" in payload["answer"]
    step = payload["steps"][0]
    assert set(step) == {"step", "node", "thought", "action", "action_input", "observation", "status",
                         "latency_ms", "tokens", "timestamp"}
    assert step["action"] == "calculator"


def test_options_reach_the_run():
    done = reactgraph("ask", "Python 诞生于哪一年？到 2026 年它诞生了多少年？", "--json", "--max-iterations", "1",
                      "--reflection", "rules")
    payload = json.loads(done.stdout)
    assert payload["status"] == "limit_reached" and payload["iterations"] == 1


@pytest.mark.parametrize(("args", "env", "message"), [
    (["ask", "q", "--reflection", "sometimes"], {}, "reflection must be"),
    (["ask", "q", "--max-iterations", "0"], {}, "max_iterations must be"),
    (["ask", "q", "--bogus"], {}, "No such option"),
    (["ask", "q", "--model", "gpt4"], {}, "unknown model spec 'gpt4'"),
    (["ask", "q", "--model", "openai:gpt-4o-mini"], {}, "OPENAI_API_KEY is not set"),
    (["ask", "q"], {"REACTGRAPH_MODEL": "llama"}, "unknown model spec 'llama'"),
])
def test_user_errors_are_one_line_on_stderr_with_a_nonzero_exit(args, env, message):
    done = reactgraph(*args, env=env)
    assert done.returncode != 0
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_tools_lists_every_builtin_tool_with_its_breaker_state():
    done = reactgraph("tools", "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    assert list(rows) == ["calculator", "get_time", "get_weather", "search", "rag_search", "http_get"]
    assert rows["calculator"]["breaker"]["state"] == "closed"
    assert "expression" in rows["calculator"]["schema"]["properties"]
    table = reactgraph("tools")
    assert "calculator" in table.stdout and "closed" in table.stdout
