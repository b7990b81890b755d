"""Reflection at no extra call (`reflection="inline"`) and the baselines users know (`create_agent`, plain ReAct)
in `compare`: on the offline model and through the local OpenAI-compatible server, from Python and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph.evals import (
    GRAPHS,
    FaultPlan,
    GraphEntry,
    RunConfig,
    Task,
    UnknownGraphError,
    available_graphs,
    register_graph,
    resolve_graphs,
    run_comparison,
)
from reactgraph.evals.baselines import build_create_agent
from reactgraph.graph import Context, build_react_graph
from reactgraph.testing import FunctionModel, RequestInfo
from support.provider_server import ProviderServer, calls, text

SUITE = [
    {"id": "calc", "question": "计算 (15 + 27) * 3 等于多少", "tags": ["calc"], "number": 126},
    {"id": "weather", "question": "北京和上海的天气分别怎么样？哪个城市更热？", "tags": ["weather"],
     "expected": ["上海", "12"]},
    {"id": "compound", "question": "What is the weather in Atlantis and what is 6 * 6?", "tags": ["compound"],
     "expected": ["36"], "expect_status": "partial"},
]
BASELINES = ("react", "react_inline", "react_plain", "create_agent")


def verdict_args(enough: bool = False, parts: list[str] | None = None, missing: list[str] | None = None) -> dict:
    return {"enough_information": enough, "tool_error": False, "need_other_tool": False, "repeated_call": False,
            "note": "ok", "parts": list(parts or []), "missing": list(missing or [])}


@pytest.fixture
def suite_file(tmp_path: Path) -> Path:
    path = tmp_path / "small.jsonl"
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in SUITE[:1]), encoding="utf-8")
    return path


def by_graph(records: list[dict]) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for record in records:
        grouped.setdefault(record["graph"], []).append(record)
    return grouped


# --- the offline model --------------------------------------------------------------------------------------------
# `compare` runs a suite on a model spec, the offline model by default: these tests are the comparison a user gets
# with no key, end to end (the test models are objects, not specs).

def test_the_baselines_are_graphs_of_compare():
    assert set(BASELINES) <= set(available_graphs())


def test_inline_reflection_costs_no_call_and_keeps_the_llm_reflections_success_offline():
    tasks = [Task.from_dict(t) for t in SUITE]
    records = by_graph(run_comparison(tasks, RunConfig(graphs=BASELINES)))
    llm, inline, agent = records["react"], records["react_inline"], records["create_agent"]
    assert [r["success"] for r in inline] == [r["success"] for r in llm] == [True, True, True]
    for with_llm, with_inline, baseline in zip(llm, inline, agent, strict=True):
        assert with_inline["model_calls"] < with_llm["model_calls"]
        assert with_inline["model_calls"] <= baseline["model_calls"]
        assert with_inline["tool_calls"] == baseline["tool_calls"] > 0
    # create_agent gives every answer one status: the compound task's missing part is not reported as partial.
    assert [r["status"] for r in agent] == ["answered"] * 3 and not agent[2]["success"]
    assert inline[2]["status"] == "partial"


def test_a_baseline_whose_package_is_missing_is_listed_as_unavailable():
    register_graph(GraphEntry("agent_elsewhere", "needs a package", build_create_agent, requires="no_such_package_x"))
    try:
        assert "agent_elsewhere" not in available_graphs()
        with pytest.raises(UnknownGraphError, match="'agent_elsewhere' is not available"):
            resolve_graphs("agent_elsewhere")
    finally:
        GRAPHS.pop("agent_elsewhere")


def test_create_agent_meets_the_same_tool_faults_with_the_gateways_statuses():
    tasks = [Task.from_dict(t) for t in SUITE[:2]]
    records = by_graph(run_comparison(tasks, RunConfig(graphs=("react_inline", "create_agent"), seed=3,
                                                       faults=FaultPlan(failure_rate=1.0))))
    for ours, theirs in zip(records["react_inline"], records["create_agent"], strict=True):
        assert theirs["tool_failures"] == theirs["tool_calls"] > 0 and not theirs["success"]
        assert set(theirs["tool_statuses"]) <= set(ours["tool_statuses"]) | {"error", "timeout", "circuit_open"}
        assert theirs["injected_faults"] and theirs["failure_mode"] == "tool_error"


def test_the_run_wide_reflection_option_selects_inline_too():
    records = run_comparison([Task.from_dict(SUITE[0])], RunConfig(graphs=("react",), reflection="inline"))
    assert records[0]["success"] and records[0]["model_calls"] == 2


def text_model_with_inline_verdicts() -> FunctionModel:
    """A text-protocol model that begins each reply with its verdict block, as the prompt asks."""
    verdict = {"enough_information": False, "tool_error": False, "need_other_tool": False, "repeated_call": False,
               "note": "compute it", "parts": ["the product"], "missing": ["the product"]}

    def reply(messages, info: RequestInfo) -> str:
        if info.purpose != "think":
            return "It is 126."
        if "126" not in messages[-1].text:
            return (f"<reflection>{json.dumps(verdict)}</reflection>\nThought: compute it\nAction: calculator\n"
                    'Action Input: {"expression": "(15 + 27) * 3"}')
        done = {**verdict, "enough_information": True, "missing": []}
        return f"<reflection>{json.dumps(done)}</reflection>\nThought: I can answer now.\nFinal Answer: It is 126."
    return FunctionModel(function=reply)


def tools_model_with_inline_verdicts() -> FunctionModel:
    """A tools-protocol model that calls the verdict tool it is offered beside its other calls, and beside its
    answer."""
    def verdict(enough: bool) -> dict:
        return {"name": "InlineReflection", "id": f"v{int(enough)}", "type": "tool_call",
                "args": verdict_args(enough, ["the product"], [] if enough else ["the product"])}

    def reply(messages, info: RequestInfo) -> AIMessage | str:
        if info.purpose != "think":
            return "It is 126."
        # offered beside the tools once the turn has tool results to judge (not on the first request)
        assert ("InlineReflection" in info.tool_names) == ("126" in messages[-1].text)
        if "126" not in messages[-1].text:
            calculator = {"name": "calculator", "args": {"expression": "(15 + 27) * 3"}, "id": "c1",
                          "type": "tool_call"}
            return AIMessage("compute it", tool_calls=[calculator, verdict(False)])
        return AIMessage("It is 126.", tool_calls=[verdict(True)])
    return FunctionModel(function=reply)


@pytest.mark.parametrize("protocol", ["tools", "text"])
def test_an_inline_verdict_is_read_from_the_reply_and_never_joins_the_conversation(protocol):
    # A tools-protocol verdict is a call of the verdict tool offered; a text-protocol one a block in the reply.
    model = text_model_with_inline_verdicts() if protocol == "text" else tools_model_with_inline_verdicts()
    graph = build_react_graph(checkpointer=InMemorySaver(), model=model)
    result = graph.invoke({"messages": [HumanMessage("计算 (15 + 27) * 3 等于多少")]},
                          config={"configurable": {"thread_id": "t"}},
                          context=Context(reflection="inline", protocol=protocol))
    assert "126" in result["final_answer"] and result["status"] == "answered"
    assert result["reflection"]["enough_information"] and result["reflection"]["parts"]
    assert result["coverage"]["by"] == "model"
    for message in result["messages"]:
        assert "InlineReflection" not in json.dumps([c["name"] for c in getattr(message, "tool_calls", [])])
        assert "<reflection>" not in message.text


def test_compare_on_the_command_line_runs_the_baselines(suite_file, tmp_path, cli):
    code, out, err = cli("compare", "--graphs", ",".join(BASELINES), "--suite", str(suite_file), "--out",
                         str(tmp_path / "out"), "--no-plots")
    assert code == 0, err
    for name in BASELINES:
        assert f"| {name} | 1 | 100% |" in out
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    calls_of = {r["graph"]: r["model_calls"] for r in rows}
    assert calls_of["react_inline"] <= calls_of["create_agent"] < calls_of["react"]


# --- the local OpenAI-compatible server ---------------------------------------------------------------------------

def test_compare_through_the_server_runs_create_agent_and_inline_reflection(provider):
    with ProviderServer(
            # create_agent: a tool round, then the answer
            calls(("calculator", {"expression": "(15 + 27) * 3"})), text("It is 126."),
            # react_inline: the tool round (no verdict asked yet: nothing to judge), then the answer with its verdict
            calls(("calculator", {"expression": "(15 + 27) * 3"})),
            calls(("InlineReflection", verdict_args(True, ["the product"])), content="It is 126.")) as server:
        model = provider(server)
        records = run_comparison([Task.from_dict(SUITE[0])],
                                 RunConfig(graphs=("create_agent", "react_inline"), model=model))
    agent, inline = records
    assert agent["success"] and inline["success"]
    assert agent["model_calls"] == inline["model_calls"] == 2 and agent["tool_calls"] == inline["tool_calls"] == 1
    assert inline["status"] == "answered" and agent["tokens"] > 0
    # create_agent's requests never offer it; react_inline's offers it once there are results to judge
    assert "InlineReflection" not in server.tool_names(0) + server.tool_names(1) + server.tool_names(2)
    assert "InlineReflection" in server.tool_names(3)


def test_create_agent_stops_at_the_same_iteration_limit(provider):
    rounds = [calls(("search", {"query": f"topic {i}"})) for i in range(5)]
    with ProviderServer(*rounds) as server:
        model = provider(server)
        record, = run_comparison([Task.from_dict(SUITE[0])],
                                 RunConfig(graphs=("create_agent",), model=model, max_iterations=2))
    assert record["status"] == "limit_reached" and not record["success"]
    # max_iterations + 1 model calls, as react's rounds plus its answer; create_agent's last one may still call a
    # tool, which runs, and then it stops without an answer (react's last call answers without tools).
    assert record["model_calls"] == 3 and record["tool_calls"] == 3 and record["iterations"] == 3
    assert "limit" in record["answer"].lower()


def test_compare_on_the_command_line_through_the_server(suite_file, tmp_path, cli, provider):
    with ProviderServer(calls(("calculator", {"expression": "(15 + 27) * 3"})), text("It is 126."),
                        calls(("calculator", {"expression": "(15 + 27) * 3"}), ("InlineReflection", verdict_args())),
                        calls(("InlineReflection", verdict_args(True, ["x"])), content="126")) as server:
        model = provider(server)
        code, out, err = cli("compare", "--graphs", "create_agent,react_inline", "--model", model, "--suite",
                             str(suite_file), "--out", str(tmp_path / "out"), "--no-plots")
    assert code == 0, err
    assert "| create_agent | 1 | 100% |" in out and "| react_inline | 1 | 100% |" in out
    assert len(server.requests) == 4


def test_an_anthropic_reply_loses_its_verdict_call_before_it_is_sent_back(provider):
    with ProviderServer(calls(("calculator", {"expression": "2+2"}), ("InlineReflection", verdict_args()),
                              content="Add."),
                        calls(("InlineReflection", verdict_args(True, ["the sum"])), content="4")) as server:
        model = provider(server, shape="anthropic")
        result = build_react_graph().invoke({"messages": [HumanMessage("2+2?")]},
                                            context=Context(model=model, reflection="inline"))
    assert server.rejections == [] and len(server.requests) == 2  # a tool_use without its result would be refused
    assert result["final_answer"] == "4" and result["reflection"]["parts"] == ["the sum"]
    sent = [b for m in server.requests[1]["messages"] if isinstance(m["content"], list) for b in m["content"]]
    assert [b["name"] for b in sent if b.get("type") == "tool_use"] == ["calculator"]


@pytest.mark.parametrize("carried", [
    "{not json",  # malformed arguments
    {"enough_information": "maybe", "parts": 7},  # the wrong types
    {**verdict_args(True), "note": "x" * 20_000},  # too long to read
])
def test_an_unusable_inline_verdict_is_the_safe_default(provider, carried):
    with ProviderServer(calls(("calculator", {"expression": "2+2"}), ("InlineReflection", carried)),
                        text("4")) as server:
        model = provider(server)
        result = build_react_graph().invoke({"messages": [HumanMessage("2+2?")]},
                                            context=Context(model=model, reflection="inline", closing_check=False))
    assert result["final_answer"] == "4" and result["status"] == "answered"
    assert result["reflection"]["parts"] == [] and not result["reflection"]["enough_information"]
    assert len(server.requests) == 2  # no reflection call, no closing check


def test_a_long_inline_account_is_bounded(provider):
    account = verdict_args(True, [f"part {i} " + "y" * 220 for i in range(30)], [])  # within the 8000 characters
    with ProviderServer(calls(("InlineReflection", account), content="Done.")) as server:
        model = provider(server)
        result = build_react_graph().invoke({"messages": [HumanMessage("hi")]},
                                            context=Context(model=model, reflection="inline"))
    assert result["final_answer"].startswith("Done.") and len(server.requests) == 1
    assert len(result["reflection"]["parts"]) == 20 and all(len(p) <= 200 for p in result["reflection"]["parts"])


def test_an_unclosed_block_ends_where_the_thought_begins(provider):
    with ProviderServer(text('<reflection>{"enough_information": true, "parts": ["the sum"]}\n'
                             "Thought: done\nFinal Answer: 4")) as server:
        model = provider(server)
        result = build_react_graph().invoke({"messages": [HumanMessage("2+2?")]},
                                            context=Context(model=model, reflection="inline", protocol="text"))
    assert result["final_answer"] == "4" and result["reflection"]["parts"] == ["the sum"]
    assert len(server.requests) == 1


def test_the_text_protocol_carries_the_verdict_in_a_block(provider):
    block = json.dumps(verdict_args(True, ["the sum"]))
    with ProviderServer(
            text('<reflection>{"enough_information": false}</reflection>\nThought: add\nAction: calculator\n'
                 'Action Input: {"expression": "2+2"}'),
            text(f"<reflection>{block}</reflection>\nThought: done\nFinal Answer: 4")) as server:
        model = provider(server)
        result = build_react_graph().invoke({"messages": [HumanMessage("2+2?")]},
                                            context=Context(model=model, reflection="inline", protocol="text"))
    assert result["final_answer"] == "4" and result["status"] == "answered"
    assert result["reflection"]["parts"] == ["the sum"] and len(server.requests) == 2
    # asked for once there are observations to judge; a block the first reply carried unasked is still taken out
    assert "<reflection>" not in server.requests[0]["messages"][0]["content"]
    assert "<reflection>" in server.requests[1]["messages"][0]["content"]
    assert "<reflection>" not in json.dumps(server.requests[1]["messages"][1:])
