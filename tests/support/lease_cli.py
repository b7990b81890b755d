"""Running `reactgraph ask` as session-lease tests do: processes on one session (forked by
`support.forked_commands`), with the gated stand-in tool of `lease_tools` and their stderr in files that a test
reads while they run."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from support.cli_env import clean_env
from support.forked_commands import ForkedCommand, forked_run

TESTS = str(Path(__file__).parent.parent)  # tests/, where `support` is a package


def cli_env(redis_url: str, log: Path, **extra: str) -> dict[str, str]:
    env = clean_env()
    env.update(REDIS_URL=redis_url, LEASE_LOG=str(log), REACTGRAPH_TOOLS="support.lease_tools:TOOLS",
               PYTHONPATH=os.pathsep.join(filter(None, [TESTS, env.get("PYTHONPATH")])), **extra)
    return env


def ask(question: str, session: str, *options: str) -> list[str]:
    """`reactgraph ask`'s arguments."""
    return ["ask", question, "--session", session, "--json", "--reflection", "rules", *options]


def start(argv: list[str], env: dict[str, str], err: Path) -> ForkedCommand:
    """The CLI in the background, its stderr in a file (read while it runs)."""
    return ForkedCommand(argv, env, stdout=None, stderr=err)


def run_to_end(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The CLI to its end: its exit code, stdout and stderr."""
    return forked_run(argv, env, timeout=120)


def finished(process: ForkedCommand) -> dict:
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 0, out
    return json.loads(out)
