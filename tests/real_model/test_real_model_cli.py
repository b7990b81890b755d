"""`reactgraph ask` on the real small model, in a process of its own as a user runs it: it exits as its status
says, within bounded requests and time, and shows the tokens the server counted."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.cli_env import clean_env
from support.real_model_runs import ARITHMETIC, MAX_ITERATIONS, REQUEST_BOUND, RUN_CEILING_S, STATUSES, problems
from support.recording_proxy import truncated

pytestmark = [pytest.mark.real_model, pytest.mark.timeout(2 * RUN_CEILING_S)]
REACTGRAPH = str(Path(sys.executable).parent / "reactgraph")
SUCCESS = ("answered", "partial")  # exit 0; every other status exits 1


def ask(env: dict[str, str], redis_url: str, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = subprocess.run([REACTGRAPH, "ask", "--store", redis_url, "--max-iterations", str(MAX_ITERATIONS), *args],
                          env=clean_env(COLUMNS="200", **env), capture_output=True, text=True, timeout=RUN_CEILING_S)
    return done, time.monotonic() - started


def test_ask_json_prints_a_status_the_evidence_supports_and_the_servers_token_count(real_model, model_env,
                                                                                     redis_url):
    mark = real_model.mark()
    done, wall = ask(model_env, redis_url, "--json", ARITHMETIC)
    exchanges = real_model.since(mark)
    output = json.loads(done.stdout)
    assert done.returncode == (0 if output["status"] in SUCCESS else 1), done.stderr
    assert problems(output, len(exchanges), REQUEST_BOUND["react"], truncated(exchanges)) == []
    assert wall < RUN_CEILING_S


def test_ask_in_the_text_protocol_shows_the_steps_and_one_final_answer_with_its_status(real_model, model_env,
                                                                                      redis_url):
    mark = real_model.mark()
    done, wall = ask(model_env, redis_url, "--protocol", "text", ARITHMETIC)
    requests = len(real_model.since(mark))
    assert "Traceback" not in done.stdout + done.stderr
    finals = [line for line in done.stdout.splitlines() if "Final answer · " in line]
    assert len(finals) == 1, done.stdout
    status = finals[0].split("Final answer · ", 1)[1].split(" ", 1)[0]
    assert status in STATUSES
    assert done.returncode == (0 if status in SUCCESS else 1)
    assert "~0 tokens" not in finals[0] and " tokens" in finals[0]
    assert 0 < requests <= REQUEST_BOUND["react"]
    assert wall < RUN_CEILING_S
