"""`reactgraph compare --replay DIR`: a comparison made against the local OpenAI-compatible test server keeps the
model's replies beside its results (replies.jsonl); with the server stopped, a replay in a process of its own makes
every run again from them and writes the same tables. A request the recording has no reply for is one line
naming the run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from reactgraph.evals import schedule
from support.cli_env import clean_env, run_in_process
from support.forked_commands import forked_run
from support.provider_server import ProviderServer, Reply, calls, error, slow, structured, text

MODEL = "openai:test-model"
SAMPLES = {"ClosingCheck": {"parts": ["the question"], "missing": []},
           "Plan": {"steps": [{"goal": "Work it out", "tool": "calculator", "part": "the question"}],
                    "parts": ["the question"]},
           "ReflectionVerdict": {"enough_information": True, "tool_error": False, "need_other_tool": False,
                                 "repeated_call": False, "note": "Enough.", "parts": ["the question"]}}


def provider_model(body: dict) -> Reply:
    """A model of varied behaviour: structured replies, a calculator call, plain answers, and infrastructure
    outcomes: a provider error for every question about Tokyo, no reply in time for one about New York."""
    asked = json.dumps(body["messages"], ensure_ascii=False)
    if "Tokyo" in asked:
        return error(503, "overloaded")
    if "纽约" in asked:
        return slow(1.5)
    if schema := (body.get("response_format") or {}).get("json_schema"):
        return structured(SAMPLES.get(schema["name"], {}))
    if body.get("tools") and not any(m["role"] == "tool" for m in body["messages"]):
        return calls(("calculator", {"expression": "6*7"}))
    return text("The answer is 42.")


def tables(summary: str) -> str:
    """The report from its first table on: what a replay must make again (its heading says it is a replay)."""
    return summary[summary.index("## Per graph"):]


def compare_env(server: ProviderServer) -> dict[str, str]:
    return {"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-test", "REACTGRAPH_MODEL_RETRIES": "0",
            "REACTGRAPH_NODE_RETRIES": "0", "REACTGRAPH_MODEL_TIMEOUT": "0.4"}


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> tuple[Path, int]:
    """One comparison against the test server, made once for this module's tests (each copies it: they change it)."""
    out = tmp_path_factory.mktemp("recording") / "run"
    with ProviderServer(then=provider_model) as server, pytest.MonkeyPatch.context() as patch:
        # The pauses after the provider's failures (evals/schedule.py) are not what this module tests: 50 ms, not
        # 2 s doubling.
        patch.setattr(schedule, "FIRST_PAUSE_S", 0.05)
        done = run_in_process(patch, None, ["compare", "--model", MODEL, "--graphs", "react,plan_solve,create_agent",
                                            "--limit", "4", "--out", str(out), "--no-plots", "--quiet"],
                              **compare_env(server))
        asked = len(server.requests)
    assert done.returncode == 0, done.stderr
    return out, asked


def record(tmp_path: Path, recording: tuple[Path, int]) -> tuple[Path, int]:
    recorded, asked = recording
    out = tmp_path / "run"
    shutil.copytree(recorded, out)
    return out, asked


def replay(folder: Path, *extra: str):
    return forked_run(["compare", "--replay", str(folder), "--no-plots", "--quiet", *extra], clean_env(), timeout=120)


def test_a_replay_with_the_server_gone_makes_every_run_again_and_the_same_tables(tmp_path, recording):
    out, asked = record(tmp_path, recording)
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    stored = (out / "replies.jsonl").read_text().splitlines()
    assert len(stored) == asked and all(r["replies"] for r in records)  # every exchange kept, every run named
    assert {r["status"] for r in records} >= {"answered", "failed"}
    assert {r["infra"] for r in records} >= {"server_error", "request_timeout"}
    done = replay(out)  # the server is stopped: nothing answers on its port
    assert done.returncode == 0, done.stderr
    assert tables(done.stdout) == tables((out / "summary.md").read_text())
    replayed = [json.loads(line) for line in (out / "replay/results.jsonl").read_text().splitlines()]
    same = ("graph", "task", "status", "answer", "model_calls", "tool_calls", "tokens", "infra", "coverage_by")
    assert [{k: r[k] for k in same} for r in replayed] == [{k: r[k] for k in same} for r in records]
    assert json.loads((out / "replay/run.json").read_text())["replayed_from"] == str(out)
    assert f"- replayed from the replies stored in {out}: no provider was asked" in done.stdout


def test_a_request_with_no_stored_reply_is_one_line_naming_the_run(tmp_path, recording):
    out, _ = record(tmp_path, recording)
    lines = (out / "replies.jsonl").read_text().splitlines()
    victim = json.loads(lines[0])["run"]
    (out / "replies.jsonl").write_text("".join(f"{line}\n" for line in lines
                                               if json.loads(line)["run"] != victim) + "not a reply\n")
    done = replay(out, "--out", str(tmp_path / "again"))
    assert done.returncode == 2 and "Traceback" not in done.stderr  # a usage error
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"error: --replay {out}: run {victim} asked for a reply (") and \
        "the recording does not have" in line


def test_a_folder_without_replies_or_settings_is_refused_in_one_line(tmp_path, recording):
    out, _ = record(tmp_path, recording)
    (out / "replies.jsonl").unlink()
    done = replay(out)
    assert done.returncode == 2 and done.stderr.strip() == (
        f"error: --replay {out}: no replies.jsonl: the runs were recorded without their replies")
    done = replay(tmp_path / "nowhere")
    assert done.returncode == 2 and "not a comparison's folder" in done.stderr
