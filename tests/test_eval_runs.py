"""`reactgraph compare` runs fit for real providers: runs at once with the records of one at a time, a run
killed mid-way resumed to the records of an uninterrupted one without making a finished run again, a 429's
Retry-After waited out, a per-run time limit, a total cost cap, and reports that say what they measured.

The provider is the local OpenAI-compatible test server (tests/support/provider_server.py), answering every
request from its body, so the same question always gets the same reply; the offline model where a model's
behaviour does not matter."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import pytest

from reactgraph.evals import FaultPlan, RunConfig, comparable, load_suite, run_comparison
from reactgraph.evals.results_file import ordered, read_records
from support.cli_env import clean_env, run_in_process
from support.forked_commands import ForkedCommand
from support.provider_server import ProviderServer, Reply, structured, text

QUESTIONS = [f"What is the code word {n}?" for n in range(1, 7)]
MODEL = "openai:test-model"


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    path = tmp_path / "words.jsonl"
    path.write_text("".join(json.dumps({"id": f"word-{n}", "question": q, "tags": ["word"], "expected": [f"w{n}"]})
                            + "\n" for n, q in enumerate(QUESTIONS, 1)), encoding="utf-8")
    return path


class Provider:
    """Answers from the request alone: the closing check with its one part, a question with its code word (after
    `delay_s`), the first `refusals` requests with a 429 and `Retry-After: 1`. Keeps when each request came."""

    def __init__(self, delay_s: float = 0.0, refusals: int = 0, readable_check: bool = True) -> None:
        self.delay_s, self.refusals, self.readable_check = delay_s, refusals, readable_check
        self.times: list[float] = []
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> Reply:
        with self.lock:
            self.times.append(time.monotonic())
            refuse = len(self.times) <= self.refusals
        if refuse:
            return Reply(status=429, error="slow down", headers={"retry-after": "1"})
        if body.get("response_format"):
            if not self.readable_check:  # a small model's prose where JSON was asked for
                return text("I think the answer covers the question.")
            return structured({"parts": ["the code word"], "missing": []})
        question = first_question(body)
        reply = text(f"The code word is w{QUESTIONS.index(question) + 1}." if question in QUESTIONS else "?")
        reply.delay_s = self.delay_s
        return reply


def first_question(body: dict) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def starts(requests: list[dict]) -> list[str]:
    """The question of every run that started: its first request has only the system prompt and the question."""
    return [first_question(r) for r in requests if [m["role"] for m in r["messages"]] == ["system", "user"]]


def compare_args(suite: Path, out: Path, *more: str) -> list[str]:
    return ["compare", "--graphs", "react", "--suite", str(suite), "--model", MODEL, "--reflection", "rules",
            "--no-plots", "--out", str(out), *more]


def provider_env(server: ProviderServer, retries: int = 1) -> dict[str, str]:
    return {"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-test", "REACTGRAPH_NODE_RETRIES": "0",
            "REACTGRAPH_MODEL_RETRIES": str(retries)}


def wait_for_lines(path: Path, count: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not (path.is_file() and path.read_bytes().count(b"\n") >= count):
        assert time.monotonic() < deadline, f"{path} did not reach {count} records within {timeout_s:g} s"
        time.sleep(0.02)


def test_four_runs_at_once_give_the_records_of_one_at_a_time(suite):
    # the default suite's tasks that do not read the clock (an answer that says the time differs between runs)
    timeless = [t for t in load_suite("default") if not {"time", "age", "compound"} & set(t.tags)]
    tasks = load_suite(suite)[:4] + timeless[:4]
    config = {"graphs": ("react", "plan_solve"), "model": "offline-noisy:0.3", "seeds": 2,
              "faults": FaultPlan(failure_rate=0.3)}
    one = run_comparison(tasks, RunConfig(**config, concurrency=1))
    four = run_comparison(tasks, RunConfig(**config, concurrency=4))
    assert len(one) == 2 * 2 * 8 and comparable(four) == comparable(one)


def test_a_run_killed_mid_way_resumes_to_the_records_of_an_uninterrupted_one(suite, tmp_path, monkeypatch, capfd):
    provider = Provider(delay_s=0.2)
    with ProviderServer(then=provider) as server:
        env = clean_env(**provider_env(server))
        killed = ForkedCommand(compare_args(suite, tmp_path / "run"), env)
        try:
            wait_for_lines(tmp_path / "run" / "results.jsonl", 2)
        finally:
            killed.send_signal(signal.SIGKILL)
            killed.wait(timeout=30)
        finished_before, _ = read_records(tmp_path / "run" / "results.jsonl")
        assert 2 <= len(finished_before) < len(QUESTIONS), "the run was not killed mid-way"
        with (tmp_path / "run" / "results.jsonl").open("ab") as results:
            results.write(b'{"graph": "react", "ta')  # a write the kill cut short
        before = len(server.requests)
        resumed = run_in_process(monkeypatch, capfd, compare_args(suite, tmp_path / "run", "--resume",
                                                                  str(tmp_path / "run")), **provider_env(server))
        started_again = starts(server.requests[before:])
        whole = run_in_process(monkeypatch, capfd, compare_args(suite, tmp_path / "whole"), **provider_env(server))
    assert resumed.returncode == 0 and whole.returncode == 0, resumed.stderr + whole.stderr
    assert "ignoring a torn last line" in resumed.stderr
    assert f"resumed: {len(finished_before)} of these runs were read back from the earlier run begun" in resumed.stdout
    assert not {r["question"] for r in finished_before} & set(started_again), "a finished run was made again"
    assert len(started_again) == len(QUESTIONS) - len(finished_before)
    resumed_records, _ = read_records(tmp_path / "run" / "results.jsonl")
    whole_records, _ = read_records(tmp_path / "whole" / "results.jsonl")
    assert comparable(ordered(resumed_records)) == comparable(ordered(whole_records))
    assert all(r["success"] for r in whole_records) and len(whole_records) == len(QUESTIONS)


@pytest.mark.parametrize(("change", "difference"), [
    (["--model", "offline-noisy:0.5"], "model was \"offline\", now \"offline-noisy:0.5\""),
    (["--graphs", "react,plan_solve"], "graphs was react, now react,plan_solve"),
    (["--tool-failure-rate", "0.2"], "faults was"),
    (["--max-output-tokens", "64"], "max_output_tokens was null, now 64"),
])
def test_resuming_with_other_settings_is_refused_in_one_line_naming_the_difference(suite, tmp_path, cli, change,
                                                                                    difference):
    base = ["compare", "--graphs", "react", "--suite", str(suite), "--limit", "1", "--no-plots"]
    assert cli(*base, "--out", str(tmp_path / "run"))[0] == 0
    code, out, err = cli(*base, "--resume", str(tmp_path / "run"), *change)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"error: cannot resume {tmp_path / 'run'} with other settings: {difference}"), err


def test_resuming_against_another_server_of_the_same_model_name_is_refused_in_one_line(suite, tmp_path,
                                                                                      monkeypatch, capfd):
    with ProviderServer(then=Provider()) as first, ProviderServer(then=Provider()) as other:
        made = run_in_process(monkeypatch, capfd, compare_args(suite, tmp_path / "run", "--limit", "1"),
                              **provider_env(first))
        assert made.returncode == 0, made.stderr
        resumed = run_in_process(monkeypatch, capfd, compare_args(suite, tmp_path / "run", "--limit", "1",
                                                                  "--resume", str(tmp_path / "run")),
                                 **provider_env(other))
        asked = len(other.requests)
    assert resumed.returncode == 2 and len(resumed.stderr.strip().splitlines()) == 1, resumed.stderr
    assert f'endpoint was "127.0.0.1:{first.port}", now "127.0.0.1:{other.port}"' in resumed.stderr
    assert asked == 0  # refused before any request


def test_a_429_with_retry_after_is_waited_out_and_the_run_goes_on(suite, tmp_path, monkeypatch, capfd):
    provider = Provider(refusals=1)
    with ProviderServer(then=provider) as server:
        done = run_in_process(monkeypatch, capfd, compare_args(suite, tmp_path / "run", "--limit", "1"),
                              **provider_env(server, retries=2))
    assert done.returncode == 0, done.stderr
    assert "| react | 1 | 100% |" in done.stdout
    assert provider.times[1] - provider.times[0] >= 0.9, "the retry did not wait for Retry-After: 1"


def test_a_run_past_its_time_limit_is_recorded_as_timed_out_and_the_rest_go_on(suite, tmp_path, monkeypatch, capfd):
    # The limit leaves each task time to reach its model call on a loaded machine (at 0.3 s, one did not, once):
    # the call is what the last assert charges.
    with ProviderServer(then=Provider(delay_s=4.0)) as server:
        done = run_in_process(monkeypatch, capfd, compare_args(suite, tmp_path / "run", "--limit", "2",
                                                               "--task-timeout", "1.2", "--concurrency", "2"),
                              **provider_env(server))
    records, _ = read_records(tmp_path / "run" / "results.jsonl")
    assert done.returncode == 0 and "| react | 0 of 2 | 2 (task_timeout 2) |" in done.stdout, done.stderr
    assert [(r["status"], r["error"], r["infra"]) for r in records] == [
        ("timed_out", "task timed out after 1.2 s", "task_timeout")] * 2
    assert "| failed | timed_out |" in done.stdout and "| react | 0 | 0 | 0 | 0 | 0 | 0 | 2 |" in done.stdout
    assert "| react | 2 (2 left out) | - |" in done.stdout  # no success rate of runs the plumbing ended
    assert all(r["model_calls"] == 1 and r["tokens_in"] > 0 for r in records)  # the call it made is charged
    assert "TaskTimedOut" not in done.stderr


def test_the_total_cost_cap_stops_new_runs_and_the_report_says_so(suite, tmp_path, cli, monkeypatch):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"offline": {"input": 1000, "output": 1000}}), encoding="utf-8")
    monkeypatch.setenv("REACTGRAPH_PRICES", str(prices))
    base = ["compare", "--graphs", "react", "--suite", str(suite), "--no-plots", "--max-total-cost", "0.5"]
    code, out, err = cli(*base, "--out", str(tmp_path / "run"))
    records, _ = read_records(tmp_path / "run" / "results.jsonl")
    assert code == 0 and 1 <= len(records) < len(QUESTIONS)
    assert "**stopped at the cost cap: $" in out and "planned run(s) not started" in out
    assert "total cost: $" in out and "control flow only — the scripted model's rules, not model quality" in out
    assert "run(s) not started (--resume" in err and "ETA" not in err  # no progress bar off a terminal
    code, out, _ = cli(*base[:-1], "100", "--resume", str(tmp_path / "run"))
    records, _ = read_records(tmp_path / "run" / "results.jsonl")
    assert code == 0 and len(records) == len(QUESTIONS) and "stopped at the cost cap" not in out


def test_a_real_model_report_names_the_model_provider_date_and_cost(suite, tmp_path, monkeypatch, capfd):
    with ProviderServer(then=Provider()) as server:
        done = run_in_process(monkeypatch, capfd, compare_args(suite, tmp_path / "run", "--limit", "1", "--json"),
                              **provider_env(server))
    summary = json.loads(done.stdout)
    assert summary["config"]["model"] == MODEL and summary["config"]["endpoint"] == f"127.0.0.1:{server.port}"
    text_report = (tmp_path / "run" / "summary.md").read_text(encoding="utf-8")
    assert f"- model: {MODEL}" in text_report and f"provider: openai at 127.0.0.1:{server.port}" in text_report
    assert time.strftime("%Y-%m-%d", time.gmtime()) in text_report and "total cost: unknown" in text_report
    assert "control flow only" not in text_report


def test_a_notebook_heading_names_the_model_its_server_the_day_and_the_cost(suite, monkeypatch):
    from reactgraph.evals.report import run_heading

    tasks = load_suite(str(suite))[:1]
    with ProviderServer(then=Provider()) as server:
        for name, value in provider_env(server).items():
            monkeypatch.setenv(name, value)
        records = run_comparison(tasks, RunConfig(graphs=("react",), model=MODEL, reflection="rules"))
        heading = run_heading(records, MODEL)
    assert heading.startswith(f"**model: {MODEL}**") and f"provider: openai at 127.0.0.1:{server.port}" in heading
    assert time.strftime("%Y-%m-%d", time.gmtime()) in heading and "control flow only" not in heading
    offline = run_heading(run_comparison(tasks, RunConfig(graphs=("react",))), "offline")
    assert "provider: offline · total cost: $0.0000" in offline and "control flow only" in offline


def test_a_run_the_provider_keeps_failing_is_recorded_with_the_cause_and_new_runs_pause(suite, tmp_path,
                                                                                          monkeypatch, capfd):
    times: list[float] = []

    def overloaded(body: dict) -> Reply:
        times.append(time.monotonic())
        return Reply(status=503, error="overloaded", headers={"retry-after-ms": "10"})

    with ProviderServer(then=overloaded) as server:
        done = run_in_process(monkeypatch, capfd, compare_args(suite, tmp_path / "run", "--limit", "2"),
                              **provider_env(server, retries=1))
    records, _ = read_records(tmp_path / "run" / "results.jsonl")
    assert done.returncode == 0 and len(records) == 2 and len(times) == 4, done.stderr  # the SDK's 1 retry, no more
    assert all(r["status"] == "failed" and r["error"].startswith("model provider error: 503 Service Unavailable")
               for r in records)
    assert times[2] - times[1] >= 1.9, "the next run did not wait after the provider failed"


def test_a_run_stuck_in_one_call_is_given_up_after_its_grace_and_its_late_record_dropped(monkeypatch):
    from reactgraph.evals import schedule
    from reactgraph.evals.graphs import resolve_graphs
    from reactgraph.evals.tasks import Task

    # 1 s + 1 s of grace: the two quick runs' results must be read before the deadline, and with 0.1 s + 0.2 s
    # a scheduler woken late on a loaded machine could find them overdue with their results waiting unread
    monkeypatch.setattr(schedule, "GRACE_S", 1.0)
    release = threading.Event()
    tasks = [Task(id=f"t{n}", question=f"q{n}") for n in range(3)]
    plan = schedule.plan_runs(resolve_graphs("react"), tasks, [0], 1)

    def run_one(run, guard):
        if run.task.id == "t1":
            release.wait(timeout=30)  # one call that does not come back in time
        return {**schedule.empty_record(run), "status": "answered", "success": True, "failure_mode": None}

    try:
        outcome = schedule.execute(plan, run_one, model="offline", concurrency=3, task_timeout_s=1,
                                   common={"model": "offline"})
    finally:
        release.set()
    assert [(r["task"], r["status"]) for r in outcome.records] == [("t0", "answered"), ("t1", "timed_out"),
                                                                   ("t2", "answered")]
    assert outcome.records[1]["model"] == "offline" and outcome.records[1]["error"] == "task timed out after 1 s"


def test_a_reply_limit_reaches_every_run_and_a_reply_cut_there_is_no_answer(suite, tmp_path, cli):
    weather = [t for t in load_suite("default") if t.id == "weather-bj-sh-zh"]
    whole, cut = (run_comparison(weather, RunConfig(graphs=("react",), max_output_tokens=n))[0] for n in (None, 16))
    assert whole["status"] == "answered" and cut["status"] != "answered" and cut["tokens_out"] < whole["tokens_out"]
    with pytest.raises(ValueError, match="max output tokens must be at least 16"):
        RunConfig(max_output_tokens=8)
    code, _, err = cli("compare", "--graphs", "react", "--suite", str(suite), "--limit", "1", "--no-plots",
                       "--max-output-tokens", "16", "--out", str(tmp_path / "run"))
    records, _ = read_records(tmp_path / "run" / "results.jsonl")
    assert code == 0 and json.loads((tmp_path / "run" / "run.json").read_text())["max_output_tokens"] == 16, err
    assert records[0]["status"] != "answered"


def test_each_run_sends_its_own_sampling_seed_and_its_record_keeps_it(suite, tmp_path, monkeypatch, capfd):
    with ProviderServer(then=Provider()) as server:
        for out in ("first", "again"):
            done = run_in_process(monkeypatch, capfd, compare_args(suite, tmp_path / out, "--limit", "1",
                                                                   "--repeat", "2"), **provider_env(server))
            assert done.returncode == 0, done.stderr
        sent = [r.get("seed") for r in server.requests]
    first, _ = read_records(tmp_path / "first" / "results.jsonl")
    again, _ = read_records(tmp_path / "again" / "results.jsonl")
    seeds = [r["provider_seed"] for r in first]
    assert len(set(seeds)) == 2 and all(isinstance(s, int) for s in seeds)  # two repeats, two draws
    assert seeds == [r["provider_seed"] for r in again]  # the same run asks with the same seed
    assert set(sent) == set(seeds) and all(r["temperature"] == 0.0 for r in first)


def test_an_answer_whose_check_could_not_be_read_is_counted_unchecked_in_the_status_table(suite, tmp_path,
                                                                                          monkeypatch, capfd):
    # The closing self-check is answered in prose, which no structured strategy can read.
    with ProviderServer(then=Provider(readable_check=False)) as server:
        done = run_in_process(monkeypatch, capfd, compare_args(suite, tmp_path / "run", "--limit", "1"),
                              **provider_env(server))
    assert done.returncode == 0, done.stderr
    [record], _ = read_records(tmp_path / "run" / "results.jsonl")
    assert record["status"] == "answered" and record["coverage_by"] == "unchecked"
    rows = [line for line in done.stdout.splitlines() if line.startswith("| react |")]
    assert any("1 (1 coverage unchecked)" in row for row in rows), rows
