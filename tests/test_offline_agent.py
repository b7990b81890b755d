"""The default agent end to end: the compiled ReAct graph, the built-in tools and the scripted offline model."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import HumanMessage

from reactgraph.graph import Context, build_react_graph
from reactgraph.tools import ToolError, ToolGateway, default_gateway
from reactgraph.tools.builtin import builtin_tools


@pytest.fixture(scope="module")
def graph():
    return build_react_graph(default_gateway())


def run(graph, question: str, **context):
    return graph.invoke({"messages": [HumanMessage(question)]}, context=Context(**context))


def tool_sequence(result) -> list[str]:
    return [s["action"] for s in result["steps"] if s["node"] == "act"]


def test_what_time_is_it_uses_get_time(graph):
    result = run(graph, "现在几点了？")
    assert tool_sequence(result) == ["get_time"] and result["status"] == "answered"


@pytest.mark.parametrize(("question", "cities", "hotter"), [
    ("北京和上海的天气分别怎么样？哪个城市更热？", ["北京", "上海"], "上海"),
    ("广州和哈尔滨今天天气如何？哪个更冷？", ["广州", "哈尔滨"], "哈尔滨"),
    ("Compare the weather in London and Singapore: which city is warmer?", ["London", "Singapore"], "Singapore"),
])
def test_weather_for_each_city_in_parallel_then_a_comparison(graph, question, cities, hotter):
    result = run(graph, question)
    acts = [s for s in result["steps"] if s["node"] == "act"]
    assert [s["action"] for s in acts] == ["get_weather"] * len(cities)
    assert {s["step"] for s in acts} == {1}  # one round: the calls ran together
    assert [s["action_input"]["city"] for s in acts] == cities
    assert hotter in result["final_answer"].splitlines()[-1]


@pytest.mark.parametrize(("question", "expected"), [
    ("计算 (15 + 27) * 3 等于多少", "126"),
    ("what is 12 times 7?", "84"),
    ("（100 - 4）÷ 8 是多少？", "12"),
])
def test_arithmetic_goes_through_the_calculator(graph, question, expected):
    result = run(graph, question)
    assert tool_sequence(result) == ["calculator"] and expected in result["final_answer"]


def test_what_is_x_searches_the_knowledge_base(graph):
    result = run(graph, "什么是 LangChain？")
    assert tool_sequence(result) == ["search"] and "LangChain" in result["final_answer"]


def test_multi_hop_search_then_calculator_twice(graph):
    question = ("Python 诞生于哪一年？到 2026 年它已经诞生了多少年？如果一个程序员从它诞生那年开始每天写 10 行代码，"
                "到现在一共写了多少行代码（按每年 365 天计算）？")
    result = run(graph, question)
    assert tool_sequence(result) == ["search", "calculator", "calculator"]
    assert all(n in result["final_answer"] for n in ("1991", "35", "127750"))


def test_multi_hop_with_another_subject_and_numbers(graph):
    result = run(graph, "Linux 诞生于哪一年？到 2030 年它诞生了多少年？"
                        "如果每天写 20 行代码，一共写了多少行（每年 365 天）？")
    assert tool_sequence(result) == ["search", "calculator", "calculator"]
    assert "1991" in result["final_answer"] and str(39 * 365 * 20) in result["final_answer"]


def test_who_is_the_ceo_and_how_old(graph):
    result = run(graph, "苹果公司的现任 CEO 叫什么名字？他今年多少岁了？")
    assert tool_sequence(result)[0] == "search" and "calculator" in tool_sequence(result)
    assert "库克" in result["final_answer"] or "Tim Cook" in result["final_answer"]


def test_an_unhandled_question_gets_an_honest_refusal_not_a_guess(graph):
    result = run(graph, "写一首关于秋天的诗")
    assert tool_sequence(result) == [] and result["status"] == "no_answer"
    assert "offline" in result["final_answer"].lower() or "离线" in result["final_answer"]


def gateway_without_weather() -> ToolGateway:
    return ToolGateway([meta for meta in builtin_tools() if meta.name != "get_weather"])


def test_a_failing_weather_tool_leads_to_a_fallback_and_an_honest_gap():
    gateway = gateway_without_weather()

    @gateway.tool(name="get_weather")
    def get_weather(city: str) -> dict:
        """Weather for a city (broken on purpose)."""
        raise ToolError("weather backend down")

    result = run(build_react_graph(gateway), "北京的天气怎么样？")
    sequence = tool_sequence(result)
    assert sequence[0] == "get_weather" and "search" in sequence[1:]
    # The search fallback may or may not find a temperature; either way the status says which.
    assert result["status"] in ("answered", "no_answer", "limit_reached") and result["final_answer"]


def test_a_timing_out_tool_does_not_crash_and_the_answer_says_what_is_missing():
    gateway = gateway_without_weather()

    @gateway.tool(name="get_weather", timeout_s=0.2)
    async def get_weather(city: str) -> dict:
        """Weather for a city (hangs on purpose)."""
        await asyncio.sleep(10)
        return {}

    result = run(build_react_graph(gateway), "北京和上海的天气分别怎么样？", max_iterations=2)
    statuses = {s["status"] for s in result["steps"] if s["node"] == "act"}
    assert "timeout" in statuses and result["final_answer"]


def test_iteration_limit_answers_from_observations_and_names_the_gap(graph):
    question = ("Python 诞生于哪一年？到 2026 年它已经诞生了多少年？"
                "如果每天写 10 行代码，一共写了多少行（每年 365 天）？")
    result = run(graph, question, max_iterations=1)
    assert result["status"] == "limit_reached" and tool_sequence(result) == ["search"]
    assert "1991" in result["final_answer"] and "缺少" in result["final_answer"]


def test_rules_reflection_reaches_the_same_answer(graph):
    result = run(graph, "计算 (15 + 27) * 3 等于多少", reflection="rules")
    assert "126" in result["final_answer"] and result["status"] == "answered"
