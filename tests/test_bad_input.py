"""Bad input gets one line and nothing runs: empty questions (CLI and Python), Context values (also as the
mapping Studio or the HTTP API sends), unknown --allow/--deny names; and a failed tool call is explained by
its real cause (timeout, transient error, circuit open, error), never "circuit open" for every failure."""

from __future__ import annotations

import json
import re
import textwrap
import time
import uuid

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph.graph import Context, build_plan_solve_graph, build_react_graph, build_reflexion_graph
from reactgraph.graph.sessions import plan_run
from reactgraph.memory.redis_checkpoint import RedisSaver
from reactgraph.nodes.context import InvalidContext, UnknownToolNames, resolve_context
from reactgraph.nodes.conversation import EmptyQuestion
from reactgraph.tools import default_gateway
from reactgraph.tools.call import ToolError, TransientToolError
from reactgraph.tools.meta import ToolMeta
from reactgraph.tools.resilience import BreakerConfig
from support.scripted import ScriptedChatModel, notes_gateway

BUILDERS = [build_react_graph, build_plan_solve_graph, build_reflexion_graph]
EMPTY = ["", "   ", "\t\n", "\u3000\u200b\ufeff"]  # ideographic space, zero-width space, BOM: nothing visible


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def checkpoints(saver, session: str) -> list:
    return list(saver.list({"configurable": {"thread_id": session}}))


# --- empty questions ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("question", EMPTY)
def test_an_empty_question_is_one_line_exit_2_and_nothing_is_saved(question, cli, cli_session, redis_url):
    from reactgraph.memory import RedisStore

    code, out, err = cli("ask", question, "--session", cli_session)
    assert code == 2 and out == ""
    assert "question is" in one_line(err) and "nothing was run" in err
    with RedisSaver.from_url(redis_url) as saver:
        assert checkpoints(saver, cli_session) == []
    with RedisStore.from_url(redis_url) as store:
        assert store.search(("sessions", cli_session), limit=10) == []


def test_an_empty_question_with_json_prints_nothing_on_stdout(cli, cli_session):
    code, out, err = cli("ask", " ", "--session", cli_session, "--json")
    assert code == 2 and out == "" and one_line(err).startswith("error: QUESTION:")


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("question", EMPTY[:2] + EMPTY[3:])
def test_plan_run_refuses_an_empty_question_before_any_checkpoint(builder, question, redis_url, cli_session):
    with RedisSaver.from_url(redis_url) as saver:
        graph = builder(checkpointer=saver)
        with pytest.raises(EmptyQuestion, match="question is") as raised:
            plan_run(graph, question, cli_session)
        assert isinstance(raised.value, ValueError)
        assert checkpoints(saver, cli_session) == []
        plan = plan_run(graph, "计算 2 + 3", cli_session)  # a real question on the same session still runs
        assert plan.mode == "new"


def empty_turn(builder, question: str, model: ScriptedChatModel) -> tuple:
    """A graph whose model and tool record every call, and the input of a bare invoke: a long session (its
    window would fold it into a summary with a model call) ending in `question`."""
    ran: list[str] = []
    gateway = notes_gateway(found=lambda topic: bool(ran.append(topic)) or True)
    history = [m for i in range(4) for m in (HumanMessage(f"q{i}"), AIMessage(f"a{i}"))]
    return builder(gateway, model=model), {"messages": [*history, HumanMessage(question)]}, ran


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("question", EMPTY)
def test_a_bare_invoke_refuses_an_empty_question_before_any_model_or_tool_call(builder, question):
    model = ScriptedChatModel.of(AIMessage("should never be asked"))
    graph, state, ran = empty_turn(builder, question, model)
    with pytest.raises(EmptyQuestion, match="question is") as raised:
        graph.invoke(state, context=Context(memory_window=2))
    assert len(str(raised.value).splitlines()) == 1
    assert model.requests == [] and ran == []


@pytest.mark.parametrize("builder", BUILDERS)
async def test_a_bare_ainvoke_refuses_an_empty_question_the_same_way(builder):
    model = ScriptedChatModel.of(AIMessage("should never be asked"))
    graph, state, ran = empty_turn(builder, " \u3000", model)
    with pytest.raises(EmptyQuestion, match="only whitespace"):
        await graph.ainvoke(state, context={"memory_window": 2})  # a mapping, as Studio sends it
    assert model.requests == [] and ran == []


@pytest.mark.parametrize("builder", BUILDERS)
def test_no_question_at_all_is_refused_as_empty(builder):
    with pytest.raises(EmptyQuestion, match="question is empty"):
        builder(default_gateway()).invoke({"messages": []}, context=Context())


