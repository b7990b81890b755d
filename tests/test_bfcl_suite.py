"""`--suite bfcl:<category>`: BFCL's data read from the bfcl-eval wheel, its function docs offered as schema-only
tools, the calls scored, and the tool-call accuracy and the data's NOTICE in the report — through `reactgraph
compare` and the evals' Python API, on the offline model, a scripted model and the local OpenAI-compatible server.

The wheel: `$REACTGRAPH_BFCL_WHEEL` (.ci/run downloads it with its other installs, so no test talks to the
registry there); run outside CI, the first test downloads it once (pip download --no-deps) into pytest's cache.
A failed download fails the test with the command that gets the wheel; nothing is skipped.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from reactgraph.evals import RunConfig, SuiteError, load_bfcl, load_suite, run_comparison, write_report
from reactgraph.evals.bfcl import (
    BFCL_VERSION,
    WHEEL_ENV,
    download_wheel,
    find_wheel,
    recorded_gateway,
    score_calls,
    tool_name,
)
from support.cli_env import clean_env, run_in_process
from support.forked_commands import forked_run
from support.provider_server import ProviderServer, calls, closing_check, text, verdict
from support.scripted import ScriptedChatModel, call, tool_reply

# The first three simple tasks (simple_python_0..2) and the first two parallel ones, by a phrase of their question.
TRIANGLE = ("triangle with a base of 10", [("calculate_triangle_area", {"base": 10, "height": 5})])
FACTORIAL = ("factorial of 5", [("math_factorial", {"number": 5})])
HYPOT_WRONG_TYPE = ("hypotenuse", [("math_hypot", {"x": 4.0, "y": 5})])  # a float for an integer: wrong
SONGS = ("Taylor Swift and Maroon 5", [("spotify_play", {"artist": "maroon 5", "duration": 15}),
                                       ("spotify_play", {"artist": "Taylor Swift", "duration": 20})])
EM_ONE_CALL = ("electromagnetic force", [("calculate_em_force", {"b_field": 5, "area": 2, "d_time": 4})])


@pytest.fixture(scope="module")
def bfcl_wheel(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.environ.get(WHEEL_ENV):
        return find_wheel(os.environ[WHEEL_ENV])
    cache = getattr(request.config, "cache", None)
    folder = cache.mkdir("bfcl-eval") if cache is not None else tmp_path_factory.mktemp("bfcl-eval")
    try:
        return find_wheel(folder)
    except SuiteError:  # not there yet: one download, as compare does on first use
        return download_wheel(folder, print)


def test_every_category_loads_and_its_possible_answers_score_as_correct(bfcl_wheel):
    tasks = load_bfcl("bfcl:all", wheel=bfcl_wheel)
    counts = {tag: sum(tag in t.tags for t in tasks) for tag in {g for t in tasks for g in t.tags}}
    assert counts == {"bfcl:simple": 400, "bfcl:multiple": 200, "bfcl:parallel": 200, "bfcl:parallel_multiple": 200}
    assert f"bfcl_eval {BFCL_VERSION} wheel (licence: Apache 2.0" in tasks[0].source
    for task in tasks:
        recorded_gateway(task.tools)  # every function doc becomes a valid JSON-schema tool
        expected = [_first_allowed(task.tools, entry) for entry in task.expected_calls]
        assert score_calls(list(task.tools), list(task.expected_calls), expected).correct, task.id


def _first_allowed(docs: tuple[dict[str, Any], ...], entry: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The call an entry of the possible answers describes, with the first allowed value of each parameter."""
    ((name, allowed),) = entry.items()
    known = next(d for d in docs if d["name"] == name)["parameters"]["properties"]

    def pick(values: list[Any]) -> Any:
        value = next(v for v in values if v != "")
        if isinstance(value, dict):
            return {k: pick(vs) for k, vs in value.items() if any(v != "" for v in vs)}
        return [pick([v]) for v in value] if isinstance(value, list) and value and isinstance(value[0], dict) else value

    return tool_name(name), {p: pick(vs) for p, vs in allowed.items() if p in known and any(v != "" for v in vs)}


def test_a_bad_category_or_wheel_is_one_line_naming_the_way_out(bfcl_wheel, tmp_path, monkeypatch):
    with pytest.raises(SuiteError, match="unknown BFCL category java: use bfcl:<category> with one or more of simple"):
        load_suite("bfcl:java")
    monkeypatch.setenv(WHEEL_ENV, str(tmp_path))
    with pytest.raises(SuiteError, match=r"no bfcl_eval-\*\.whl there .*pip download --no-deps .*bfcl-eval=="):
        load_suite("bfcl:simple")
    monkeypatch.setenv(WHEEL_ENV, str(bfcl_wheel))
    assert [t.id for t in load_bfcl("bfcl:simple,parallel", limit=2)] == [
        "simple_python_0", "simple_python_1", "parallel_0", "parallel_1"]


def test_compare_on_the_offline_model_scores_its_missing_calls_and_credits_the_data(bfcl_wheel, tmp_path):
    out = tmp_path / "out"
    done = forked_run(["compare", "--suite", "bfcl:simple", "--limit", "3", "--graphs", "react", "--out", str(out),
                       "--no-plots"], clean_env(REACTGRAPH_BFCL_WHEEL=str(bfcl_wheel), COLUMNS="200"), timeout=120)
    assert done.returncode == 0, done.stderr
    assert "| react | 0% (0/3) | 0% (0/3) |" in done.stdout  # the offline model knows none of BFCL's functions
    assert "- NOTICE: BFCL data: Berkeley Function Calling Leaderboard" in done.stdout
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["task"], r["calls_correct"], r["call_error"]) for r in records] == [
        (f"simple_python_{i}", False, "expected 1 call(s), got 0") for i in range(3)]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tool_call_accuracy"]["react"]["bfcl:simple"] == {"runs": 3, "correct": 0, "accuracy": 0.0}
    assert "Apache 2.0" in summary["notices"][0]


