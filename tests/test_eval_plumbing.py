"""Evals that separate the model from the plumbing: a run the provider or the transport ended is an
infrastructure outcome — recorded with its one-line cause and its kind, counted per graph beside success, left
out of the success rates and the paired tests, made again alone by `compare --retry-infra`; the baseline meets
the same bounds, re-runs and failure line; a run stopped mid-way is charged what it spent, and the cost cap is
passed by no more than the requests in flight spend.

The provider is the local OpenAI-compatible test server (tests/support/provider_server.py, loopback only);
the offline model where only the report's shape matters."""

from __future__ import annotations

import json
import time

import pytest

from reactgraph.evals import RunConfig, load_suite, run_comparison, summarize
from reactgraph.evals.outcomes import infra_cause, left_out
from reactgraph.evals.report import markdown, write_report
from reactgraph.evals.results_file import read_records
from reactgraph.evals.tasks import Task
from support.cli_env import run_in_process
from support.local_servers import free_port
from support.provider_server import ProviderServer, Reply, calls, error, slow, structured, text

TASK = Task(id="word-1", question="What is the code word 1?", tags=("word",), expected=("w1",))
CHECK = {"parts": ["the code word"], "missing": []}


def healthy(body: dict) -> Reply:
    """A provider that answers well: the closing check read, the question answered."""
    if body.get("response_format"):
        return structured(CHECK)
    return text("The code word is w1.")


def run_one(model: str, graph: str = "react", **config) -> dict:
    [record] = run_comparison([TASK], RunConfig(graphs=(graph,), model=model, reflection="rules", **config))
    return record


def closed_port() -> int:
    return free_port()  # nothing listens there


# --- every fault: its one line, its kind ------------------------------------------------------------------------

FAULTS = [
    ("server_error", lambda: error(503, "overloaded"), "model provider error: 503 Service Unavailable from"),
    ("rate_limit", lambda: error(429, "slow down"), "model provider error: 429 Too Many Requests from"),
    ("context_exceeded", lambda: error(500, "Context size has been exceeded."),
     "model provider error: 500 Internal Server Error from"),
    ("request_timeout", lambda: slow(3), "model provider error: no reply from"),
]


@pytest.mark.parametrize("graph", ["react", "create_agent"])
@pytest.mark.parametrize(("kind", "reply", "line"), FAULTS, ids=[f[0] for f in FAULTS])
def test_a_provider_fault_is_an_infrastructure_outcome_with_its_one_line_cause(provider, graph, kind, reply, line):
    with ProviderServer(then=lambda body: reply()) as server:
        model = provider(server, timeout=0.5)
        record = run_one(model, graph)
    assert record["status"] == "failed" and record["infra"] == kind and not record["success"]
    assert record["error"].startswith(line) and "\n" not in record["error"], record["error"]
    assert left_out(record) and record["model_calls"] >= 1


def test_a_server_that_cannot_be_reached_is_a_connection_outcome(provider, monkeypatch):
    with ProviderServer() as server:
        model = provider(server)
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")
    record = run_one(model)
    assert (record["status"], record["infra"]) == ("failed", "connection")
    assert record["error"].startswith("model provider error: cannot connect to http://127.0.0.1:"), record["error"]


@pytest.mark.parametrize("graph", ["react", "create_agent"])
def test_a_run_past_its_time_limit_is_a_task_timeout_and_a_refused_request_is_the_models_run(provider, graph):
    with ProviderServer(then=lambda body: slow(1.0, text("late"))) as server:
        record = run_one(provider(server), graph, task_timeout_s=0.3)
    assert (record["status"], record["infra"], record["error"]) == ("timed_out", "task_timeout",
                                                                     "task timed out after 0.3 s")
    assert record["model_calls"] == 1 and record["tokens_in"] > 0  # the call it made is charged
    # A request the provider refuses as bad (a 400 that is not about the context) is not the plumbing's: judged.
    with ProviderServer(then=lambda body: error(400, "unknown field 'foo'")) as server:
        record = run_one(provider(server), graph)
    assert record["status"] == "failed" and record["infra"] is None and not left_out(record)


