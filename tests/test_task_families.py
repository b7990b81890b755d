"""Task families that separate the paradigms' control flow (issue 36): the default suite's `family:` tasks, the
faults a task arranges for itself, a plan that fits the step limit, and what each family shows on the scripted
model — through the comparison runner and the compiled graphs, as a user runs them."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import pytest
from langchain_core.messages import HumanMessage

from reactgraph.evals import RunConfig, load_suite, run_comparison
from reactgraph.evals.families import FAMILIES, by_family, difference_table, differences, family_of
from reactgraph.evals.report import markdown
from reactgraph.evals.tasks import SuiteError
from reactgraph.graph import Context
from reactgraph.graph.plan_solve import build_plan_solve_graph
from reactgraph.tools import default_gateway

GRAPHS = ("react", "plan_solve", "plan_solve_replan")


@pytest.fixture(scope="module")
def family_tasks():
    return [t for t in load_suite("default") if any(tag.startswith("family:") for tag in t.tags)]


@pytest.fixture(scope="module")
def runs(family_tasks):
    """Every family task once through ReAct, Plan-and-Solve and Plan-and-Solve with replanning (scripted model)."""
    records = run_comparison(family_tasks, RunConfig(graphs=GRAPHS))
    table: dict[str, dict[str, dict]] = defaultdict(dict)
    for record in records:
        table[record["task"]][record["graph"]] = record
    return records, table


def test_the_default_suite_has_each_family_with_ten_tasks_or_more_in_both_languages(family_tasks):
    per_family = Counter(next(t[7:] for t in task.tags if t.startswith("family:")) for task in family_tasks)
    assert set(per_family) == set(FAMILIES)
    assert all(n >= 10 for n in per_family.values()), per_family
    for family in FAMILIES:
        languages = Counter(t.lang for t in family_tasks if f"family:{family}" in t.tags)
        assert languages["en"] >= 4 and languages["zh"] >= 4, (family, languages)


def test_a_task_may_make_a_tools_first_call_fail_or_take_the_tool_down(tmp_path):
    suite = tmp_path / "faults.jsonl"
    suite.write_text("\n".join(json.dumps(t) for t in [
        {"id": "first", "question": "What's the weather in Hangzhou?", "expected": ["11"],
         "faults": {"get_weather": "first"}},
        {"id": "down", "question": "What is 2 + 3 and what's the weather in Paris?", "expected": ["5"],
         "faults": {"get_weather": "down"}, "expect_status": "partial"},
    ]) + "\n")
    first, down = run_comparison(load_suite(suite), RunConfig(graphs=("react",)))
    # The first call failed as a passing fault does, and the model tried it again: answered from the second.
    assert first["success"] and first["injected_faults"] == {"scripted": 1} and first["status"] == "answered"
    assert first["tool_statuses"].get("error") == 1, first["tool_statuses"]
    # Down for the whole run: every call of it failed, the part it serves is named missing, the rest answered.
    assert down["success"] and down["status"] == "partial"
    assert down["injected_faults"]["scripted"] == down["tool_statuses"]["error"] >= 1


def test_a_fault_the_runner_does_not_know_is_refused_in_one_line(tmp_path):
    suite = tmp_path / "bad.jsonl"
    suite.write_text(json.dumps({"id": "x", "question": "What is 2 + 3?", "number": 5,
                                 "faults": {"calculator": "sometimes"}}) + "\n")
    with pytest.raises(SuiteError, match="'faults' must map tool names to one of first, down"):
        load_suite(suite)


@pytest.mark.parametrize("limit", [5, 3])
def test_a_plan_fits_the_step_limit_and_still_covers_every_look_up(limit):
    graph = build_plan_solve_graph(default_gateway())
    question = "北京、上海、广州、深圳、成都、杭州和西安的天气如何？哪个最冷？"
    result = graph.invoke({"messages": [HumanMessage(question)]}, context=Context(max_iterations=limit))
    assert 1 <= len(result["plan"]) <= limit
    assert result["status"] == "answered", result["final_answer"]
    for city in ("北京", "上海", "广州", "深圳", "成都", "杭州", "西安"):
        assert city in result["final_answer"]


def test_independent_look_ups_take_react_one_round_and_plan_and_solve_a_step_each(runs, family_tasks):
    _, table = runs
    for task in (t for t in family_tasks if "family:independent_lookups" in t.tags):
        react, plan = table[task.id]["react"], table[task.id]["plan_solve"]
        assert react["success"] and plan["success"], task.id
        assert react["iterations"] == 1 and plan["iterations"] > 1, task.id  # one round of parallel calls
        assert react["model_calls"] < plan["model_calls"], task.id


def test_a_first_call_that_fails_costs_react_a_round_and_plan_and_solve_a_retry_inside_the_step(runs, family_tasks):
    _, table = runs
    for task in (t for t in family_tasks if "family:first_tool_fails" in t.tags):
        for graph in GRAPHS:
            assert table[task.id][graph]["success"], (task.id, graph)
        react, plan = table[task.id]["react"], table[task.id]["plan_solve"]
        assert react["iterations"] == 2, task.id  # the failed call is made again in a round of its own
        # The same calls, the retry made inside the step: a one-look-up question is one step.
        assert plan["tool_calls"] == react["tool_calls"], task.id
        if react["tool_calls"] == 2:
            assert plan["iterations"] == 1, task.id


def test_when_a_tool_goes_down_replanning_drops_it_from_the_steps_left(runs, family_tasks):
    _, table = runs
    saved = 0
    for task in (t for t in family_tasks if "family:tool_goes_down" in t.tags):
        plan, replan = table[task.id]["plan_solve"], table[task.id]["plan_solve_replan"]
        assert all(table[task.id][g]["status"] == task.expect_status for g in GRAPHS), task.id
        assert replan["tool_calls"] <= plan["tool_calls"], task.id
        saved += plan["tool_calls"] - replan["tool_calls"]
    assert saved > 0  # the stale steps' calls to the dead tool that replanning did not make


def test_every_graph_declines_what_no_tool_can_answer(runs, family_tasks):
    _, table = runs
    for task in (t for t in family_tasks if "family:unanswerable" in t.tags):
        for graph in GRAPHS:
            record = table[task.id][graph]
            assert record["success"] and record["status"] == "no_answer", (task.id, graph, record["answer"])


def test_the_report_gives_each_family_and_each_graphs_difference_with_its_interval(runs):
    records, _ = runs
    report = markdown(records)
    assert "## Per task family (means per run)" in report and "### Against react" in report
    for family in FAMILIES:
        assert f"| {family} | plan_solve vs react |" in report
    assert set(by_family(records)) == set(FAMILIES)
    assert all(family_of(r) for r in records)
    table = difference_table(records)
    assert table.count("\n") == 1 + len(FAMILIES) * 2  # header, rule, two graphs against react per family


def test_a_difference_is_the_mean_over_shared_runs_with_an_interval_that_holds_it():
    def run(graph, task, seed, success, calls):
        return {"graph": graph, "task": task, "seed": seed, "repeat": 0, "success": success, "model_calls": calls,
                "iterations": 1, "tokens": 10, "wall_s": 0.1, "tags": ["family:independent_lookups"]}

    records = [run("a", f"t{i}", s, True, 2) for i in range(6) for s in range(3)]
    records += [run("b", f"t{i}", s, i != 0, 5 + s) for i in range(6) for s in range(3)]
    records += [run("b", "only-b", 0, True, 1)]  # made by one graph only: not compared
    found = {d.measure: d for d in differences(records, "a", "b")}
    assert found["success"].runs == 18 and found["success"].mean == pytest.approx(-3 / 18)
    assert found["success"].low <= found["success"].mean <= found["success"].high
    calls = found["model calls"]
    assert calls.mean == pytest.approx(4.0) and calls.clear and calls.low > 0
    assert not found["tokens"].clear  # no difference at all: the interval is [0, 0], which does not leave 0 out