def _answers(*cases: tuple[str, list[tuple[str, dict[str, Any]]]]):
    return lambda question: next((made for phrase, made in cases if phrase in question), [])


def _scripted(answers) -> ScriptedChatModel:
    """Calls the functions the question's case names on the first turn, then answers in words."""
    def reply(messages: list[BaseMessage]) -> AIMessage:
        if messages[-1].type != "human":
            return AIMessage("Done: the calls are recorded.")
        made = answers(messages[-1].text)
        return tool_reply("calling", *[call(n, f"c{i}", **args) for i, (n, args) in enumerate(made)])
    return ScriptedChatModel(messages=itertools.repeat(reply))


def test_the_python_api_scores_right_and_wrong_calls_of_a_scripted_model(bfcl_wheel, tmp_path):
    tasks = load_bfcl("bfcl:simple,parallel", limit=2, wheel=bfcl_wheel)
    model = _scripted(_answers(TRIANGLE, FACTORIAL, SONGS, EM_ONE_CALL))
    records = run_comparison(tasks, RunConfig(graphs=("react",), reflection="rules"), model=model)
    assert [(r["task"], r["success"], r["calls_correct"]) for r in records] == [
        ("simple_python_0", True, True), ("simple_python_1", True, True),
        ("parallel_0", True, True),  # the two calls in the other order, one artist in lower case: still right
        ("parallel_1", False, False)]
    assert records[3]["call_error"] == "expected 2 call(s), got 1"
    written = write_report(records, tmp_path, {"suite": "bfcl:simple,parallel"}, plots=False)
    assert "| react | 75% (3/4) | 50% (1/2) | 100% (2/2) |" in written["markdown"]


def _server_replies(answers):
    """The local server's side: the question's calls, then reflection and closing checks that pass, then words."""
    def respond(body: dict[str, Any]):
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("name")
        if schema:
            return verdict(enough=True) if schema == "ReflectionVerdict" else closing_check(["the call"])
        last = body["messages"][-1]
        if last["role"] == "user" and body.get("tools"):
            return calls(*answers(json.dumps(last["content"], ensure_ascii=False)))
        return text("Done: the call is recorded.")
    return respond


def test_compare_through_the_openai_compatible_server_scores_its_calls(bfcl_wheel, tmp_path, monkeypatch, capfd):
    with ProviderServer(then=_server_replies(_answers(TRIANGLE, FACTORIAL, HYPOT_WRONG_TYPE))) as server:
        done = run_in_process(monkeypatch, capfd, [
            "compare", "--suite", "bfcl:simple", "--limit", "3", "--graphs", "react", "--model", "openai:test-model",
            "--out", str(tmp_path), "--no-plots"], OPENAI_BASE_URL=server.openai_url, OPENAI_API_KEY="sk-test",
            REACTGRAPH_MODEL_RETRIES="0", REACTGRAPH_BFCL_WHEEL=str(bfcl_wheel))
        offered = server.tool_names(0)
    assert done.returncode == 0, done.stderr
    assert offered == ["calculate_triangle_area"]  # the task's function alone, none of the built-in tools
    assert "| react | 67% (2/3) | 67% (2/3) |" in done.stdout
    records = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert records[2]["call_error"] == "no call matches math_hypot: 'x': expected integer, got float (4.0)"


ORDER_TASK = {"id": "order", "question": "Order two pizzas to Main St 1.", "tags": ["own"],
              "tools": [{"name": "shop.order", "description": "Order food.", "parameters": {"type": "dict",
                         "properties": {"item": {"type": "string"}, "count": {"type": "integer"},
                                        "address": {"type": "string"}}, "required": ["item", "count"]}}],
              "expected_calls": [{"shop.order": {"item": ["pizza"], "count": [2], "address": ["Main St 1", ""]}}]}


def test_a_jsonl_suite_may_give_its_own_function_docs_and_expected_calls(tmp_path):
    path = tmp_path / "own.jsonl"
    bad = {**ORDER_TASK, "id": "bad", "tools": [{"name": "shop order!", "parameters": {"type": "dict"}}]}
    path.write_text(json.dumps(bad) + "\n")
    with pytest.raises(SuiteError, match=r"own\.jsonl, line 1: tool name 'shop order!' must be"):
        load_suite(path)
    path.write_text(json.dumps(ORDER_TASK) + "\n")
    right = _scripted(_answers(("pizzas", [("shop_order", {"item": "Pizza", "count": 2})])))
    wrong = _scripted(_answers(("pizzas", [("shop_order", {"item": "pizza", "count": 2, "tip": 1})])))
    config = RunConfig(graphs=("react",), reflection="rules")
    (good,) = run_comparison(load_suite(path), config, model=right)
    (missed,) = run_comparison(load_suite(path), config, model=wrong)
    assert (good["success"], good["tool_statuses"]) == (True, {"ok": 1})
    assert (missed["success"], missed["call_error"]) == (False, "no call matches shop_order: unexpected argument 'tip'")


def test_the_offline_model_through_the_python_api_makes_no_bfcl_call(bfcl_wheel):
    records = run_comparison(load_bfcl("bfcl:simple", limit=3, wheel=bfcl_wheel), RunConfig(graphs=("react",)))
    assert [(r["success"], r["calls_correct"], r["tool_calls"]) for r in records] == [(False, False, 0)] * 3
