"""The `reactgraph` command as a user runs it: its stdout, stderr and exit code. A real subprocess where the process
is the point (the Quick start's run, `python -m`, the version, help and shell completion); the commands' own
behaviour through the same entry point, `main()`, in this process (`run_cli`)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import uuid
from importlib.metadata import version
from pathlib import Path

import pytest

from support.cli_env import CLEARED, KEPT, clean_env

REACTGRAPH = str(Path(sys.executable).parent / "reactgraph")


def reactgraph(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = clean_env()
    environment.update(env or {})
    return subprocess.run([REACTGRAPH, *args], capture_output=True, text=True, timeout=120, env=environment)


@pytest.fixture
def run_cli(cli, monkeypatch: pytest.MonkeyPatch):
    """`reactgraph ARGS` through `main()` in this process, with the environment `clean_env` gives a subprocess
    (plus `env`): a CompletedProcess, as `reactgraph()` returns."""
    for name in [n for n in os.environ if n.startswith(CLEARED) and n not in KEPT]:
        monkeypatch.delenv(name)

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        with monkeypatch.context() as patch:
            for name, value in (env or {}).items():
                patch.setenv(name, value)
            code, out, err = cli(*args)
        return subprocess.CompletedProcess(["reactgraph", *args], code, out, err)

    return run


def test_ask_shows_each_step_live_and_the_final_answer():
    done = reactgraph("ask", "北京和上海的天气分别怎么样？哪个城市更热？")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "scripted offline model, not an LLM" in out
    for label in ("Thought:", "Action: get_weather", "Observation", "Reflection:", "Final answer · answered"):
        assert label in out
    assert "上海更热" in out.replace("\n", "")


def test_ask_json_prints_one_object_and_nothing_else(run_cli):
    session = f"s-{uuid.uuid4().hex[:10]}"  # a session of its own: the Redis is shared with other runs
    done = run_cli("ask", "计算 (15 + 27) * 3 等于多少", "--json", "--session", session)
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)  # the whole of stdout is one JSON document
    assert {"answer", "status", "session", "steps"} <= payload.keys()
    assert payload["session"] == session and payload["status"] == "answered" and "126" in payload["answer"]
    step = payload["steps"][0]
    assert set(step) == {"step", "node", "thought", "action", "action_input", "observation", "status",
                         "latency_ms", "tokens", "timestamp"}
    assert step["action"] == "calculator"


def test_options_reach_the_run(run_cli):
    done = run_cli("ask", "Python 诞生于哪一年？到 2026 年它诞生了多少年？", "--json", "--max-iterations", "1",
                      "--reflection", "rules")
    payload = json.loads(done.stdout)
    assert payload["status"] == "limit_reached" and payload["iterations"] == 1


@pytest.mark.parametrize(("args", "env", "message"), [
    (["ask", "q", "--reflection", "sometimes"], {}, "'sometimes' is not one of 'llm', 'rules', 'off', 'inline'"),
    (["ask", "q", "--protocol", "json"], {}, "'json' is not one of 'tools', 'text'"),
    (["ask", "q", "--max-iterations", "0"], {}, "--max-iterations: 0 is not accepted: expected an integer from 1"),
    (["ask", "q", "--bogus"], {}, "No such option"),
    (["ask", "q", "--model", "gpt4"], {}, "unknown model spec 'gpt4'"),
    (["ask", "q", "--model", "openai:gpt-4o-mini"], {}, "OPENAI_API_KEY is not set"),
    (["ask", "q"], {"REACTGRAPH_MODEL": "llama"}, "unknown model spec 'llama'"),
])
def test_user_errors_are_one_line_on_stderr_with_a_nonzero_exit(args, env, message, run_cli):
    done = run_cli(*args, env=env)
    assert done.returncode != 0
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_tools_lists_every_builtin_tool_with_its_breaker_state(run_cli):
    done = run_cli("tools", "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    assert list(rows) == ["calculator", "get_time", "get_weather", "search", "rag_search", "http_get"]
    assert rows["calculator"]["breaker"]["state"] == "closed"
    assert "expression" in rows["calculator"]["schema"]["properties"]
    table = run_cli("tools")
    assert "calculator" in table.stdout and "closed" in table.stdout


def test_the_tools_table_fits_80_columns_one_line_per_tool_and_wide_shows_every_column(run_cli):
    narrow = run_cli("tools", env={"COLUMNS": "80"}).stdout.splitlines()
    assert max(map(len, narrow)) <= 80
    header = next(line for line in narrow if line.startswith("tool"))
    assert header.split() == ["tool", "parameters", "breaker", "calls", "description"]
    assert [line.split()[0] for line in narrow if line.split() and line.split()[0] in (
        "calculator", "get_time", "get_weather", "search", "rag_search", "http_get")] == [
        "calculator", "get_time", "get_weather", "search", "rag_search", "http_get"]  # one line each
    wide = run_cli("tools", "--wide", env={"COLUMNS": "80"}).stdout.splitlines()
    assert next(line for line in wide if line.startswith("tool")).split() == [
        "tool", "parameters", "timeout", "tags", "stuck", "breaker", "calls", "description"]
    # with call metrics from other processes (shared in Redis) the narrow table still fits
    from rich.console import Console

    from reactgraph.cli.tool_list import tools_table

    rows = json.loads(run_cli("tools", "--json").stdout)
    for row in rows:
        row["metrics"] = {"calls": 12345, "failures": 678, "p95_ms": 12345.0}
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(tools_table(rows, wide=False, width=80))
    lines = console.export_text().splitlines()
    assert max(map(len, lines)) <= 80 and "description" in next(line for line in lines if line.startswith("tool"))
    rows[0]["timeout_s"] = None  # a tool declared with no deadline
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(tools_table(rows, wide=True, width=200))
    line = next(line for line in console.export_text().splitlines() if line.startswith(rows[0]["name"]))
    assert " none " in line


def test_version_names_the_installed_release():
    done = reactgraph("--version")
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout == f"reactgraph {version('react-graph')}\n"


def test_a_bare_reactgraph_prints_help_and_no_error_line():
    done = reactgraph()
    assert done.returncode == 0
    assert "Usage: reactgraph" in done.stdout and "ask" in done.stdout and "history" in done.stdout
    assert done.stderr == ""


@pytest.mark.parametrize("module", ["reactgraph", "reactgraph.cli"])
def test_python_dash_m_runs_the_same_command_line(module):
    done = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True, timeout=60,
                          env=clean_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"reactgraph {version('react-graph')}\n"
    listed = subprocess.run([sys.executable, "-m", module, "tools", "--json"], capture_output=True, text=True,
                            timeout=120, env=clean_env())
    assert listed.returncode == 0, listed.stderr
    assert "calculator" in {row["name"] for row in json.loads(listed.stdout)}


def test_the_shell_completes_commands_and_the_choices_of_reflection():
    # Typer's --show-completion takes no shell name (a "bash" after it was ignored): it detects the shell among
    # its parent processes, so it is run from bash, as a user types it. Started under a process with no shell
    # among its ancestors (a suite launched by a service), the bare command answered "Shell  not supported".
    script = subprocess.run(["bash", "-c", '"$0" --show-completion; exit $?', REACTGRAPH], capture_output=True,
                            text=True, timeout=120, env=clean_env())
    assert script.returncode == 0 and "_REACTGRAPH_COMPLETE" in script.stdout
    for words, expected in ((["reactgraph", "hi"], {"history"}), (["reactgraph", "ask", "--reflection", ""],
                                                                  {"llm", "rules", "off", "inline"})):
        done = reactgraph(env={"_REACTGRAPH_COMPLETE": "complete_bash", "COMP_WORDS": " ".join(words),
                               "COMP_CWORD": str(len(words) - 1)})
        assert done.returncode == 0, done.stderr
        assert set(done.stdout.split()) == expected


def test_help_lists_the_choices_of_reflection_and_protocol():
    done = reactgraph("ask", "--help", env={"COLUMNS": "120"})
    assert done.returncode == 0
    assert "llm|rules|off|inline" in done.stdout and "tools|text" in done.stdout


def test_history_shows_each_checkpoint_id_whole_on_one_line_and_a_copied_id_forks_the_session(tmp_path, run_cli):
    store = f"sqlite:///{tmp_path / 'sessions.db'}"
    assert run_cli("ask", "计算 2+3", "--session", "s-hist", "--store", store).returncode == 0
    rows = json.loads(run_cli("history", "--session", "s-hist", "--store", store, "--json").stdout)
    table = run_cli("history", "--session", "s-hist", "--store", store, "--limit", "4", env={"COLUMNS": "80"})
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    uuid = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    shown = [id_ for line in lines for id_ in re.findall(uuid, line)]
    assert shown == [row["checkpoint"] for row in rows[:4]]  # every id whole, on its row's first line
    assert "input" not in table.stdout  # the oldest row shown is named by the node that wrote it
    forked = run_cli("ask", "计算 3+4", "--session", "s-hist", "--store", store, "--from", shown[-1])
    assert forked.returncode == 0, forked.stderr
    assert f"forked from {shown[-1]}" in forked.stdout and "7" in forked.stdout


def test_tools_of_a_module_in_the_current_directory_load_from_the_console_script(tmp_path):
    """`--tools my_tools:TOOLS` beside the user's own file works as `python -m` would (the console script's path does
    not hold the directory it runs in); a module found nowhere is one line naming where it was looked for."""
    (tmp_path / "my_tools.py").write_text('def shout(text: str) -> str:\n    """Shout a text.\n\n    Args:\n'
                                          '        text: What to shout.\n    """\n    return text.upper()\n\n\n'
                                          "TOOLS = [shout]\n")
    environment = clean_env()
    listed = subprocess.run([REACTGRAPH, "tools", "--tools", "my_tools:TOOLS"], capture_output=True, text=True,
                            timeout=120, env=environment, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "Shout a text." in listed.stdout
    missing = subprocess.run([REACTGRAPH, "tools", "--tools", "nope_tools:TOOLS"], capture_output=True, text=True,
                             timeout=120, env=environment, cwd=tmp_path)
    assert missing.returncode != 0
    assert "No module named 'nope_tools'" in missing.stderr and str(tmp_path) in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