@pytest.mark.parametrize(("line", "kind"), [
    ("APITimeoutError: Request timed out.", "request_timeout"),  # a baseline's raw error, in older records
    ("InternalServerError: Error code: 500 - {'error': 'Context size has been exceeded.'}", "context_exceeded"),
    ("RateLimitError: Error code: 429 - slow down", "rate_limit"),
    ("The model call failed: ValueError: No generations found in stream.", "empty_reply"),
    ("The model call failed: KeyError: 'x'", None),
    ("model provider error: 401 Unauthorized from https://api.openai.com/v1", None),
])
def test_records_written_before_the_field_are_classified_from_their_error(line, kind):
    assert infra_cause(line) == kind
    assert left_out({"error": line, "status": "failed"}) is (kind is not None)


# --- the baseline: the same bounds, re-runs and statuses ---------------------------------------------------------

@pytest.mark.parametrize("graph", ["react", "create_agent"])
def test_the_baseline_is_bounded_and_re_run_as_ours_are(provider, graph):
    with ProviderServer(error(503, "overloaded"), then=healthy) as server:
        model = provider(server, node_retries=1)
        record = run_one(model, graph, max_output_tokens=64)
        sent = [r.get("max_tokens") for r in server.requests if not r.get("response_format")]
    assert record["success"] and record["infra"] is None and record["status"] == "answered"
    assert sent[0] == sent[1] == 64  # the refused request and its re-run, both bounded
    with ProviderServer(then=lambda body: error(503, "overloaded")) as server:
        record = run_one(provider(server, node_retries=1), graph)
        asked = len(server.requests)
    assert asked == 2 and record["error"].endswith("(gave up after 2 attempts)"), record["error"]


# --- left out of the rates and tests, counted beside them -------------------------------------------------------

def offline_records(graphs=("react", "plan_solve")) -> list[dict]:
    tasks = [t for t in load_suite("default") if "compound" not in t.tags][:6]
    return run_comparison(tasks, RunConfig(graphs=graphs))


def test_infrastructure_outcomes_are_left_out_of_the_rates_and_the_paired_test_and_counted(tmp_path):
    records = offline_records()
    plain = summarize(records)
    react = [r for r in records if r["graph"] == "react"]
    for record, kind in zip(react[:2], ("server_error", "context_exceeded"), strict=True):
        record.update(status="failed", success=False, infra=kind, error=f"model provider error: {kind}")
    summary = summarize(records)
    a = summary["graphs"]["react"]
    assert (a["runs"], a["judged"], a["left_out"]) == (6, 4, 2)
    assert a["infra"] == {"server_error": 1, "context_exceeded": 1}
    judged_success = sum(r["success"] for r in react[2:]) / 4
    assert a["success_rate"] == pytest.approx(judged_success)
    [pair] = summary["pairs"]
    assert (pair["runs"], pair["left_out"]) == (plain["pairs"][0]["runs"] - 2, 2)
    text = markdown(records, summary=summary)
    assert "| react | 6 (2 left out) |" in text
    assert "| react | 4 of 6 | 2 (server_error 1, context_exceeded 1) | 0 |" in text
    assert "| plan_solve | 6 of 6 | 0 | 0 |" in text
    assert "Smallest detectable difference: none — 4 paired runs" in text
    write_report(records, tmp_path, plots=False)
    saved = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert saved["graphs"]["react"]["infra"] == a["infra"] and saved["pairs"][0]["left_out"] == 2
    assert saved["pairs"][0]["detectable"]["needed"] == 6


def test_the_smallest_detectable_difference_follows_the_runs():
    from reactgraph.evals.stats import detectable_difference

    assert detectable_difference(5)["floor"] is None
    d = detectable_difference(97)
    assert d["needed"] == 6 and d["floor"] == pytest.approx(6 / 97) and 0.06 < d["at_power"] < 0.1
    assert detectable_difference(24)["at_power"] > detectable_difference(200)["at_power"]


