"""The scripted offline model, driven by a small think/act loop over a fake tool executor with canned data."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

import reactgraph.models.offline
from reactgraph.models.offline import OfflineChatModel
from reactgraph.nodes.state import ReflectionVerdict

# --- the tool contract (schemas only: the model sees names and parameters) -------------------------------


def calculator(expression: str) -> dict:
    """Evaluate an arithmetic expression."""


def get_time(timezone: str = "") -> dict:
    """Current date and time in a timezone or city."""


def get_weather(city: str) -> dict:
    """Current weather of a city."""


def search(query: str, top_k: int = 3) -> dict:
    """Search the offline knowledge base."""


def http_get(url: str) -> dict:
    """Fetch a URL."""


ALL_TOOLS = [calculator, get_time, get_weather, search, http_get]
# The purpose the model gateway tags a request with (run metadata, models/purpose.py)
REFLECT = {"metadata": {"reactgraph_purpose": "reflect"}}

# --- canned data ----------------------------------------------------------------------------------------

KB = [
    (["python", "guido"], "Python", "Python 是一种高级编程语言，由 Guido van Rossum 创造，1991 年首次发布。",
     "Python is a high-level programming language created by Guido van Rossum, first released in 1991."),
    (["langchain"], "LangChain", "LangChain 是一个用于构建大语言模型应用的开源框架，2022 年发布。",
     "LangChain is an open-source framework for building applications with large language models."),
    (["langgraph"], "LangGraph", "LangGraph 是 LangChain 团队推出的有状态多智能体图编排库。",
     "LangGraph is a library for building stateful, multi-actor agent workflows as graphs."),
    (["react"], "ReAct", "ReAct 是把推理（Reasoning）和行动（Acting）交替进行的智能体范式。",
     "ReAct is an agent paradigm that interleaves reasoning and acting."),
    (["deepseek", "深度求索"], "DeepSeek", "DeepSeek（深度求索）是一家中国人工智能公司，发布了 DeepSeek-V3 等模型。",
     "DeepSeek is a Chinese AI company known for the DeepSeek-V3 models."),
    (["nvidia", "英伟达"], "NVIDIA market value", "英伟达（NVIDIA）的市值一度超过 3 万亿美元。",
     "NVIDIA's market value has exceeded 3 trillion US dollars."),
    (["apple ceo", "苹果公司 现任 ceo", "apple current ceo"], "Apple CEO",
     "苹果公司现任首席执行官（CEO）是蒂姆·库克（Tim Cook），他于 2011 年接替史蒂夫·乔布斯（Steve Jobs）。",
     "Apple's current CEO is Tim Cook, who succeeded Steve Jobs in 2011."),
    (["tim cook", "库克"], "Tim Cook",
     "蒂姆·库克（Tim Cook），1960年11月1日出生于美国阿拉巴马州，2011 年起任苹果 CEO。",
     "Tim Cook was born on November 1, 1960, in Alabama, and has been Apple's CEO since 2011."),
    (["linux", "torvalds"], "Linux", "Linux 内核由 Linus Torvalds 开发，于 1991 年首次发布。",
     "The Linux kernel was created by Linus Torvalds and first released in 1991."),
    (["elon musk", "马斯克"], "Elon Musk",
     "埃隆·马斯克（Elon Musk）1971年6月28日出生于南非，是特斯拉和 SpaceX 的 CEO。",
     "Elon Musk was born on June 28, 1971, in South Africa; he is the CEO of Tesla and SpaceX."),
    (["tesla ceo", "特斯拉 ceo", "tesla current ceo", "特斯拉 现任 ceo"], "Tesla CEO",
     "特斯拉的 CEO 是埃隆·马斯克（Elon Musk）。", "Tesla's CEO is Elon Musk."),
    (["杭州 天气", "hangzhou weather"], "杭州天气", "杭州今天小雨，气温 19°C，东风 2 级。",
     "Hangzhou today: light rain, 19°C."),
    (["spacex", "星舰", "starship"], "SpaceX Starship", "星舰（Starship）是 SpaceX 研制的可重复使用超重型运载火箭。",
     "Starship is SpaceX's fully reusable super heavy-lift launch vehicle."),
]
WEATHER = {
    "北京": ("晴", 18), "上海": ("多云", 22), "广州": ("阵雨", 27), "深圳": ("阴", 27), "杭州": ("小雨", 20),
    "Beijing": ("Sunny", 18), "Shanghai": ("Cloudy", 22), "Paris": ("Rain", 12), "London": ("Fog", 9),
    "Rome": ("Sunny", 21), "Madrid": ("Clear", 24), "Tokyo": ("Cloudy", 16), "东京": ("多云", 16),
}
TIME_ZONES = {"": ("Asia/Shanghai", "+08:00", "10:30:00"), "Asia/Tokyo": ("Asia/Tokyo", "+09:00", "11:30:00"),
              "Asia/Shanghai": ("Asia/Shanghai", "+08:00", "10:30:00"), "UTC": ("UTC", "+00:00", "02:30:00"),
              "America/New_York": ("America/New_York", "-04:00", "22:30:00"),
              "Europe/London": ("Europe/London", "+00:00", "02:30:00")}


def _search(query: str, top_k: int = 3) -> dict:
    q = query.lower()
    scored = [(sum(k in q for k in keys), title, zh, en) for keys, title, zh, en in KB]
    results = [{"title": t, "snippet": zh if any("\u4e00" <= c <= "\u9fff" for c in query) else en,
                "source": f"kb://{t.lower().replace(' ', '-')}", "score": s}
               for s, t, zh, en in sorted(scored, key=lambda x: -x[0]) if s > 0][:top_k]
    if not results:
        return {"query": query, "found": False, "results": [], "message": "No matching documents."}
    return {"query": query, "found": True, "results": results}


def _time(timezone: str = "", date: str = "2026-03-15") -> dict:
    tz, offset, clock = TIME_ZONES.get(timezone) or TIME_ZONES[""]
    return {"timezone": tz, "iso": f"{date}T{clock}{offset}", "date": date, "time": clock, "weekday": "Sunday",
            "year": int(date[:4]), "utc_offset": offset}


def _weather(city: str) -> dict:
    if city not in WEATHER:
        return {"found": False, "city": city, "message": f"No weather data for {city}.",
                "known_cities": ["北京", "上海", "广州"]}
    condition, temp = WEATHER[city]
    return {"found": True, "city": city, "condition": condition, "temperature_c": temp, "humidity": 40,
            "wind": "NE 2", "source": "offline-weather"}


@dataclass
class FakeExecutor:
    """Runs tool calls against the canned data; `fail` maps a tool name or (name, first arg) to an error text."""

    fail: dict[Any, str] = field(default_factory=dict)
    date: str = "2026-03-15"

    def __call__(self, call: dict) -> ToolMessage:
        name, args = call["name"], call["args"]
        first = next(iter(args.values()), "")
        error = self.fail.get((name, first)) or self.fail.get(name)
        if error:
            return ToolMessage(error, tool_call_id=call["id"], name=name, status="error")
        if name == "calculator":
            try:
                value = eval(args["expression"], {"__builtins__": {}})  # test data only
            except ZeroDivisionError as exc:
                return ToolMessage(f"Tool calculator failed: {exc}", tool_call_id=call["id"], name=name,
                                   status="error")
            result = {"expression": args["expression"], "result": value}
        elif name == "get_time":
            result = _time(args.get("timezone", ""), self.date)
        elif name == "get_weather":
            result = _weather(args["city"])
        elif name == "search":
            result = _search(args["query"], args.get("top_k", 3))
        elif name == "http_get":
            result = {"url": args["url"], "status_code": 200, "content_type": "text/html",
                      "body": "<html><title>Example Domain</title><p>This domain is for examples.</p></html>",
                      "truncated": False}
        else:
            return ToolMessage(f"Unknown tool '{name}'.", tool_call_id=call["id"], name=name, status="error")
        return ToolMessage(json.dumps(result, ensure_ascii=False), tool_call_id=call["id"], name=name)


@dataclass
class Run:
    answer: str
    messages: list[BaseMessage]
    start: int = 0  # index of this turn's question; earlier messages are history

    @property
    def rounds(self) -> list[list[tuple[str, dict]]]:
        return [[(c["name"], c["args"]) for c in m.tool_calls] for m in self.messages[self.start:]
                if isinstance(m, AIMessage) and m.tool_calls]

    @property
    def calls(self) -> list[tuple[str, dict]]:
        return [c for r in self.rounds for c in r]

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


def run(question: str, *, tools=ALL_TOOLS, executor: FakeExecutor | None = None, history=(),
        max_rounds: int = 8) -> Run:
    executor = executor or FakeExecutor()
    model = OfflineChatModel().bind_tools(tools)
    messages: list[BaseMessage] = [*history, HumanMessage(question)]
    for _ in range(max_rounds):
        reply = model.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            return Run(reply.content, messages, start=len(history))
        messages.extend(executor(call) for call in reply.tool_calls)
    raise AssertionError(f"no final answer after {max_rounds} rounds: {messages}")


# --- helpers for assertions -----------------------------------------------------------------------------


def no_repeats(r: Run) -> None:
    keys = [(name, json.dumps(args, sort_keys=True, ensure_ascii=False)) for name, args in r.calls]
    assert len(keys) == len(set(keys)), f"a call was repeated: {keys}"


# --- time ------------------------------------------------------------------------------------------------


def test_what_time_is_it_now():
    r = run("现在几点了？")
    assert r.rounds == [[("get_time", {})]]
    assert "10:30" in r.answer and "星期日" in r.answer


@pytest.mark.parametrize("question, tz, clock", [
    ("what time is it in Tokyo?", "Asia/Tokyo", "11:30"),
    ("东京现在几点？", "Asia/Tokyo", "11:30"),
    ("纽约现在是什么时间", "America/New_York", "22:30"),
])
def test_time_in_a_city_passes_its_timezone(question, tz, clock):
    r = run(question)
    assert r.rounds == [[("get_time", {"timezone": tz})]]
    assert clock in r.answer


def test_the_gazetteer_is_read_from_the_models_data_file():
    data = Path(reactgraph.models.offline.__file__).parent / "data" / "cities.json"
    model = OfflineChatModel().bind_tools(ALL_TOOLS)
    for row in json.loads(data.read_text(encoding="utf-8"))["cities"]:
        for name in (row["en"], row["zh"], *row["aliases"]):
            question = f"what time is it in {name}?" if name.isascii() else f"{name}现在几点？"
            reply = model.invoke([HumanMessage(question)])
            assert [(c["name"], c["args"]) for c in reply.tool_calls] == [("get_time", {"timezone": row["tz"]})], name


def test_time_in_two_cities_is_two_parallel_calls():
    r = run("What's the time in New York and London?")
    assert r.rounds == [[("get_time", {"timezone": "America/New_York"}), ("get_time", {"timezone": "Europe/London"})]]
    assert "22:30" in r.answer and "02:30" in r.answer


# --- weather ---------------------------------------------------------------------------------------------


def test_two_cities_weather_in_one_round_and_which_is_hotter():
    r = run("北京和上海的天气分别怎么样？哪个城市更热？")
    assert r.rounds == [[("get_weather", {"city": "北京"}), ("get_weather", {"city": "上海"})]]
    thought = r.messages[1].content
    assert thought == "需要查询北京和上海的天气，然后比较温度。"
    assert "18" in r.answer and "22" in r.answer and "上海更热" in r.answer


@pytest.mark.parametrize("question, cities, expected", [
    ("广州和杭州哪个更冷？", ["广州", "杭州"], "杭州更冷"),
    ("广州和深圳的天气怎么样，哪个更热？", ["广州", "深圳"], "气温相同"),
    ("北京、上海和广州哪个城市最热？", ["北京", "上海", "广州"], "广州最热"),
    ("Compare the weather in Paris and London", ["Paris", "London"], "Paris is hotter"),
    ("Is it colder in Rome or Madrid?", ["Rome", "Madrid"], "Rome is colder"),
    ("Which is warmer today, Madrid or Paris? Check the weather.", ["Madrid", "Paris"], "Madrid is warmer"),
])
def test_weather_comparisons_generalise(question, cities, expected):
    r = run(question)
    assert r.rounds == [[("get_weather", {"city": c}) for c in cities]]
    assert expected in r.answer


def test_single_city_weather_in_english():
    r = run("What's the weather like in Beijing?")
    assert r.rounds == [[("get_weather", {"city": "Beijing"})]]
    assert "18°C" in r.answer and "Sunny" in r.answer


def test_city_without_data_gets_an_honest_no_data():
    r = run("火星城和北京的天气怎么样？")
    assert r.rounds == [[("get_weather", {"city": "火星城"}), ("get_weather", {"city": "北京"})]]
    assert "没有火星城的天气数据" in r.answer and "18" in r.answer


def test_weather_without_a_city_asks_which_city():
    r = run("今天天气怎么样？")
    assert r.calls == [] and "哪个城市" in r.answer


def test_time_and_weather_in_one_question():
    r = run("北京现在几点？天气怎么样？")
    assert sorted(r.names) == ["get_time", "get_weather"] and len(r.rounds) == 1


def test_follow_up_question_reuses_the_previous_kind_of_task():
    first = run("北京天气怎么样？")
    r = run("那上海呢？", history=first.messages)
    assert r.rounds == [[("get_weather", {"city": "上海"})]]
    assert "上海" in r.answer and "22" in r.answer


# --- arithmetic -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("question, expression, result", [
    ("计算 (15 + 27) * 3 等于多少", "(15 + 27) * 3", "126"),
    ("（１５＋２７）×３＝？", "(15 + 27) * 3", "126"),
    ("15 加 27 等于几？", "15 + 27", "42"),
    ("3 乘以 4 等于多少", "3 * 4", "12"),
    ("100 除以 8 是多少？", "100 / 8", "12.5"),
    ("what is 12 times 7?", "12 * 7", "84"),
    ("What is 2 to the power of 10?", "2 ** 10", "1024"),
    ("144 的平方根是多少？", "144 ** 0.5", "12"),
    ("What is the square root of 81?", "81 ** 0.5", "9"),
    ("一百二十三加四百五十六等于多少", "123 + 456", "579"),
    ("What is 15% of 80?", "15 / 100 * 80", "12"),
    ("2^8 - 6 ÷ 3", "2 ** 8 - 6 / 3", "254"),
])
def test_arithmetic_in_symbols_and_words(question, expression, result):
    r = run(question)
    assert r.rounds == [[("calculator", {"expression": expression})]]
    assert result in r.answer


# --- search ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("question, query, expected", [
    ("什么是 LangChain？", "LangChain", "kb://langchain"),
    ("What is LangGraph?", "LangGraph", "LangGraph is a library"),
    ("介绍一下 DeepSeek", "DeepSeek", "DeepSeek"),
    ("Tell me about SpaceX Starship.", "SpaceX Starship", "Starship is SpaceX"),
    ("NVIDIA 的市值是多少？", "NVIDIA 市值", "3 万亿美元"),
])
def test_fact_questions_search_the_key_words(question, query, expected):
    r = run(question)
    assert r.rounds == [[("search", {"query": query})]]
    assert expected in r.answer


def test_who_created_python_names_the_creator():
    r = run("谁创造了 Python?")
    assert r.names == ["search"] and "Python" in r.calls[0][1]["query"]
    assert "Guido van Rossum" in r.answer and "kb://python" in r.answer


def test_http_get_only_when_a_url_is_given():
    r = run("请获取 https://example.com/page?id=1 的标题")
    assert r.rounds == [[("http_get", {"url": "https://example.com/page?id=1"})]]
    assert "Example Domain" in r.answer


# --- multi-step chains ------------------------------------------------------------------------------------

PYTHON_QUESTION = ("Python 诞生于哪一年？到 2026 年它已经诞生了多少年？如果一个程序员从它诞生那年开始每天写 10 行代码，"
                   "到现在一共写了多少行代码（按每年 365 天计算）？")


def test_python_birth_year_years_and_lines_of_code():
    r = run(PYTHON_QUESTION)
    assert r.names == ["search", "calculator", "calculator"]
    assert r.calls[0][1]["query"].startswith("Python 诞生")
    assert r.calls[1][1] == {"expression": "2026 - 1991"}
    assert r.calls[2][1] == {"expression": "35 * 365 * 10"}
    for fact in ("1991", "35", "127750"):
        assert fact in r.answer


def test_linux_until_now_fetches_the_current_year_first():
    r = run("Linux 诞生于哪一年？到现在它已经诞生了多少年？如果一个程序员从那年开始每天写 20 行代码，一共写了多少行？")
    assert r.rounds[0][0] == ("get_time", {}) and r.rounds[0][1][0] == "search"
    assert r.calls[2:] == [("calculator", {"expression": "2026 - 1991"}),
                           ("calculator", {"expression": "35 * 365 * 20"})]
    assert "255500" in r.answer and "365" in r.answer


def test_english_chain_with_another_target_year():
    r = run("When was Linux first released? How many years will have passed by 2030? If someone wrote 50 lines "
            "of code per day since then, how many lines in total (365 days a year)?")
    assert [c for c in r.calls if c[0] == "calculator"] == [
        ("calculator", {"expression": "2030 - 1991"}), ("calculator", {"expression": "39 * 365 * 50"})]
    assert "get_time" not in r.names
    assert "711750" in r.answer and "1991" in r.answer


@pytest.mark.parametrize("date, age", [("2026-03-15", "65"), ("2026-12-01", "66")])
def test_apple_ceo_and_his_age(date, age):
    r = run("苹果公司的现任 CEO 叫什么名字？他今年多少岁了？", executor=FakeExecutor(date=date))
    assert r.rounds[0] == [("search", {"query": "苹果公司 现任 CEO"})]
    assert sorted(r.rounds[1]) == [("get_time", {}), ("search", {"query": "Tim Cook 出生"})]
    assert r.rounds[2] == [("calculator", {"expression": "2026 - 1960"})]
    assert "Tim Cook" in r.answer and f"{age} 岁" in r.answer and "生日" in r.answer


def test_english_ceo_age_chain():
    r = run("Who is the CEO of Apple? How old is he?")
    assert r.names == ["search", "search", "get_time", "calculator"]
    assert "Tim Cook" in r.answer and "65 years old" in r.answer


@pytest.mark.parametrize("question, name, age", [
    ("特斯拉的现任 CEO 是谁？他今年多少岁？", "Elon Musk", "54"),
    ("How old is Elon Musk?", "Elon Musk", "54"),
])
def test_other_people_and_ages(question, name, age):
    r = run(question)
    assert r.calls[-1] == ("calculator", {"expression": "2026 - 1971"})
    assert name in r.answer and age in r.answer


# --- failures and fallbacks ---------------------------------------------------------------------------------

TIMEOUT = "Tool get_weather timed out after 10s and is unavailable right now."


def test_weather_timeout_falls_back_to_search_once_then_says_what_is_missing():
    executor = FakeExecutor(fail={("get_weather", "上海"): TIMEOUT})
    r = run("北京和上海的天气分别怎么样？哪个城市更热？", executor=executor)
    assert r.rounds == [[("get_weather", {"city": "北京"}), ("get_weather", {"city": "上海"})],
                        [("search", {"query": "上海 天气"})]]
    assert "改为搜索“上海 天气”" in r.messages[4].content, r.messages[4].content
    assert "北京" in r.answer and "18" in r.answer
    assert "还缺少：上海的天气（工具超时" in r.answer and "无法比较" in r.answer
    no_repeats(r)


def test_weather_fallback_search_can_supply_the_temperature():
    r = run("北京和杭州哪个更热？", executor=FakeExecutor(fail={("get_weather", "杭州"): TIMEOUT}))
    assert r.calls[-1] == ("search", {"query": "杭州 天气"})
    assert "杭州更热" in r.answer and "19" in r.answer


def test_failed_search_is_rephrased():
    executor = FakeExecutor(fail={("search", "Python 诞生"): "Tool search failed: index unavailable"})
    r = run(PYTHON_QUESTION, executor=executor)
    assert r.calls[:2] == [("search", {"query": "Python 诞生"}), ("search", {"query": "Python"})]
    assert "127750" in r.answer
    no_repeats(r)


def test_search_that_finds_nothing_ends_in_an_honest_answer():
    r = run("什么是 Zyxwvut？")
    assert r.calls == [("search", {"query": "Zyxwvut"})]
    assert "还缺少" in r.answer and "Zyxwvut" in r.answer


def test_invalid_calculator_arguments_retry_with_another_spelling():
    executor = FakeExecutor(fail={("calculator", "(15 + 27) * 3"): "Invalid arguments for calculator: bad"})
    r = run("计算 (15 + 27) * 3 等于多少", executor=executor)
    assert r.calls == [("calculator", {"expression": "(15 + 27) * 3"}), ("calculator", {"expression": "(15+27)*3"})]
    assert "126" in r.answer


def test_everything_failing_never_repeats_a_call_and_answers_honestly():
    executor = FakeExecutor(fail={n: f"Tool {n} is temporarily unavailable (circuit open)." for n in
                                  ("search", "get_time", "calculator", "get_weather")})
    for question in (PYTHON_QUESTION, "苹果公司的现任 CEO 叫什么名字？他今年多少岁了？", "北京和上海哪个更热？"):
        r = run(question, executor=executor)
        no_repeats(r)
        assert "还缺少" in r.answer and "熔断" in r.answer


def test_only_bound_tools_are_called():
    r = run("北京和杭州的天气怎么样？", tools=[search])
    assert set(r.names) == {"search"}
    assert "杭州" in r.answer and "还缺少：北京的天气" in r.answer


def test_current_year_unavailable_keeps_what_is_known():
    executor = FakeExecutor(fail={"get_time": "Tool get_time timed out after 10s and is unavailable right now."})
    r = run("How old is Elon Musk?", executor=executor)
    assert r.names.count("get_time") == 2 and "calculator" not in r.names
    assert "June 28, 1971" in r.answer and "Missing:" in r.answer


# --- no tools bound: the finalize step -----------------------------------------------------------------


def test_no_tools_bound_answers_from_observations_and_lists_what_is_missing():
    executor = FakeExecutor(fail={("get_weather", "上海"): TIMEOUT})
    model = OfflineChatModel().bind_tools(ALL_TOOLS)
    messages: list[BaseMessage] = [HumanMessage("北京和上海的天气分别怎么样？哪个城市更热？")]
    first = model.invoke(messages)
    messages += [first, *[executor(c) for c in first.tool_calls]]
    final = OfflineChatModel().invoke(messages)
    assert not final.tool_calls
    assert "北京" in final.content and "18" in final.content
    assert "还缺少：上海的天气（工具超时）" in final.content


def test_no_tools_bound_in_english_midway_through_a_chain():
    model = OfflineChatModel().bind_tools(ALL_TOOLS)
    messages: list[BaseMessage] = [HumanMessage("Who is the CEO of Apple? How old is he?")]
    first = model.invoke(messages)
    messages += [first, *[FakeExecutor()(c) for c in first.tool_calls]]
    final = OfflineChatModel().invoke(messages)
    assert "Tim Cook" in final.content and "Missing:" in final.content and "date of birth" in final.content


# --- honesty about what it cannot do ----------------------------------------------------------------------


@pytest.mark.parametrize("question", ["写一首关于秋天的诗", "tell me a joke", "你好", "Write a haiku about the sea"])
def test_unhandled_questions_get_an_honest_answer(question):
    r = run(question)
    assert r.calls == []
    assert "REACTGRAPH_MODEL" in r.answer and ("离线" in r.answer or "offline" in r.answer)


# --- reflection advice and structured output -----------------------------------------------------------


def _after_first_round(question: str, executor: FakeExecutor | None = None) -> list[BaseMessage]:
    model = OfflineChatModel().bind_tools(ALL_TOOLS)
    messages: list[BaseMessage] = [HumanMessage(question)]
    reply = model.invoke(messages)
    return [*messages, reply, *[(executor or FakeExecutor())(c) for c in reply.tool_calls]]


def test_the_words_of_a_prompt_change_nothing():
    # It reads the conversation, the tools and the request's purpose, never the wording of our prompts.
    messages = _after_first_round(PYTHON_QUESTION)
    advice = SystemMessage("You are a ReAct agent.\n"
                           "Reflection: 最近一次调用重复了之前的调用，请停止重复，直接根据已有信息回答。")
    model = OfflineChatModel().bind_tools(ALL_TOOLS)
    with_advice, without = model.invoke([advice, *messages]), model.invoke(messages)
    assert with_advice.tool_calls == without.tool_calls and with_advice.tool_calls


def test_reflection_verdict_after_a_successful_round():
    messages = _after_first_round("北京和上海的天气分别怎么样？哪个城市更热？")
    verdict = OfflineChatModel().with_structured_output(ReflectionVerdict).invoke(messages, REFLECT)
    assert isinstance(verdict, ReflectionVerdict)
    assert verdict.enough_information and not verdict.tool_error and not verdict.repeated_call
    assert not verdict.need_other_tool and verdict.note


def test_reflection_verdict_after_a_failure_suggests_the_alternative():
    messages = _after_first_round("北京和上海的天气分别怎么样？哪个城市更热？",
                                  FakeExecutor(fail={("get_weather", "上海"): TIMEOUT}))
    verdict = OfflineChatModel().with_structured_output(ReflectionVerdict).invoke(messages, REFLECT)
    assert verdict.tool_error and verdict.need_other_tool and not verdict.enough_information
    assert "上海 天气" in verdict.note


def test_reflection_verdict_mid_chain_is_not_enough_yet():
    messages = _after_first_round(PYTHON_QUESTION)
    verdict = OfflineChatModel().with_structured_output(ReflectionVerdict).invoke(messages, REFLECT)
    assert not verdict.enough_information and not verdict.tool_error and "2026 - 1991" in verdict.note


def test_repeated_call_is_detected_and_its_advice_stops_the_loop():
    call = {"name": "search", "args": {"query": "LangChain"}, "type": "tool_call"}
    content = json.dumps(_search("LangChain"), ensure_ascii=False)
    messages: list[BaseMessage] = [
        HumanMessage("什么是 LangChain？"),
        AIMessage("", tool_calls=[{**call, "id": "a"}]), ToolMessage(content, tool_call_id="a"),
        AIMessage("", tool_calls=[{**call, "id": "b"}]), ToolMessage(content, tool_call_id="b"),
    ]
    verdict = OfflineChatModel().with_structured_output(ReflectionVerdict).invoke(messages, REFLECT)
    assert verdict.repeated_call and "重复" in verdict.note
    reply = OfflineChatModel().bind_tools(ALL_TOOLS).invoke(messages)  # it sees the repeat itself
    assert not reply.tool_calls and "LangChain" in reply.content and "repeated" not in reply.content


def test_structured_output_of_any_schema_is_filled_from_the_answer_by_type():
    from pydantic import BaseModel

    class Poem(BaseModel):
        text: str
        lines: int

    poem = OfflineChatModel().with_structured_output(Poem).invoke(_after_first_round("计算 3 + 4 等于多少"))
    assert isinstance(poem, Poem) and "7" in poem.text


def test_structured_output_include_raw():
    messages = _after_first_round("现在几点了？")
    out = OfflineChatModel().with_structured_output(ReflectionVerdict, include_raw=True).invoke(messages, REFLECT)
    assert out["parsed"].enough_information and out["raw"].tool_calls[0]["name"] == "ReflectionVerdict"


# --- metadata, determinism, ids, async ---------------------------------------------------------------------


def test_usage_and_response_metadata_on_every_message():
    from reactgraph.models.token_estimate import estimate_tokens

    assert estimate_tokens("北京abcd") == 3
    r = run("北京和上海的天气分别怎么样？哪个城市更热？")
    for message in r.messages:
        if isinstance(message, AIMessage):
            usage = message.usage_metadata
            assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
            assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
            assert message.response_metadata["model_name"] == "offline-scripted"


def test_model_is_labelled_as_scripted():
    model = OfflineChatModel()
    # asdict's `_type` is the model type LangChain reports (its `_llm_type`)
    assert model.asdict()["_type"] == "offline-scripted" and model.model_name == "offline-scripted"
    assert "not" in OfflineChatModel.__doc__.lower() and "scripted" in OfflineChatModel.__doc__.lower()


def test_same_messages_give_the_same_output():
    first, second = run(PYTHON_QUESTION), run(PYTHON_QUESTION)
    assert [(m.content, getattr(m, "tool_calls", None)) for m in first.messages] == \
        [(m.content, getattr(m, "tool_calls", None)) for m in second.messages]


def test_tool_call_ids_are_unique_across_turns():
    first = run("北京和上海的天气分别怎么样？哪个城市更热？")
    second = run("苹果公司的现任 CEO 叫什么名字？他今年多少岁了？", history=first.messages)
    ids = [c["id"] for m in second.messages if isinstance(m, AIMessage) for c in m.tool_calls]
    assert len(ids) == len(set(ids)) and ids[0] == "call_0_0"
    # earlier turns are context only: the second answer is about Tim Cook, not the weather
    assert "Tim Cook" in second.answer and "上海更热" not in second.answer


async def test_ainvoke_works():
    model = OfflineChatModel().bind_tools(ALL_TOOLS)
    reply = await model.ainvoke([HumanMessage("计算 (15 + 27) * 3 等于多少")])
    assert reply.tool_calls[0]["args"] == {"expression": "(15 + 27) * 3"}


# --- the text ReAct protocol (stop=["Observation:"]) -----------------------------------------------------


def run_text(question: str, executor: FakeExecutor | None = None, max_steps: int = 10) -> tuple[str, list[str]]:
    import re

    executor = executor or FakeExecutor()
    # the text protocol binds no tools (the model's reach is then every built-in one); these are the prompt's
    model = OfflineChatModel().bind_tools([calculator, get_time, get_weather, search])
    messages: list[BaseMessage] = [
        SystemMessage("Answer using tools: calculator, get_time, get_weather, search.\n"
                      "Format: Thought / Action / Action Input / Observation ... Final Answer"),
        HumanMessage(question)]
    actions: list[str] = []
    for step in range(max_steps):
        reply = model.invoke(messages, stop=["Observation:"])
        assert reply.usage_metadata["total_tokens"] > 0
        text = reply.content
        if "Final Answer:" in text:
            return text.split("Final Answer:", 1)[1].strip(), actions
        name = re.search(r"Action: (\S+)", text).group(1)
        args = json.loads(re.search(r"Action Input: (.*)", text).group(1))
        actions.append(name)
        observation = executor({"name": name, "args": args, "id": f"t{step}"})
        messages += [AIMessage(text), HumanMessage(f"Observation: {observation.content}")]
    raise AssertionError("no Final Answer")


def test_text_protocol_one_action_per_step():
    answer, actions = run_text("北京和上海的天气分别怎么样？哪个城市更热？")
    assert actions == ["get_weather", "get_weather"] and "上海更热" in answer


def test_text_protocol_chain_and_failure():
    executor = FakeExecutor(fail={("search", "Python 诞生"): "Tool search failed: index unavailable"})
    answer, actions = run_text(PYTHON_QUESTION, executor)
    assert actions == ["search", "search", "calculator", "calculator"] and "127750" in answer


def test_reflection_ignores_a_trailing_human_prompt():
    messages = _after_first_round("北京和上海的天气分别怎么样？哪个城市更热？")
    prompt = HumanMessage("Reflect on the observations above and give your verdict.")
    verdict = OfflineChatModel().with_structured_output(ReflectionVerdict).invoke([*messages, prompt], REFLECT)
    assert verdict.enough_information and not verdict.tool_error


def test_a_search_result_truncated_by_the_observe_budget_is_still_read():
    full = json.dumps(_search("Python 诞生"), ensure_ascii=False)
    messages: list[BaseMessage] = [
        HumanMessage(PYTHON_QUESTION),
        AIMessage("", tool_calls=[{"name": "search", "args": {"query": "Python 诞生"}, "id": "c1",
                                   "type": "tool_call"}]),
        ToolMessage(full[:140] + "…[truncated]", tool_call_id="c1"),
    ]
    reply = OfflineChatModel().bind_tools(ALL_TOOLS).invoke(messages)
    assert reply.tool_calls[0]["args"] == {"expression": "2026 - 1991"}


def test_structured_replies_are_keyed_by_the_requests_purpose(monkeypatch):
    from pydantic import BaseModel

    from reactgraph.models.offline import RESPONDERS

    class Anything(BaseModel):
        summary: str

    monkeypatch.setitem(RESPONDERS, "summarize", lambda messages: {"summary": f"{len(messages)} messages"})
    out = OfflineChatModel().with_structured_output(Anything).invoke(
        [HumanMessage("hi")], {"metadata": {"reactgraph_purpose": "summarize"}})
    assert out == Anything(summary="1 messages")


def test_a_person_is_not_given_the_release_year_of_their_product():
    r = run("Linus Torvalds 今年多少岁？")
    assert "calculator" not in r.names and "1991" not in r.answer.split("还缺少")[0]
    assert "出生日期" in r.answer


def test_a_thing_has_an_age_counted_from_its_release():
    r = run("Python 今年多少岁了？")
    assert r.calls[:2] == [("get_time", {}), ("search", {"query": "Python 诞生"})]
    assert "35 岁" in r.answer


def test_comparison_asked_in_a_follow_up_sentence():
    r = run("上海的温度是多少度？和 Tokyo 比呢？")
    assert r.rounds == [[("get_weather", {"city": "上海"}), ("get_weather", {"city": "东京"})]]
    assert "上海更热" in r.answer


def test_division_by_zero_is_reported_not_guessed():
    r = run("calculate 7 divided by 0")
    assert r.calls[0] == ("calculator", {"expression": "7 / 0"})
    assert "division by zero" in r.answer
    no_repeats(r)


def test_forcing_a_real_tool_is_not_mistaken_for_structured_output():
    reply = OfflineChatModel().bind_tools([calculator], tool_choice="any").invoke("计算 3 乘以 4")
    assert reply.tool_calls[0]["name"] == "calculator" and reply.tool_calls[0]["args"] == {"expression": "3 * 4"}