# --- Context ----------------------------------------------------------------------------------------------------

BAD_CONTEXTS = [
    ({"max_iterations": 0}, "max_iterations = 0", "an integer from 1 to 50"),
    ({"max_iterations": 51}, "max_iterations = 51", "an integer from 1 to 50"),
    ({"max_iterations": True}, "max_iterations = True", "an integer"),
    ({"max_iterations": "5"}, "max_iterations = '5'", "an integer"),
    ({"protocol": "xml"}, "protocol = 'xml'", "one of 'tools', 'text'"),
    ({"reflection": "sometimes"}, "reflection = 'sometimes'", "one of 'llm', 'rules', 'off', 'inline'"),
    ({"temperature": -0.5}, "temperature = -0.5", "a number from 0 to 2"),
    ({"observation_budget": 0}, "observation_budget = 0", "an integer from 200 to 100000"),
    ({"memory_window": 1}, "memory_window = 1", "an integer from 2 to 1000"),
    ({"replan": "yes"}, "replan = 'yes'", "true or false"),
    ({"allowed_tools": "search"}, "allowed_tools = 'search'", "a list of tool names or tags"),
    ({"denied_tools": [""]}, "denied_tools = ('',)", "each 1 to 100 characters"),
    ({"system_prompt": "x" * 30_000}, "system_prompt = 'xxx", "at most 20,000 characters"),
    ({"model": 5}, "model = 5", "text"),
    ({"max_iter": 3}, "unknown Context field(s) max_iter", "known: allowed_tools"),
]


@pytest.mark.parametrize(("mapping", "named", "accepted"), BAD_CONTEXTS)
def test_a_bad_context_mapping_is_one_line_and_the_run_never_starts(mapping, named, accepted):
    saver = InMemorySaver()
    graph = build_react_graph(checkpointer=saver)
    config = {"configurable": {"thread_id": "bad-context"}}
    with pytest.raises((InvalidContext, TypeError)) as raised:  # an unknown key: LangGraph's own Context(**…)
        graph.invoke({"messages": [HumanMessage("计算 2 + 3")]}, config=config, context=dict(mapping))
    message = str(raised.value)
    if isinstance(raised.value, InvalidContext):  # a ValueError: what the server API reports as a bad request
        assert named in message and accepted in message and "\n" not in message
    else:
        assert "max_iter" in message
    assert checkpoints(saver, "bad-context") == []
    with pytest.raises(InvalidContext, match=re.escape(named.split(" = ")[0])):
        resolve_context(mapping)  # the nodes' own path names the field the same way, unknown keys included


def test_several_bad_values_are_named_together_in_one_line():
    with pytest.raises(InvalidContext) as raised:
        Context(max_iterations=0, protocol="xml")
    assert "max_iterations = 0" in str(raised.value) and "protocol = 'xml'" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_json_context_with_lists_is_accepted_and_runs():
    graph = build_react_graph(checkpointer=InMemorySaver())
    context = json.loads('{"max_iterations": 2, "denied_tools": ["search"], "allowed_tools": ["math"], '
                         '"temperature": 0, "reflection": "rules"}')
    result = graph.invoke({"messages": [HumanMessage("计算 (15 + 27) * 3 等于多少")]},
                          config={"configurable": {"thread_id": "json"}}, context=context)
    assert result["status"] == "answered" and "126" in result["final_answer"]
    assert resolve_context(context).denied_tools == ("search",)


def test_the_bounds_reach_studios_form():
    schema = build_react_graph().get_context_jsonschema()["properties"]
    assert (schema["max_iterations"]["minimum"], schema["max_iterations"]["maximum"]) == (1, 50)
    assert schema["observation_budget"]["maximum"] == 100_000 and schema["temperature"]["minimum"] == 0
    assert all(prop.get("description") for prop in schema.values())


def test_a_bad_cli_flag_names_the_flag(cli):
    code, out, err = cli("ask", "q", "--max-iterations", "51", "--store", "memory")
    assert code == 2 and out == ""
    assert one_line(err) == "error: --max-iterations: 51 is not accepted: expected an integer from 1 to 50"


# --- --allow / --deny names ---------------------------------------------------------------------------------------

USER_TOOLS = '''
from reactgraph.tools.meta import ToolMeta

def stock_price(symbol: str) -> dict:
    """The price of a stock symbol."""
    return {"symbol": symbol, "price": 1.0}

TOOLS = [ToolMeta.from_function(stock_price, tags=("finance",))]
'''


