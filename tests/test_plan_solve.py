"""The Plan-and-Solve graph: its wiring, offline answers end to end, replanning on and off, limits and APIs."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph.graph import Context, build_plan_solve_graph, model_retry_policy
from reactgraph.graph.routing.plan_solve import after_settled
from reactgraph.nodes.plan_solve_state import STEP_TOOL_ROUNDS
from reactgraph.testing import FunctionModel, RequestInfo
from reactgraph.tools import ToolError, ToolGateway
from reactgraph.tools.builtin import builtin_tools
from support.scripted import ScriptedChatModel, call, notes_gateway, tool_reply

PYTHON_QUESTION = ("Python 诞生于哪一年？到 2026 年它已经诞生了多少年？如果一个程序员从它诞生那年开始每天写 10 行代码，"
                   "到现在一共写了多少行代码（按每年 365 天计算）？")
WEATHER_QUESTION = "北京和上海的天气分别怎么样？哪个城市更热？"


@pytest.fixture(scope="module")
def graph():
    return build_plan_solve_graph()


@pytest.fixture
def gateway() -> ToolGateway:
    return notes_gateway(broken=True)


def ask(graph, question: str, context: Context | None = None, thread: str = "t1"):
    return graph.invoke({"messages": [HumanMessage(question)]}, config={"configurable": {"thread_id": thread}},
                        context=context or Context())


def tools_used(result) -> list[str]:
    return [s["action"] for s in result["steps"] if s["node"] == "act"]


def nodes_of(result) -> list[str]:
    return [s["node"] for s in result["steps"]]


def plan_call(*steps: tuple[str, str | None]) -> AIMessage:
    return AIMessage("", tool_calls=[call("Plan", "p1", steps=[{"goal": g, "tool": t} for g, t in steps])])


def test_the_compiled_graph_has_the_plan_and_solve_nodes_and_edges(gateway):
    drawn = build_plan_solve_graph(gateway, model=ScriptedChatModel.of()).get_graph()
    assert set(drawn.nodes) == {"__start__", "load_memory", "plan", "execute_step", "approve", "act", "observe",
                                "replan", "solve", "save_memory", "__end__"}
    assert {(e.source, e.target, e.conditional) for e in drawn.edges} == {
        ("__start__", "load_memory", False), ("load_memory", "plan", False),
        ("plan", "execute_step", True), ("plan", "solve", True),
        ("execute_step", "act", True), ("execute_step", "execute_step", True), ("execute_step", "replan", True),
        ("execute_step", "solve", True), ("execute_step", "approve", True),
        ("approve", "act", True), ("approve", "observe", True),
        ("act", "observe", False),
        ("observe", "execute_step", True), ("observe", "replan", True), ("observe", "solve", True),
        ("replan", "execute_step", True), ("replan", "solve", True),
        ("solve", "save_memory", False), ("save_memory", "__end__", False),
    }


def test_a_multi_hop_question_is_planned_as_three_steps_and_solved_offline(graph):
    result = ask(graph, PYTHON_QUESTION)
    assert result["status"] == "answered" and result["iteration"] == 3
    assert all(n in result["final_answer"] for n in ("1991", "35", "127750"))
    assert [s["goal"] for s in result["plan"]] == ["Python 诞生于哪一年？", "到 2026 年它已经诞生了多少年？",
                                                   result["plan"][2]["goal"]]
    assert [s["tool"] for s in result["plan"]] == ["search", "calculator", "calculator"]
    # Each step's tool calls carry the step's number, like ReAct's rounds; each step is closed by a record. The
    # scripted model learns the step from the request's plan goals (run metadata), not from the prompt's words.
    assert [(s["step"], s["node"], s["action"]) for s in result["steps"] if s["node"] in ("act", "execute_step")] == [
        (1, "act", "search"), (1, "execute_step", None), (2, "act", "calculator"), (2, "execute_step", None),
        (3, "act", "calculator"), (3, "execute_step", None)]
    assert nodes_of(result)[0] == "plan" and nodes_of(result)[-1] == "solve"
    assert [r["status"] for r in result["step_results"]] == ["done", "done", "done"]


def step_by_step(*steps: tuple[str, str]) -> FunctionModel:
    """A model that plans `steps` (goal, topic), does each step with one `lookup` of its topic, then answers."""
    done: list[str] = []
    answered: list[str] = []

    def reply(messages, info: RequestInfo):
        if info.purpose == "plan":
            return {"steps": [{"goal": goal, "tool": "lookup"} for goal, _ in steps]}
        if info.purpose == "step" and len(done) == len(answered):  # a new step: its one call
            topic = steps[len(done)][1]
            done.append(topic)
            return AIMessage("", tool_calls=[call("lookup", f"c{len(done)}", topic=topic)])
        if info.purpose == "step":  # its result came back: the step's result
            answered.append(done[-1])
            return f"notes on {done[-1]} found"
        return "Both found: " + ", ".join(done)
    return FunctionModel(function=reply)


def test_each_step_is_its_own_round_and_its_calls_carry_its_number():
    model = step_by_step(("look up cats", "cats"), ("look up dogs", "dogs"))
    result = ask(build_plan_solve_graph(notes_gateway(), model=model), "cats and dogs?", Context(reflection="off"))
    # Each step's tool calls carry the step's number, like ReAct's rounds; each step is closed by a record.
    assert [(s["step"], s["node"], s["action"]) for s in result["steps"] if s["node"] in ("act", "execute_step")] == [
        (1, "act", "lookup"), (1, "execute_step", None), (2, "act", "lookup"), (2, "execute_step", None)]
    assert [s["action_input"]["topic"] for s in result["steps"] if s["node"] == "act"] == ["cats", "dogs"]
    assert [r["status"] for r in result["step_results"]] == ["done", "done"]
    assert result["status"] == "answered" and "cats, dogs" in result["final_answer"]
    assert [r.purpose for r in model.requests][:3] == ["plan", "step", "step"]


def test_each_city_is_its_own_step_and_solve_compares_them(graph):
    result = ask(graph, WEATHER_QUESTION)
    assert [s["goal"] for s in result["plan"]] == ["北京的天气怎么样？", "上海的天气怎么样？"]
    acts = [s for s in result["steps"] if s["node"] == "act"]
    assert [(s["step"], s["action_input"]["city"]) for s in acts] == [(1, "北京"), (2, "上海")]
    assert "上海更热" in result["final_answer"] and result["status"] == "answered"


def test_arithmetic_is_one_calculator_step(graph):
    result = ask(graph, "计算 (15 + 27) * 3 等于多少")
    assert tools_used(result) == ["calculator"] and "126" in result["final_answer"] and result["iteration"] == 1


def test_a_question_no_tool_can_help_with_gets_an_empty_plan_and_an_honest_answer(graph):
    result = ask(graph, "写一首关于秋天的诗")
    assert result["plan"] == [] and nodes_of(result) == ["plan", "solve"]
    assert "离线" in result["final_answer"] and result["status"] == "no_answer"


def test_the_step_limit_stops_the_plan_and_the_answer_says_what_is_missing(graph):
    model = step_by_step(("look up cats", "cats"), ("look up dogs", "dogs"))
    result = ask(build_plan_solve_graph(notes_gateway(), model=model), "cats and dogs?",
                 Context(max_iterations=1, reflection="off"))
    assert result["status"] == "limit_reached" and result["iteration"] == 1
    assert [s["action_input"]["topic"] for s in result["steps"] if s["node"] == "act"] == ["cats"]


def weather_down() -> ToolGateway:
    gateway = ToolGateway([meta for meta in builtin_tools() if meta.name != "get_weather"])

    @gateway.tool(name="get_weather")
    def get_weather(city: str) -> dict:
        """Weather for a city (broken on purpose)."""
        raise ToolError("weather backend down")

    return gateway


def test_with_replanning_off_the_static_plan_runs_into_the_same_failure_again():
    result = ask(build_plan_solve_graph(weather_down()), WEATHER_QUESTION)
    assert "replan" not in nodes_of(result)
    assert tools_used(result).count("get_weather") == 2
    assert result["step_results"][0]["status"] == "recovered"  # get_weather failed, the search fallback ran


def test_with_replanning_on_a_failing_tool_is_dropped_from_the_rest_of_the_plan():
    result = ask(build_plan_solve_graph(weather_down()), WEATHER_QUESTION, Context(replan=True))
    replans = [s for s in result["steps"] if s["node"] == "replan"]
    assert len(replans) == 1 and "get_weather" in replans[0]["thought"]
    assert result["avoid_tools"] == ["get_weather"] and result["plan"][1]["tool"] == "search"
    assert tools_used(result) == ["get_weather", "search", "search"]  # 上海 goes straight to the fallback
    # Neither the tool nor its fallback found a weather: the status says so, and the answer names both cities.
    assert result["status"] == "no_answer" and "北京" in result["final_answer"]


def scripted_failure_run(gateway, replan: bool):
    script = [plan_call(("look up cats", "broken"), ("look up graphs", "lookup")),
              tool_reply("try broken", call("broken", "c1")), AIMessage("broken is down; nothing found")]
    if replan:
        revised = [{"goal": "look up graphs", "tool": "lookup"}]
        script.append(AIMessage("", tool_calls=[call("Replan", "r1", steps=revised, avoid_tools=["broken"],
                                                     reason="broken is down")]))
    script += [tool_reply("lookup", call("lookup", "c2", topic="graphs")), AIMessage("graphs: notes"),
               AIMessage("Graphs have notes; cats are unknown because broken is down.")]
    model = ScriptedChatModel.of(*script)
    return model, ask(build_plan_solve_graph(gateway, model=model), "cats and graphs?", Context(replan=replan))


def test_a_failed_step_triggers_replan_only_when_enabled(gateway):
    model, result = scripted_failure_run(gateway, replan=True)
    assert [r["status"] for r in result["step_results"]] == ["failed", "done"]
    assert nodes_of(result).count("replan") == 1 and result["replans"] == 1
    offered = [t["function"]["name"] for t in model.requests[4]["tools"]]  # step 2, after the revision
    assert offered == ["lookup"]
    assert result["final_answer"].startswith("Graphs have notes") and result["status"] == "answered"

    model, result = scripted_failure_run(gateway, replan=False)
    assert "replan" not in nodes_of(result) and result.get("replans", 0) == 0
    assert [t["function"]["name"] for t in model.requests[3]["tools"]] == ["lookup", "broken"]
    assert result["status"] == "answered"


def test_replan_routing_is_a_pure_function_of_the_last_step_and_the_context():
    state = {"plan": [{"goal": "a"}, {"goal": "b"}], "cursor": 1, "iteration": 1,
             "step_results": [{"index": 0, "goal": "a", "tool": None, "status": "failed", "result": ""}]}
    assert after_settled(state, Context(replan=True)) == "replan"
    assert after_settled(state, Context(replan=False)) == "execute_step"
    assert after_settled({**state, "iteration": 5}, Context(replan=False, max_iterations=5)) == "solve"
    done = {**state, "step_results": [{**state["step_results"][0], "status": "done"}]}
    assert after_settled(done, Context(replan=True)) == "execute_step"


def test_a_step_that_keeps_calling_tools_is_closed_after_its_round_limit(gateway):
    rounds = [tool_reply(f"round {i}", call("lookup", f"c{i}", topic=f"t{i}")) for i in range(STEP_TOOL_ROUNDS)]
    model = ScriptedChatModel.of(plan_call(("look everything up", "lookup")), *rounds, AIMessage("Summary."))
    result = ask(build_plan_solve_graph(gateway, model=model), "q")
    assert tools_used(result) == ["lookup"] * STEP_TOOL_ROUNDS and result["iteration"] == 1
    assert result["step_results"][0]["status"] == "done" and "notes on t2" in result["step_results"][0]["result"]
    # plan, the rounds, solve, the closing self-check (the plan named no parts): no extra call to close the step
    assert len(model.requests) == 1 + STEP_TOOL_ROUNDS + 2


def test_an_unusable_plan_falls_back_to_one_whole_question_step(gateway):
    model = ScriptedChatModel.of(AIMessage("no plan here"), AIMessage("An answer without tools."),
                                 AIMessage("Final."))
    result = ask(build_plan_solve_graph(gateway, model=model), "what now?")
    assert result["steps"][0]["status"] == "plan_fallback" and result["plan"] == [{"goal": "what now?", "tool": None}]
    assert result["final_answer"] == "Final." and result["status"] == "answered"


def test_a_model_that_keeps_raising_while_executing_ends_the_run_as_failed(gateway):
    model = ScriptedChatModel.of(plan_call(("look up graphs", "lookup")), *[ConnectionError("unreachable")] * 2)
    graph = build_plan_solve_graph(gateway, model=model, model_retry=model_retry_policy(retries=1, delay_s=0))
    result = ask(graph, "q")
    assert result["status"] == "failed" and "unreachable" in result["final_answer"]
    assert nodes_of(result)[-2:] == ["execute_step", "solve"] and len(model.requests) == 3


def test_a_new_question_in_the_session_plans_afresh(gateway):
    graph = build_plan_solve_graph(checkpointer=InMemorySaver())
    ask(graph, PYTHON_QUESTION, thread="s")
    second = ask(graph, "计算 (15 + 27) * 3 等于多少", thread="s")
    assert second["iteration"] == 1 and len(second["plan"]) == 1 and tools_used(second) == ["calculator"]
    assert len(second["step_results"]) == 1 and "126" in second["final_answer"]


def test_the_text_protocol_runs_the_same_plan(graph):
    result = ask(graph, PYTHON_QUESTION, Context(protocol="text"))
    assert tools_used(result) == ["search", "calculator", "calculator"] and "127750" in result["final_answer"]


async def test_async_invoke_and_streaming_give_the_same_run(graph):
    sync = ask(graph, "计算 (15 + 27) * 3 等于多少")
    result = await graph.ainvoke({"messages": [HumanMessage("计算 (15 + 27) * 3 等于多少")]}, context=Context())
    assert result["final_answer"] == sync["final_answer"] and nodes_of(result) == nodes_of(sync)
    streamed = [next(iter(u)) async for u in graph.astream(
        {"messages": [HumanMessage("计算 (15 + 27) * 3 等于多少")]}, context=Context(), stream_mode="updates")]
    assert streamed == ["load_memory", "plan", "execute_step", "act", "observe", "execute_step", "solve",
                        "save_memory"]
