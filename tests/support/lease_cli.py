"""Running `reactgraph ask` as session-lease tests do: subprocesses on one session, with the gated stand-in
tool of `lease_tools` and their stderr in files that a test reads while they run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.cli_env import clean_env

REACTGRAPH = str(Path(sys.executable).parent / "reactgraph")
TESTS = str(Path(__file__).parent.parent)  # tests/, where `support` is a package


def cli_env(redis_url: str, log: Path, **extra: str) -> dict[str, str]:
    env = clean_env()
    env.update(REDIS_URL=redis_url, LEASE_LOG=str(log), REACTGRAPH_TOOLS="support.lease_tools:TOOLS",
               PYTHONPATH=os.pathsep.join(filter(None, [TESTS, env.get("PYTHONPATH")])), **extra)
    return env


def ask(question: str, session: str, *options: str) -> list[str]:
    return [REACTGRAPH, "ask", question, "--session", session, "--json", "--reflection", "rules", *options]


def start(command: list[str], env: dict[str, str], err: Path) -> subprocess.Popen:
    """The CLI in the background, its stderr in a file (read while it runs)."""
    with err.open("w") as stderr:
        return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)


def finished(process: subprocess.Popen) -> dict:
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 0, out
    return json.loads(out)
