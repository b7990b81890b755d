"""The evaluation harness as its users meet it: suites, the runner and its reports, fault injection, the noisy
model, and `reactgraph compare` end to end."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from langchain_core.messages import HumanMessage

from reactgraph.evals import (
    GRAPHS,
    FaultPlan,
    GraphEntry,
    RunConfig,
    SuiteError,
    Task,
    UnknownGraphError,
    available_graphs,
    check,
    comparable,
    load_suite,
    register_graph,
    resolve_graphs,
    run_comparison,
    summarize,
    write_report,
)
from reactgraph.evals.faults import FaultInjector
from reactgraph.evals.metrics import FAILURE_MODES
from reactgraph.graph import Context, build_react_graph
from reactgraph.models.loader import ModelConfigError, load_chat_model, parse_spec
from reactgraph.models.offline import OfflineChatModel
from reactgraph.models.offline.model import NoisyOfflineChatModel, parse_noisy_spec
from reactgraph.tools import ToolError, default_gateway
from support.forked_commands import forked_run

SMALL_SUITE = [
    {"id": "calc", "question": "计算 (15 + 27) * 3 等于多少", "tags": ["calc"], "number": 126},
    {"id": "weather", "question": "北京和上海的天气分别怎么样？哪个城市更热？", "tags": ["weather", "multi_hop"],
     "expected": ["上海", "12"]},
    {"id": "search", "question": "什么是 LangChain？", "tags": ["search"], "expected": ["LangChain"],
     "expected_any": ["framework", "框架"]},
    {"id": "chain", "question": "Python 诞生于哪一年？到 2026 年它已经诞生了多少年？如果一个程序员从它诞生那年开始"
                                "每天写10 行代码，到现在一共写了多少行代码（按每年 365 天计算）？",
     "tags": ["multi_hop", "calc"], "expected": ["1991", "35", "127750"]},
]
RECORD_FIELDS = {"graph", "task", "tags", "repeat", "seed", "model", "model_label", "success", "answer", "status",
                 "failure_mode", "model_calls", "tool_calls", "tool_failures", "unknown_tool_calls", "tokens_in",
                 "tokens_out", "tokens", "wall_s", "iterations", "tool_failure_rate", "injected_faults"}


@pytest.fixture
def suite_file(tmp_path: Path) -> Path:
    path = tmp_path / "small.jsonl"
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in SMALL_SUITE), encoding="utf-8")
    return path


def reactgraph(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "REACTGRAPH_MODEL": "", "COLUMNS": "200"}
    return forked_run(list(args), env, timeout=120)


# --- suites and checks -----------------------------------------------------------------------------------------

def test_the_default_suite_is_bilingual_tagged_and_holds_the_issue_questions():
    tasks = load_suite("default")
    assert len(tasks) >= 40 and len({t.id for t in tasks}) == len(tasks)
    assert {t.lang for t in tasks} == {"zh", "en"}
    tags = {g for t in tasks for g in t.tags}
    assert {"multi_hop", "calc", "weather", "search", "rag", "time", "error_recovery"} <= tags
    questions = " ".join(t.question for t in tasks)
    for must in ("现在几点了？", "北京和上海的天气分别怎么样？哪个城市更热？", "计算 (15 + 27) * 3 等于多少",
                 "什么是 LangChain？", "每天写 10 行代码", "苹果公司的现任 CEO 叫什么名字？他今年多少岁了？"):
        assert must in questions
    assert "127750" in next(t for t in tasks if "每天写 10 行代码" in t.question).expected


def test_the_react_graph_answers_most_of_the_default_suite_offline():
    records = run_comparison(load_suite("default"), RunConfig(graphs=("react",)))
    summary = summarize(records)["graphs"]["react"]
    assert summary["success_rate"] >= 0.85, [(r["task"], r["answer"][:80]) for r in records if not r["success"]]
    by_id = {r["task"]: r for r in records}
    for must_pass in ("time-now-zh", "weather-bj-sh-zh", "calc-paren-zh", "search-langchain-zh", "multi-python-zh",
                      "multi-ceo-age-zh"):
        assert by_id[must_pass]["success"], by_id[must_pass]["answer"]


def test_answers_are_checked_by_substring_number_pattern_and_named_checker():
    task = Task(id="t", question="q", expected=("127750",), number=35, pattern=r"\b1991\b")
    assert check(task, "1991 年，35 年，127,750 行")
    assert not check(task, "1991 年，36 年，127750 行")
    assert check(Task(id="n", question="q", number=42.5, tolerance=0.01), "17% of 250 = 42.50")
    age = Task(id="a", question="q", checker="age", params={"names": ["Tim Cook", "库克"], "born": "1960-11-01"})
    clock_says = [{"action": "get_time", "status": "ok", "observation": json.dumps({"date": "2026-03-01"})}]
    assert check(age, "蒂姆·库克现在 65 岁", clock_says) and check(age, "Tim Cook is 66 (2026 - 1960)", clock_says)
    assert not check(age, "Tim Cook is 70", clock_says) and not check(age, "Steve Jobs is 65", clock_says)
    now = datetime.now(ZoneInfo("Asia/Tokyo"))
    clock = Task(id="c", question="q", checker="clock", params={"tz": "Asia/Tokyo"})
    assert check(clock, f"It is {now:%H:%M} in Tokyo") and check(clock, f"东京现在{now.hour}点{now.minute:02d}分")
    assert not check(Task(id="e", question="q", expected=("x",)), "")


@pytest.mark.parametrize(("line", "message"), [
    ('{"id": "a", "question": "q"}', "give at least one of"),
    ('{"id": "a", "question": "q", "checker": "psychic"}', "unknown checker 'psychic'"),
    ('{"id": "a", "question": "q", "expected": "x", "colour": "red"}', "unknown field(s) colour"),
    ("not json", "line 1"),
])
def test_a_bad_suite_line_is_named_with_its_line_number(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(SuiteError, match=r"bad\.jsonl, line 1") as caught:
        load_suite(path)
    assert message in str(caught.value)


# --- the runner and its outputs ----------------------------------------------------------------------------------

def test_the_runner_writes_jsonl_markdown_and_plots_with_every_field(suite_file, tmp_path):
    config = RunConfig(graphs=("react",), repeat=1, seed=3)
    records = run_comparison(load_suite(suite_file), config)
    written = write_report(records, tmp_path / "out", config.describe())
    lines = [json.loads(x) for x in written["results"].read_text(encoding="utf-8").splitlines()]
    assert len(lines) == len(SMALL_SUITE) and all(set(r) >= RECORD_FIELDS for r in lines)
    assert all(r["model"] == "offline" and "not an LLM" in r["model_label"] for r in lines)
    assert all(r["success"] and r["failure_mode"] is None for r in lines)
    assert all(r["model_calls"] >= 2 and r["tokens_in"] > 0 and r["tokens_out"] > 0 for r in lines)
    assert [r["tool_calls"] for r in lines] == [1, 2, 1, 3]
    summary = written["summary"].read_text(encoding="utf-8")
    assert "| react | 4 | 100% |" in summary and "| multi_hop |" in summary and "not model quality" in summary
    assert [p.name for p in written["plots"]] == ["success.png", "tags.png", "cost.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written["plots"])
    assert json.loads(written["summary_json"].read_text())["models"] == ["offline"]


def test_the_same_seed_gives_the_same_numbers_and_another_seed_other_ones(suite_file):
    tasks = load_suite(suite_file)

    def run(seed: int):
        return run_comparison(tasks, RunConfig(graphs=("react",), model="offline-noisy:0.4", repeat=3, seed=seed,
                                               faults=FaultPlan(failure_rate=0.3, latency_ms=1)))

    first = run(11)
    assert comparable(first) == comparable(run(11))
    assert comparable(first) != comparable(run(12))
    assert any(r["tool_failures"] or r["unknown_tool_calls"] or r["invalid_args_calls"] for r in first)


def test_at_failure_rate_one_every_tool_call_fails_and_is_recorded_as_such(suite_file):
    records = run_comparison(load_suite(suite_file), RunConfig(graphs=("react",), faults=FaultPlan(failure_rate=1.0)))
    for record in records:
        assert not record["success"] and record["failure_mode"] in ("tool_error", "limit")
        assert record["tool_calls"] == record["tool_failures"] > 0
        # Every call that reached a tool met an injected fault; the rest were refused by the open breaker.
        assert sum(record["injected_faults"].values()) == record["tool_statuses"]["error"] > 0
        assert set(record["tool_statuses"]) <= {"error", "circuit_open"}
    assert set(FAILURE_MODES) >= {r["failure_mode"] for r in records}


async def test_injected_faults_do_not_depend_on_the_order_of_calls():
    plan = FaultPlan(failure_rate=0.5)
    calculator = next(m for m in default_gateway().registry if m.name == "calculator")
    expressions = [f"{i} + 1" for i in range(12)]

    async def outcomes(order):
        run = FaultInjector(plan, "key").wrap(calculator).run
        seen = {}
        for expression in order:
            try:
                seen[expression] = (await run(expression=expression))["result"]
            except ToolError as exc:
                seen[expression] = type(exc).__name__
        return [seen[e] for e in expressions]

    forward = await outcomes(expressions)
    assert forward == await outcomes(expressions[::-1])
    assert {"ToolError", "TransientToolError"} <= set(forward) and any(isinstance(x, int) for x in forward)


def test_a_graph_registered_by_a_user_is_compared_like_the_built_in_ones(suite_file):
    register_graph(GraphEntry("react_rules", "ReAct with rule-based reflection", build_react_graph,
                              context={"reflection": "rules", "closing_check": False}))
    try:
        records = run_comparison(load_suite(suite_file)[:2], RunConfig(graphs=("react", "react_rules")))
        assert [r["graph"] for r in records] == ["react", "react", "react_rules", "react_rules"]
        assert all(r["success"] for r in records)
        rules = sum(r["model_calls"] for r in records if r["graph"] == "react_rules")
        # no reflection calls, nor the closing self-check that would stand in for them
        assert rules < sum(r["model_calls"] for r in records if r["graph"] == "react")
    finally:
        GRAPHS.pop("react_rules")
    with pytest.raises(UnknownGraphError, match="unknown graph 'nope'"):
        resolve_graphs("react,nope")
    assert "react" in available_graphs()


# --- the noisy model -----------------------------------------------------------------------------------------------

def test_noisy_specs_load_the_noisy_model_and_bad_ones_are_one_line_errors():
    assert parse_noisy_spec("offline-noisy:0.25") == (0.25, "0") and parse_noisy_spec("offline:noisy=1@x") == (1.0, "x")
    assert parse_spec("offline-noisy:0.25")[0] == "offline"
    model = load_chat_model("offline:noisy=0.5")
    assert isinstance(model, NoisyOfflineChatModel) and model.noise == 0.5
    assert type(load_chat_model("offline")) is OfflineChatModel
    with pytest.raises(ModelConfigError, match="from 0 to 1"):
        load_chat_model("offline-noisy:abc")


@pytest.mark.parametrize("protocol", ["tools", "text"])
def test_a_noisy_model_that_always_errs_gets_a_call_of_every_reply_wrong(protocol):
    graph = build_react_graph(model=NoisyOfflineChatModel(noise=1.0, seed="s"))
    result = graph.invoke({"messages": [HumanMessage("北京和上海的天气分别怎么样？哪个城市更热？")]},
                          context=Context(protocol=protocol))
    rounds: dict[int, set[str]] = {}
    for step in result["steps"]:
        if step["node"] == "act":
            rounds.setdefault(step["step"], set()).add(step["status"])
    # Every tool-calling reply gets one of its calls wrong.
    assert rounds and all(statuses & {"unknown_tool", "invalid_args"} for statuses in rounds.values())


def test_a_noisy_model_that_never_errs_is_the_scripted_model():
    assert load_chat_model("offline-noisy:0").invoke("计算 1 + 1").content == OfflineChatModel().invoke(
        "计算 1 + 1").content


# --- the command line --------------------------------------------------------------------------------------------

def test_compare_end_to_end_writes_the_outputs_and_prints_the_table(suite_file, tmp_path):
    out = tmp_path / "out"
    done = reactgraph("compare", "--graphs", "react", "--suite", str(suite_file), "--out", str(out),
                      "--seed", "1", "--repeat", "1", "--tool-failure-rate", "0")
    assert done.returncode == 0, done.stderr
    assert "| react | 4 | 100% |" in done.stdout and "## Success rate per tag" in done.stdout
    assert {p.name for p in out.iterdir()} == {"results.jsonl", "run.json", "summary.md", "summary.json",
                                               "success.png", "tags.png", "cost.png"}
    assert "wrote" in done.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--graphs", "react,nosuch"], "error: unknown graph 'nosuch': choose from react"),
    (["--suite", "nosuch"], "error: unknown suite 'nosuch'"),
    (["--tool-failure-rate", "2"], "error: tool failure rate must be between 0 and 1"),
    (["--model", "offline-noisy:7"], "error: noisy offline model"),
])
def test_compare_reports_a_bad_option_in_one_line(tmp_path, args, message, cli):
    code, out, err = cli("compare", "--out", str(tmp_path / "out"), *args)
    assert code == 2 and out == ""
    assert err.startswith(message) and len(err.strip().splitlines()) == 1, err


def test_the_noisy_offline_model_keeps_its_own_draws_and_records_no_provider_seed():
    """Its `seed` field is its own (reseeded from the run's key), not a provider's sampling seed."""
    config = RunConfig(graphs=("react",), model="offline-noisy:0.3", seeds=1)
    tasks = [t for t in load_suite("default") if not t.id.startswith("time")][:3]  # no clock in the answers
    records = run_comparison(tasks, config)
    assert all(r["provider_seed"] is None for r in records)
    assert comparable(records) == comparable(run_comparison(tasks, config))