@pytest.mark.parametrize(("flags", "named"), [
    (["--deny", "nosuchtool"], "--deny 'nosuchtool'"),
    (["--allow", "serach"], "--allow 'serach'"),
    (["--allow", "math", "--deny", "wether"], "--deny 'wether'"),
])
def test_an_unknown_allow_or_deny_name_is_one_line_listing_the_tools_and_tags(flags, named, cli, cli_session):
    code, _, err = cli("ask", "计算 2 + 3", "--session", cli_session, *flags)
    line = one_line(err)
    assert code == 2 and named in line and "not a tool or a tag" in line
    assert "tools: calculator, get_time, get_weather" in line and "tags: " in line and "math" in line


def test_names_and_tags_of_user_tools_are_known(cli, cli_session, tmp_path, monkeypatch):
    module = f"user_tools_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(USER_TOOLS), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = cli("ask", "计算 2 + 3", "--session", cli_session, "--tools", f"{module}:TOOLS",
                         "--deny", "finance", "--deny", "stock_price", "--json")
    assert code == 0, err
    assert "5" in json.loads(out)["answer"]
    code, _, err = cli("ask", "计算 2 + 3", "--session", cli_session, "--tools", f"{module}:TOOLS",
                       "--deny", "stocks")
    assert code == 2 and "stock_price" in one_line(err) and "finance" in err


def test_python_warns_about_an_unknown_name_and_the_run_goes_on():
    graph = build_react_graph(checkpointer=InMemorySaver())
    with pytest.warns(UnknownToolNames, match="denied_tools 'nosuch': not a tool or a tag; tools: calculator"):
        result = graph.invoke({"messages": [HumanMessage("计算 2 + 3")]},
                              config={"configurable": {"thread_id": "warn"}}, context=Context(denied_tools=["nosuch"]))
    assert result["status"] == "answered"


# --- fault explanations -------------------------------------------------------------------------------------------

def _weather_tool(behaviour: str) -> ToolMeta:
    def get_weather(city: str) -> dict:
        """Current weather of a city."""
        if behaviour == "transient":
            raise TransientToolError("get_weather is temporarily unavailable (injected fault: simulated 503)")
        if behaviour == "slow":
            time.sleep(1.0)
            return {"city": city}
        raise ToolError(f"no weather data for {city}")

    options = {"transient": {"max_attempts": 2}, "slow": {"timeout_s": 0.05}}.get(behaviour, {})
    return ToolMeta.from_function(get_weather, **options)


def _answer(gateway, question: str, protocol: str) -> str:
    graph = build_react_graph(gateway, checkpointer=InMemorySaver())
    result = graph.invoke({"messages": [HumanMessage(question)]}, config={"configurable": {"thread_id": "f"}},
                          context=Context(protocol=protocol, reflection="rules"))
    return result["final_answer"]


CIRCUIT_WORDS = ("熔断", "circuit open")


@pytest.mark.parametrize("protocol", ["tools", "text"])
@pytest.mark.parametrize(("behaviour", "zh", "en"), [
    ("transient", "工具临时故障", "the tool had a transient error"),
    ("slow", "工具超时", "the tool timed out"),
    ("broken", "工具调用失败：no weather data for 北京", "the tool call failed: no weather data for Beijing"),
])
def test_a_failed_call_is_explained_by_its_real_cause_in_the_answers_language(behaviour, zh, en, protocol):
    answer_zh = _answer(default_gateway(extra_tools=[_weather_tool(behaviour)]), "北京天气怎么样？", protocol)
    answer_en = _answer(default_gateway(extra_tools=[_weather_tool(behaviour)]), "What's the weather in Beijing?",
                        protocol)
    assert zh in answer_zh and en in answer_en
    assert not any(word in answer_zh + answer_en for word in CIRCUIT_WORDS)
    if behaviour == "transient" and protocol == "tools":  # the gateway says how often it was tried
        assert "2 次尝试都失败" in answer_zh and "2 attempts failed" in answer_en


def test_an_open_circuit_is_called_an_open_circuit():
    gateway = default_gateway(extra_tools=[_weather_tool("broken")], breaker=BreakerConfig(failure_threshold=1))
    first = _answer(gateway, "北京天气怎么样？", "tools")
    assert "工具调用失败" in first and "熔断" not in first
    second = _answer(gateway, "上海天气怎么样？", "tools")
    assert "熔断中" in second
    assert "circuit open" in _answer(gateway, "What's the weather in Shanghai?", "text")
