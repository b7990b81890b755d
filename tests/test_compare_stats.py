"""Comparisons that can be trusted: the intervals and paired tests against known values, `--seeds`, and what
`reactgraph compare` reports (summary.md, summary.json, the console, the plots' subtitles)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reactgraph.evals import (
    RunConfig,
    comparable,
    load_suite,
    mcnemar_exact,
    run_comparison,
    success_interval,
    summarize,
    wilson_interval,
    write_report,
)
from reactgraph.evals.report import markdown, subtitle
from reactgraph.evals.stats import holm, sign_flip_p

SMALL_SUITE = [
    {"id": "calc", "question": "计算 (15 + 27) * 3 等于多少", "tags": ["calc"], "number": 126},
    {"id": "search", "question": "什么是 LangChain？", "tags": ["search"], "expected": ["LangChain"]},
    {"id": "weather", "question": "北京和上海的天气分别怎么样？哪个城市更热？", "tags": ["weather"],
     "expected": ["上海", "12"]},
]


def records_for(graph: str, outcomes: list[bool], seed: int = 0, offset: int = 0) -> list[dict]:
    """Run records as the runner writes them, reduced to what the statistics read."""
    return [{"graph": graph, "task": f"t{i + offset}", "seed": seed, "repeat": 0, "success": ok, "tags": ["x"],
             "failure_mode": None if ok else "early_stop", "model": "offline", "model_label": "offline",
             "tool_failure_rate": 0.3, "model_calls": 1, "tool_calls": 1, "tool_failures": 0, "tokens_in": 1,
             "tokens_out": 1, "tokens": 2, "wall_s": 0.01, "iterations": 1} for i, ok in enumerate(outcomes)]


# --- the statistics against known values -------------------------------------------------------------------------

@pytest.mark.parametrize(("successes", "n", "low", "high"), [
    (81, 263, 0.2553, 0.3662),   # the textbook example (Wilson 1927; Newcombe 1998)
    (43, 63, 0.5600, 0.7841),
    (0, 10, 0.0, 0.2775),
    (10, 10, 0.7225, 1.0),
    (1, 2, 0.0945, 0.9055),
])
def test_the_wilson_interval_matches_known_values(successes, n, low, high):
    got = wilson_interval(successes, n)
    assert got == pytest.approx((low, high), abs=5e-5)
    assert wilson_interval(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(("only_a", "only_b", "p"), [
    (3, 9, 0.1460),  # 2 · P(Binom(12, ½) ≤ 3) = 2 · 299/4096
    (0, 5, 0.0625),
    (0, 7, 0.015625),
    (4, 4, 1.0),
    (1, 0, 1.0),
    (0, 0, 1.0),
    (2, 14, 0.004181),
])
def test_the_exact_mcnemar_test_matches_known_values(only_a, only_b, p):
    assert mcnemar_exact(only_a, only_b) == pytest.approx(p, abs=5e-5)
    assert mcnemar_exact(only_b, only_a) == mcnemar_exact(only_a, only_b)


@given(st.integers(0, 40), st.integers(0, 40))
def test_the_sign_flip_test_on_one_run_per_task_is_the_exact_mcnemar_test(only_a, only_b):
    assert sign_flip_p([1] * only_a + [-1] * only_b + [0] * 5) == pytest.approx(mcnemar_exact(only_a, only_b))


@given(st.lists(st.integers(-3, 3), max_size=9))
def test_the_sign_flip_test_equals_enumerating_every_flip(differences):
    nonzero = [d for d in differences if d]
    observed = abs(sum(nonzero))
    flips = list(itertools.product((1, -1), repeat=len(nonzero)))
    extreme = sum(abs(sum(s * d for s, d in zip(signs, nonzero, strict=True))) >= observed for signs in flips)
    assert sign_flip_p(differences) == pytest.approx(extreme / len(flips))


def test_holm_adjusts_in_order_and_keeps_the_input_order():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    assert holm([]) == []


# --- what a comparison says -------------------------------------------------------------------------------------

def test_a_three_point_gap_on_63_tasks_is_called_noise_and_a_clear_one_is_not():
    # 43 vs 41 of 63, the README's old 68 % against 65 %: 3 tasks won by a, 1 by b.
    a = [True] * 40 + [True] * 3 + [False] * 20
    b = [True] * 40 + [False] * 3 + [True] * 1 + [False] * 19
    c = [True] * 25 + [False] * 38  # loses 18 tasks a solves, wins none
    summary = summarize(records_for("a", a) + records_for("b", b) + records_for("c", c))
    assert summary["graphs"]["a"]["success_rate"] == pytest.approx(43 / 63)
    assert summary["graphs"]["a"]["interval"] == "wilson"
    low, high = summary["graphs"]["a"]["success_low"], summary["graphs"]["a"]["success_high"]
    assert (low, high) == pytest.approx(wilson_interval(43, 63))
    pairs = {(p["a"], p["b"]): p for p in summary["pairs"]}
    assert list(pairs) == [("a", "b"), ("a", "c"), ("b", "c")]
    ab = pairs[("a", "b")]
    assert (ab["a_better"], ab["b_better"], ab["tasks"]) == (3, 1, 63) and ab["p_value"] == pytest.approx(0.625)
    assert not ab["distinguishable"] and ab["verdict"] == "not distinguishable from noise"
    ac = pairs[("a", "c")]
    assert ac["test"] == "exact McNemar" and ac["p_value"] < 0.001 and ac["p_holm"] <= 3 * ac["p_value"]
    assert ac["distinguishable"] and ac["verdict"] == "a better than c"
    text = markdown(records_for("a", a) + records_for("b", b) + records_for("c", c))
    assert "| a | 63 | 68% | 56–78% |" in text
    assert "| a vs b | 63 | 3 | 1 | +3 pts | 0.625 | 0.625 | 0 | not distinguishable from noise |" in text
    assert "Distinguishable from noise (Holm-adjusted p < 0.05): a better than c; b better than c." in text


def test_several_seeds_bootstrap_over_tasks_and_pair_runs_by_task_and_seed():
    runs_a = records_for("a", [True, True, False, True] * 10, seed=1) + records_for("a", [True, False] * 20, seed=2)
    runs_b = records_for("b", [False, True, False, True] * 10, seed=1) + records_for("b", [False] * 40, seed=2)
    interval = success_interval(runs_a)
    assert interval["method"] == "bootstrap over tasks"
    assert interval["low"] < 50 / 80 < interval["high"] and interval == success_interval(runs_a)  # seeded
    summary = summarize(runs_a + runs_b)
    assert summary["seeds"] == [1, 2]
    (pair,) = summary["pairs"]
    assert pair["runs"] == 80 and pair["tasks"] == 40 and pair["test"].startswith("paired sign-flip")
    assert (pair["a_better"], pair["b_better"]) == (20, 0) and pair["distinguishable"]
    # Per-task differences are 2 (t0, t4, …: a won under both seeds) or 1: the test uses them as such.
    assert pair["p_value"] == pytest.approx(sign_flip_p([2] * 10 + [1] * 10))


def test_graphs_are_paired_only_on_the_runs_both_made():
    a = records_for("a", [True] * 10)
    b = records_for("b", [False] * 5) + records_for("b", [False] * 5, seed=9, offset=5)
    (pair,) = summarize(a + b)["pairs"]
    assert pair["runs"] == 5 and pair["tasks"] == 5 and pair["a_better"] == 5


def test_the_subtitle_names_suite_tasks_fault_rate_seeds_and_model():
    records = records_for("a", [True] * 4, seed=3) + records_for("a", [True] * 4, seed=4)
    assert subtitle(records, {"suite": "default"}) == (
        "suite default · 4 tasks · tool failure rate 0.3 · seeds 3–4 (2) · model offline\n"
        "control flow only — the scripted model's rules, not model quality")
    dated = [{**r, "finished_at": "2026-12-02T07:00:00Z"} for r in records]
    assert subtitle(dated, {"suite": "default"}).startswith("suite default · 4 tasks · tool failure rate 0.3 · "
                                                            "seeds 3–4 (2) · model offline · 2026-12-02\n")


# --- seeds through the runner and the CLI -----------------------------------------------------------------------

@pytest.fixture
def suite_file(tmp_path: Path) -> Path:
    path = tmp_path / "small.jsonl"
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in SMALL_SUITE), encoding="utf-8")
    return path


def test_seeds_repeat_the_run_and_each_record_carries_its_seed(suite_file):
    tasks = load_suite(suite_file)
    noisy = {"graphs": ("react",), "model": "offline-noisy:0.5"}
    both = run_comparison(tasks, RunConfig(**noisy, seed=5, seeds=2))
    assert [(r["seed"], r["task"]) for r in both] == [(5, "calc"), (5, "search"), (5, "weather"),
                                                      (6, "calc"), (6, "search"), (6, "weather")]
    one_by_one = run_comparison(tasks, RunConfig(**noisy, seed=5)) + run_comparison(tasks, RunConfig(**noisy, seed=6))
    assert comparable(both) == comparable(one_by_one)
    with pytest.raises(ValueError, match="seeds must be at least 1"):
        RunConfig(seeds=0)


def test_compare_with_seeds_reports_intervals_and_pair_verdicts_everywhere(suite_file, tmp_path, cli):
    out = tmp_path / "out"
    code, stdout, stderr = cli("compare", "--graphs", "react,reflexion", "--suite", str(suite_file), "--out", str(out),
                               "--seed", "1", "--seeds", "2", "--tool-failure-rate", "0.3")
    assert code == 0, stderr
    assert "× 2 seed(s)" in stderr and "seeds: 1–2 (2)" in stdout
    assert "| 95% interval |" in stdout and "## Are the differences real?" in stdout
    assert "| react vs reflexion | 3 |" in stdout
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["seeds"] == [1, 2] and summary["config"]["seed_values"] == [1, 2]
    assert summary["config"]["suite"] == str(suite_file)
    for graph in summary["graphs"].values():
        assert graph["runs"] == 6 and graph["tasks"] == 3
        assert 0 <= graph["success_low"] <= graph["success_rate"] <= graph["success_high"] <= 1
    (pair,) = summary["pairs"]
    assert pair["a"] == "react" and pair["b"] == "reflexion" and pair["runs"] == 6
    assert pair["verdict"] in (out / "summary.md").read_text(encoding="utf-8")
    results = [json.loads(x) for x in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted({r["seed"] for r in results}) == [1, 2] and len(results) == 12


def test_compare_refuses_zero_seeds_in_one_line(tmp_path, cli):
    code, out, err = cli("compare", "--seeds", "0", "--out", str(tmp_path / "out"))
    assert code == 2 and out == ""
    assert err.strip() == "error: seeds must be at least 1, not 0"


def test_the_report_writes_plots_with_one_summary(suite_file, tmp_path):
    records = run_comparison(load_suite(suite_file), RunConfig(graphs=("react",), seeds=2))
    written = write_report(records, tmp_path / "out", {"suite": "small"})
    assert [p.name for p in written["plots"]] == ["success.png", "tags.png", "cost.png"]
    assert "One graph only: nothing to compare." in written["markdown"]