def test_fallback_plans_unchecked_answers_and_format_errors_are_counted_per_graph(provider):
    def prose(body: dict) -> Reply:  # a small model: prose wherever a plan, a check or the format was asked for
        return text("I think the code word is w1.")

    with ProviderServer(then=prose) as server:
        model = provider(server)
        planned = run_one(model, "plan_solve")
        formatted = run_one(model, "react", protocol="text")
    assert planned["fallback_plans"] == 1 and planned["coverage_by"] == "unchecked"
    assert formatted["format_errors"] >= 1 and formatted["stop_reason"] == "format"
    text_report = markdown([planned, formatted])
    assert "| plan_solve | 1 of 1 | 0 | 0 | 1 | 1 | 0 |" in text_report
    assert f"| react | 1 of 1 | 0 | 0 | 0 | 1 | {formatted['format_errors']} (1 runs stopped) |" in text_report


# --- what stopped runs spent -------------------------------------------------------------------------------------

def test_a_run_given_up_mid_call_is_charged_the_calls_it_made_and_the_prompt_in_flight(provider, monkeypatch):
    from reactgraph.evals import schedule

    monkeypatch.setattr(schedule, "GRACE_S", 0.3)
    usage = {"prompt_tokens": 500, "completion_tokens": 20, "total_tokens": 520}
    first = calls(("calculator", {"expression": "6*7"}))
    first.usage = usage
    with ProviderServer(first, slow(3, text("late"))) as server:
        record = run_one(provider(server), task_timeout_s=0.3)
    assert (record["status"], record["infra"], record["model_calls"]) == ("timed_out", "task_timeout", 2)
    assert record["tokens_out"] == 20 and record["tokens_in"] > 500  # the provider's count, and the prompt sent


def test_a_reply_without_usage_is_charged_the_estimate():
    from uuid import uuid4

    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.outputs import ChatGeneration, LLMResult

    from reactgraph.evals.spend import UsageMeter

    meter, with_usage, without = UsageMeter(), uuid4(), uuid4()
    for run_id in (with_usage, without):
        meter.on_chat_model_start({}, [[HumanMessage("What is the code word " * 20)]], run_id=run_id)
    assert meter.in_flight_tokens() > 0 and meter.counts(in_flight=True)["tokens_in"] == meter.in_flight_tokens()
    reported = AIMessage("w1", usage_metadata={"input_tokens": 7, "output_tokens": 3, "total_tokens": 10})
    meter.on_llm_end(LLMResult(generations=[[ChatGeneration(message=reported)]]), run_id=with_usage)
    meter.on_llm_end(LLMResult(generations=[[ChatGeneration(message=AIMessage("w1 " * 40))]]), run_id=without)
    counts = meter.counts(in_flight=True)
    assert meter.estimated == 1 and meter.in_flight_tokens() == 0
    assert counts["tokens_in"] > 7 + 50 and counts["tokens_out"] > 3 + 20


def test_the_cost_cap_is_passed_by_no_more_than_the_requests_in_flight(provider, tmp_path, monkeypatch):
    price = {"input": 1000, "output": 1000}  # USD per million tokens: a call of 1,000 + 100 tokens costs $1.10
    (tmp_path / "prices.json").write_text(json.dumps({"openai:test-model": price}), encoding="utf-8")

    def long_runs(body: dict) -> Reply:  # another calculator call each round: every run makes 6 calls
        rounds = sum(m["role"] == "tool" for m in body["messages"])
        reply = (structured(CHECK) if body.get("response_format") else
                 calls(("calculator", {"expression": f"6*{rounds}"})) if body.get("tools") else text("w1"))
        reply.usage = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}
        return reply

    tasks = [Task(id=f"t{n}", question=f"What is the code word {n}?") for n in range(6)]
    with ProviderServer(then=long_runs) as server:
        model = provider(server)
        monkeypatch.setenv("REACTGRAPH_PRICES", str(tmp_path / "prices.json"))
        records = run_comparison(tasks, RunConfig(graphs=("react",), model=model, reflection="rules",
                                                  max_iterations=5, concurrency=2, max_total_cost_usd=5.0))
    spent = sum(r["cost_usd"] for r in records)
    assert 5.0 <= spent <= 5.0 + 2 * 1.1 + 1e-6, spent  # at most one request in flight per running run
    cut = [r for r in records if r["status"] == "cut"]
    assert cut and all(r["cost_usd"] > 0 and r["error"].startswith("stopped at the cost cap") for r in cut)
    assert all(left_out(r) for r in cut) and summarize(records)["graphs"]["react"]["cut"] == len(cut)


