"""The `trajectory` checker: a run's tool calls judged by LangChain's agentevals trajectory match, in each of its
modes, as the suites use it (the default suite's knowledge-base and multi-city weather tasks)."""

from __future__ import annotations

import itertools
import json
import sys

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from reactgraph.evals import RunConfig, SuiteError, Task, check, load_suite, run_comparison
from support.scripted import ScriptedChatModel, call, tool_reply


def steps(*calls: tuple[str, dict]) -> list[dict]:
    return [{"node": "act", "action": name, "action_input": args, "status": "ok"} for name, args in calls]


BJ, SH, CALC = ("get_weather", {"city": "北京"}), ("get_weather", {"city": "上海"}), ("calculator", {"expression": "1"})


def judged(mode: str, made: list[tuple[str, dict]], args: str = "exact") -> bool:
    reference = [{"name": "get_weather", "args": {"city": "北京"}}, {"name": "get_weather", "args": {"city": "上海"}}]
    task = Task(id="t", question="q", checker="trajectory", params={"calls": reference, "mode": mode, "args": args})
    return check(task, "an answer", steps(*made))


@pytest.mark.parametrize(("mode", "made", "verdict"), [
    ("strict", [BJ, SH], True), ("strict", [SH, BJ], False), ("strict", [BJ, SH, CALC], False),
    ("unordered", [SH, BJ], True), ("unordered", [SH, BJ, CALC], False), ("unordered", [BJ], False),
    ("superset", [CALC, SH, BJ], True), ("superset", [BJ, CALC], False),
    ("subset", [SH], True), ("subset", [], True), ("subset", [BJ, CALC], False),
])
def test_each_agentevals_mode_judges_the_runs_calls(mode, made, verdict):
    assert judged(mode, made) is verdict


def test_arguments_count_only_when_the_task_asks():
    beijing_in_english = [("get_weather", {"city": "Beijing"}), SH]
    assert not judged("unordered", beijing_in_english, args="exact")
    assert judged("unordered", beijing_in_english, args="ignore")


@pytest.mark.parametrize(("params", "message"), [
    ({"calls": []}, "'calls' must be 1–50 objects with a 'name' (and 'args')"),
    ({"calls": [{"name": "x"}], "mode": "fuzzy"}, "'mode' must be one of strict, unordered, subset, superset"),
    ({"calls": [{"name": "x"}], "args": "loose"}, "'args' must be one of ignore, exact, subset, superset"),
    ({"calls": [{"name": "x"}], "order": "any"}, "unknown parameter(s) order"),
])
def test_a_bad_trajectory_is_refused_with_its_line(tmp_path, params, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"id": "a", "question": "q", "checker": "trajectory", "params": params}) + "\n")
    with pytest.raises(SuiteError) as refused:
        load_suite(path)
    assert str(refused.value) == f"bad.jsonl, line 1: trajectory: {message}"


def test_without_agentevals_a_suite_that_needs_it_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "agentevals", None)  # as if it were not installed
    with pytest.raises(SuiteError, match=r"default\.jsonl, line \d+: the trajectory checker needs agentevals: "
                                         r"pip install 'react-graph\[evals\]'"):
        load_suite("default")


def test_the_default_suite_asks_its_knowledge_base_and_weather_tasks_for_their_tools():
    tasks = {t.id: t for t in load_suite("default")}
    assert tasks["rag-concurrency-en"].params == {"calls": [{"name": "rag_search"}], "mode": "superset"}
    assert tasks["weather-3cities-zh"].params["calls"] == [{"name": "get_weather"}] * 3


def _answers_rag(use_the_tool: bool) -> ScriptedChatModel:
    def reply(messages: list[BaseMessage]) -> AIMessage:
        if messages[-1].type == "human" and use_the_tool:
            return tool_reply("look it up", call("rag_search", query="tool calls in flight"))
        return AIMessage("At most 5 tool calls are in flight at once.")
    return ScriptedChatModel(messages=itertools.repeat(reply))


@pytest.mark.parametrize("use_the_tool", [True, False])
def test_a_right_answer_from_outside_the_documents_fails_the_knowledge_base_task(use_the_tool):
    task = next(t for t in load_suite("default") if t.id == "rag-concurrency-en")
    config = RunConfig(graphs=("react",), reflection="rules")
    (record,) = run_comparison([task], config, model=_answers_rag(use_the_tool))
    assert "5" in record["answer"] and record["success"] is use_the_tool
