"""Statuses that mean what they say, and coverage of every part of a question, in every graph."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph.cli.app import main
from reactgraph.evals.metrics import summarize
from reactgraph.graph import Context, build_react_graph
from reactgraph.graph.plan_solve import build_plan_solve_graph
from reactgraph.graph.reflexion import build_reflexion_graph
from reactgraph.nodes.closing import RUN_STATUSES, Coverage, pick_status
from reactgraph.tools import default_gateway
from support.scripted import ScriptedChatModel, by_purpose, call, notes_gateway, tool_reply, verdict

GRAPHS = ["react", "plan_solve", "plan_solve_replan", "reflexion"]
PARTIAL = "北京天气怎么样？谁发明了 zzqxfoo 语言？"


# The `graphs` fixture's tests ask the default offline model Chinese questions on purpose: what they check is the
# status and the "还缺少" line a user gets with no key, from the question to the CLI's exit code, end to end.
@pytest.fixture(scope="module")
def graphs():
    gateway = default_gateway()
    return {"react": build_react_graph(gateway), "plan_solve": build_plan_solve_graph(gateway),
            "reflexion": build_reflexion_graph(gateway)}


def ask(graphs, graph: str, question: str, **context) -> dict:
    if graph == "plan_solve_replan":
        graph, context = "plan_solve", {**context, "replan": True}
    return graphs[graph].invoke({"messages": [HumanMessage(question)]}, context=Context(**context))


def closing_record(result: dict) -> dict:
    return [s for s in result["steps"] if s["node"] in ("finalize", "solve")][-1]


@pytest.mark.parametrize("protocol", ["tools", "text"])
@pytest.mark.parametrize("reflection", ["llm", "rules", "off"])
@pytest.mark.parametrize("graph", GRAPHS)
def test_a_part_that_cannot_be_found_ends_partial_and_is_named(graphs, graph, reflection, protocol):
    # The text protocol makes one call per round: the search and its fallbacks need more rounds.
    result = ask(graphs, graph, PARTIAL, reflection=reflection, protocol=protocol, max_iterations=10)
    assert result["status"] == "partial"
    assert "北京" in result["final_answer"] and "还缺少" in result["final_answer"]
    assert "zzqxfoo" in result["final_answer"]
    assert result["coverage"]["missing"] and set(result["coverage"]["missing"]) < set(result["coverage"]["parts"])
    assert closing_record(result)["status"] == "partial"  # the step record carries the same status


@pytest.mark.parametrize("reflection", ["llm", "rules", "off"])
@pytest.mark.parametrize("graph", GRAPHS)
def test_nothing_found_ends_no_answer(graphs, graph, reflection):
    result = ask(graphs, graph, "谁发明了 zzqxfoo 语言？", reflection=reflection)
    assert result["status"] == "no_answer"
    assert "没能用离线工具找到答案" in result["final_answer"]


@pytest.mark.parametrize("question", [
    "北京的气温比上海低多少度？",        # answered only Beijing before
    "3 加 5 等于多少，然后上海天气如何？",  # answered only the weather before
])
@pytest.mark.parametrize("reflection", ["llm", "off"])
@pytest.mark.parametrize("graph", GRAPHS)
def test_every_part_of_a_compound_question_is_answered(graphs, graph, reflection, question):
    result = ask(graphs, graph, question, reflection=reflection)
    answer = result["final_answer"]
    assert result["status"] == "answered", answer
    assert "北京" in answer or "3 + 5 = 8" in answer
    assert "上海" in answer
    if "比上海" in question:
        assert "9°C" in answer  # the difference itself: 12 - 3
    else:
        assert "3 + 5 = 8" in answer


@pytest.mark.parametrize("graph", GRAPHS)
def test_memory_questions_name_what_was_never_said(graphs, graph):
    told = ask(graphs, graph, "我叫什么名字？我最喜欢的城市是哪个？")
    assert told["status"] == "no_answer"
    assert "你的名字" in told["final_answer"] and "你最喜欢的城市" in told["final_answer"]


def test_a_remembered_name_and_a_forgotten_city_end_partial():
    graph = build_react_graph(default_gateway())
    history = [HumanMessage("我叫小明"), AIMessage("好的，我记住了：你叫小明。")]
    result = graph.invoke({"messages": [*history, HumanMessage("我叫什么名字？我最喜欢的城市是哪个？")]},
                          context=Context())
    assert result["status"] == "partial" and result["coverage"]["missing"] == ["你最喜欢的城市"]
    # The answer names the missing part itself, so no "还缺少" line is added to it.
    assert "小明" in result["final_answer"] and "你最喜欢的城市" in result["final_answer"]
    assert "还缺少" not in result["final_answer"]


@pytest.mark.parametrize("statement", ["我叫小明，我最喜欢的城市是杭州。", "My name is Ann."])
def test_a_message_that_only_states_facts_is_answered_by_its_acknowledgement(statement):
    result = build_react_graph(default_gateway()).invoke({"messages": [HumanMessage(statement)]}, context=Context())
    assert result["status"] == "answered" and "还缺少" not in result["final_answer"]


def test_a_fact_folded_into_the_running_summary_still_counts_as_remembered():
    graph = build_react_graph(default_gateway(), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "folded"}}
    for question in ("我叫小明，我最喜欢的城市是杭州。", "计算 2+3", "计算 3+4", "计算 4+5", "计算 5+6", "计算 6+7"):
        graph.invoke({"messages": [HumanMessage(question)]}, config=config, context=Context(memory_window=2))
    assert graph.get_state(config).values.get("summary")  # the statement is no longer among the messages
    result = graph.invoke({"messages": [HumanMessage("我最喜欢的城市是哪个？")]}, config=config,
                          context=Context(memory_window=2))
    assert result["status"] == "answered" and "杭州" in result["final_answer"]


def test_offline_reflection_is_not_satisfied_when_every_call_found_nothing(graphs):
    result = ask(graphs, "react", "谁发明了 zzqxfoo 语言？", reflection="llm")
    verdicts = [json.loads(s["observation"]) for s in result["steps"] if s["node"] == "reflect"]
    assert verdicts and not any(v["enough_information"] for v in verdicts)
    assert verdicts[-1]["missing"] == verdicts[-1]["parts"] != []


def never_done():
    """A test model for every graph that always has one more thing to look up: each round (or step) calls
    `lookup` on a new topic, reflection and the closing check find a part missing, the judge fails the trial."""
    topics: list[str] = []

    def look(messages, info):
        topics.append(f"topic {len(topics) + 1}")
        return AIMessage("", tool_calls=[call("lookup", f"c{len(topics)}", topic=topics[-1])])

    steps = [{"goal": "look a up", "tool": "lookup"}, {"goal": "look b up", "tool": "lookup"}]
    return by_purpose(think=look, step=look, answer="Still looking.", plan={"steps": steps},
                      reflect=verdict(False, parts=["a", "b"], missing=["b"]),
                      check={"parts": ["a", "b"], "missing": ["b"]},
                      replan={"steps": steps[1:], "avoid_tools": [], "reason": "b is still missing"},
                      evaluate={"passed": False, "reason": "b is missing"}, lesson={"lesson": "Look b up."})


@pytest.mark.parametrize("graph", GRAPHS)
def test_the_iteration_limit_ends_limit_reached(graph):
    builders = {"react": build_react_graph, "plan_solve": build_plan_solve_graph,
                "plan_solve_replan": build_plan_solve_graph, "reflexion": build_reflexion_graph}
    result = builders[graph](notes_gateway(), model=never_done()).invoke(
        {"messages": [HumanMessage("Tell me about a and b.")]},
        context=Context(max_iterations=1, replan=graph == "plan_solve_replan"))
    assert result["status"] == "limit_reached"


def test_a_repeated_call_ends_limit_reached():
    repeat = tool_reply("look", call("lookup", "c1", topic="x"))
    again = tool_reply("look again", call("lookup", "c2", topic="x"))
    model = ScriptedChatModel.of(repeat, again, AIMessage("x is a letter."))
    graph = build_react_graph(notes_gateway(), model=model)
    result = graph.invoke({"messages": [HumanMessage("what is x?")]}, context=Context(reflection="rules"))
    assert result["status"] == "limit_reached"
    assert closing_record(result)["thought"] == "repeated"


def test_a_provider_failure_ends_failed():
    model = ScriptedChatModel.of(*[ValueError("provider down")] * 10)
    graph = build_react_graph(notes_gateway(), model=model, model_retry=None)
    result = graph.invoke({"messages": [HumanMessage("what is x?")]}, context=Context(reflection="off"))
    assert result["status"] == "failed"


def test_a_real_model_answering_from_its_own_knowledge_is_answered():
    model = ScriptedChatModel.of(AIMessage("LangGraph is a library for building stateful agents."))
    graph = build_react_graph(notes_gateway(), model=model)
    result = graph.invoke({"messages": [HumanMessage("What is LangGraph?")]}, context=Context(reflection="off"))
    assert result["status"] == "answered"


def test_a_budget_stop_maps_to_budget_exhausted():
    # The budget checks (another part of issue 11) set stop_reason = "budget"; the one status function maps it.
    state = {"stop_reason": "budget", "status": None}
    assert pick_status(state, "budget", Coverage(["a"], [])) == "budget_exhausted"
    assert pick_status({"status": "failed", "stop_reason": "budget"}, "failure", Coverage()) == "failed"
    assert set(RUN_STATUSES) == {"answered", "partial", "no_answer", "limit_reached", "budget_exhausted", "failed"}


@pytest.mark.parametrize(("question", "status", "code"), [
    (PARTIAL, "partial", 0),
    ("谁发明了 zzqxfoo 语言？", "no_answer", 1),
    ("3 加 5 等于多少，然后上海天气如何？", "answered", 0),
])
def test_cli_exit_code_follows_the_status(capsys, question, status, code):
    exit_code = main(["ask", question, "--json", "--store", "memory"])
    payload = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (payload["status"], exit_code) == (status, code)


def test_the_eval_summary_counts_statuses(graphs):
    records = []
    for question in (PARTIAL, "谁发明了 zzqxfoo 语言？"):
        result = ask(graphs, "react", question)
        records.append({"graph": "react", "task": question, "status": result["status"], "success": False,
                        "failure_mode": None, "tags": [], "model": "offline", "seed": 0, "model_calls": 0,
                        "tool_calls": 0, "tool_failures": 0, "tokens_in": 0, "tokens_out": 0, "tokens": 0,
                        "wall_s": 0.0, "iterations": 0})
    assert summarize(records)["graphs"]["react"]["statuses"] == {"partial": 1, "no_answer": 1}


# --- the plan names the question's parts (Plan-and-Solve) ------------------------------------------------------------

def parts_plan(*steps: tuple[str, str, str], parts: tuple[str, ...]) -> AIMessage:
    """A scripted Plan naming the question's `parts`, each step (goal, tool, part) naming the part it serves."""
    return AIMessage("", tool_calls=[call("Plan", "p1", parts=list(parts), steps=[
        {"goal": goal, "tool": tool, "part": part} for goal, tool, part in steps])])