# --- made again alone ------------------------------------------------------------------------------------------

def test_compare_retry_infra_makes_only_the_infrastructure_outcomes_again(tmp_path, monkeypatch, capfd):
    suite = tmp_path / "words.jsonl"
    suite.write_text("".join(json.dumps({"id": f"word-{n}", "question": f"What is the code word {n}?",
                                         "expected": [f"w{n}"]}) + "\n" for n in (1, 2, 3)), encoding="utf-8")
    down = {"word": "2"}

    def flaky(body: dict) -> Reply:
        if body.get("response_format"):
            return structured(CHECK)
        question = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if question.endswith(f"{down['word']}?"):
            return error(503, "overloaded")
        return text(f"The code word is w{question[-2]}.")

    args = ["compare", "--graphs", "react", "--suite", str(suite), "--model", "openai:test-model", "--reflection",
            "rules", "--no-plots", "--out", str(tmp_path / "run")]
    with ProviderServer(then=flaky) as server:
        env = {"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-test", "REACTGRAPH_NODE_RETRIES": "0",
               "REACTGRAPH_MODEL_RETRIES": "0"}
        first = run_in_process(monkeypatch, capfd, args, **env)
        assert first.returncode == 0 and "| react | 3 (1 left out) | 100% |" in first.stdout, first.stdout
        refused = run_in_process(monkeypatch, capfd, [*args, "--retry-infra"], **env)
        down["word"] = "none"
        before = len(server.requests)
        again = run_in_process(monkeypatch, capfd, [*args, "--resume", str(tmp_path / "run"), "--retry-infra"],
                               **env)
        asked = {next(m["content"] for m in r["messages"] if m["role"] == "user") for r in server.requests[before:]}
    assert refused.returncode == 2 and "--retry-infra" in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert again.returncode == 0, again.stderr
    assert asked == {"What is the code word 2?"}  # the others are read back, not asked again
    assert "- retried: 1 infrastructure outcome(s) of the earlier run made again" in again.stdout
    records, _ = read_records(tmp_path / "run" / "results.jsonl")
    assert len(records) == 3 and all(r["success"] and r["infra"] is None for r in records)
    assert "| react | 3 | 100% |" in again.stdout


def test_a_resumed_run_makes_the_runs_the_cost_cap_cut_again(monkeypatch):
    from reactgraph.evals.graphs import resolve_graphs
    from reactgraph.evals.schedule import execute, plan_runs

    tasks = [Task(id=f"t{n}", question=f"q{n}") for n in range(2)]
    plan = plan_runs(resolve_graphs("react"), tasks, [0], 1)
    made: list[str] = []

    def run_one(run, watch):
        made.append(run.task.id)
        return {"graph": "react", "task": run.task.id, "seed": 0, "repeat": 0, "status": "answered", "success": True}

    cut = {"graph": "react", "task": "t0", "seed": 0, "repeat": 0, "status": "cut", "success": False}
    kept = {"graph": "react", "task": "t1", "seed": 0, "repeat": 0, "status": "answered", "success": True}
    started = time.monotonic()
    outcome = execute(plan, run_one, model="offline", done=[cut, kept])
    assert made == ["t0"] and [r["status"] for r in outcome.records] == ["answered", "answered"]
    assert time.monotonic() - started < 10


def test_a_record_keeps_what_a_report_needs():
    [record] = run_comparison([TASK], RunConfig(graphs=("react",)))
    assert {"infra", "stop_reason", "fallback_plans", "format_errors"} <= set(record)
    assert record["infra"] is None and record["tokens"] > 0