def test_a_plan_naming_two_parts_with_one_failed_step_ends_partial_naming_it():
    model = ScriptedChatModel.of(
        parts_plan(("look up Paris", "lookup", "Paris"), ("run the broken tool", "broken", "the broken count"),
                   parts=("Paris", "the broken count")),
        tool_reply("look", call("lookup", "c1", topic="Paris")), AIMessage("Paris: notes found."),
        tool_reply("count", call("broken", "c2", x=1)), AIMessage("The count could not be had."),
        AIMessage("Paris has notes; the count could not be computed."))
    graph = build_plan_solve_graph(notes_gateway(broken=True), model=model)
    result = graph.invoke({"messages": [HumanMessage("Tell me about Paris, and the broken count?")]},
                          context=Context())
    assert [r["status"] for r in result["step_results"]] == ["done", "failed"]
    assert result["status"] == "partial" and closing_record(result)["status"] == "partial"
    assert result["coverage"] == {"parts": ["Paris", "the broken count"], "missing": ["the broken count"],
                                  "by": "model"}
    assert result["final_answer"].endswith("Missing: the broken count.")


def test_a_plan_whose_every_part_found_nothing_ends_no_answer():
    model = ScriptedChatModel.of(
        parts_plan(("look up zzq", "lookup", "zzq"), parts=("zzq",)),
        tool_reply("look", call("lookup", "c1", topic="zzq")), AIMessage("Nothing about zzq."),
        AIMessage("不知道 zzq 是什么。"))
    graph = build_plan_solve_graph(notes_gateway(found=lambda topic: False), model=model)
    result = graph.invoke({"messages": [HumanMessage("zzq 是什么？")]}, context=Context())
    assert result["status"] == "no_answer" and result["coverage"]["missing"] == ["zzq"]
    # The answer names zzq itself (no "还缺少" line); the line says what the status rests on.
    assert result["final_answer"] == "不知道 zzq 是什么。\n（计划的每一步都失败了。）"


def test_a_plan_without_parts_leaves_coverage_to_the_closing_check():
    plan = AIMessage("", tool_calls=[call("Plan", "p1", steps=[  # a plan that names no parts
        {"goal": "look up Paris", "tool": "lookup"}, {"goal": "look up zzq", "tool": "lookup"}])])
    model = ScriptedChatModel.of(
        plan, tool_reply("look", call("lookup", "c1", topic="Paris")), AIMessage("Paris: notes found."),
        tool_reply("look", call("lookup", "c2", topic="zzq")), AIMessage("Nothing about zzq."),
        AIMessage("Paris has notes; nothing on zzq."),
        AIMessage("", tool_calls=[call("ClosingCheck", "k1", parts=["Paris", "zzq"], missing=["zzq"])]))
    graph = build_plan_solve_graph(notes_gateway(found=lambda topic: topic == "Paris"), model=model)
    result = graph.invoke({"messages": [HumanMessage("Tell me about Paris and zzq.")]}, context=Context())
    assert result["plan_parts"] == [] and result["coverage"]["by"] == "model" and result["status"] == "partial"
    assert result["coverage"]["missing"] == ["zzq"]
