"""Budgets (Context.max_tool_calls / max_model_tokens / max_cost_usd): each one in each graph, through the compiled
graphs, the CLI and real tools that count their own calls; nothing runs beyond the budget, and the answer says so."""

from __future__ import annotations

import dataclasses
import inspect
import json

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from reactgraph.graph import Context, build_plan_solve_graph, build_react_graph, build_reflexion_graph
from reactgraph.models import prices as model_prices
from reactgraph.models.token_estimate import estimate_tokens, usage_for
from reactgraph.nodes import budget
from reactgraph.tools import ToolGateway
from reactgraph.tools.builtin import builtin_tools
from support.scripted import ScriptedChatModel, call, notes_gateway, tool_agent, tool_reply

# The graph tests get their tool calls from test models (no question parsing): COMPOUND is asked of a model that
# looks both cities' weather up and then computes, one call a round (or a plan step) — three calls in all.
COMPOUND = "北京和上海的气温分别是多少？然后计算 3*7"
COMPOUND_CALLS = ([call("get_weather", "w1", city="北京")], [call("get_weather", "w2", city="上海")],
                  [call("calculator", "k1", expression="3*7")])
SIX_TIMES_SEVEN = "计算 6*7"


def compound_model():
    return tool_agent(*COMPOUND_CALLS)


def six_times_seven(*, passed: bool = True):
    """A model that computes 6*7 with the calculator (each Reflexion trial once), then answers with the result."""
    return tool_agent([call("calculator", "k1", expression="6*7")], passed=passed)
NOTE = "Stopped early: the {what} is used up"
NOTE_ZH = "提前结束：{what}已用完"  # a Chinese question's wrap-up is in Chinese


def counting_gateway() -> tuple[ToolGateway, list[str]]:
    """The built-in tools, each noting its name in `ran` when it actually runs."""
    ran: list[str] = []
    metas = []
    for meta in builtin_tools():
        original, name = meta.run, meta.name
        if inspect.iscoroutinefunction(original):
            async def run(*args, _run=original, _name=name, **kwargs):
                ran.append(_name)
                return await _run(*args, **kwargs)
        else:
            def run(*args, _run=original, _name=name, **kwargs):
                ran.append(_name)
                return _run(*args, **kwargs)
        metas.append(dataclasses.replace(meta, run=run))
    return ToolGateway(metas), ran


class ModelCalls(BaseCallbackHandler):
    """Counts chat-model calls of a run."""

    def __init__(self) -> None:
        self.count = 0

    def on_chat_model_start(self, *args, **kwargs) -> None:
        self.count += 1


def ask(graph, question: str, context: Context, thread: str = "t1", callbacks=()):
    return graph.invoke({"messages": [HumanMessage(question)]}, context=context,
                        config={"configurable": {"thread_id": thread}, "callbacks": list(callbacks)})


BUILDERS = {
    "react": (build_react_graph, {}),
    "plan_solve": (build_plan_solve_graph, {}),
    "plan_solve_replan": (build_plan_solve_graph, {"replan": True}),
    "reflexion": (build_reflexion_graph, {}),
}


def assert_wrapped_up(result: dict, kind: str, limit: float, what: str) -> None:
    assert result["status"] == "budget_exhausted" and result["stop_reason"] == "budget"
    assert result["budget"]["kind"] == kind and result["budget"]["limit"] == limit
    assert result["budget"]["used"] >= limit
    zh = any("\u4e00" <= ch <= "\u9fff" for ch in what)
    note, missing = (NOTE_ZH, "缺少") if zh else (NOTE, "missing")
    assert note.format(what=what) in result["final_answer"] and missing in result["final_answer"]


# --- max_tool_calls ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", BUILDERS)
def test_the_tool_call_budget_stops_each_graph_after_exactly_that_many_calls(name):
    builder, options = BUILDERS[name]
    gateway, ran = counting_gateway()
    result = ask(builder(gateway, model=compound_model()), COMPOUND, Context(max_tool_calls=1, **options))
    assert len(ran) == 1 and ran == ["get_weather"]
    assert_wrapped_up(result, "max_tool_calls", 1, "工具调用预算（1 次）")
    assert result["budget"]["used"] == 1 and result["usage"]["tool_calls"] == 1
    assert '"temperature_c":3' in result["final_answer"]  # answered from what the one call observed


def test_a_reply_with_many_calls_runs_only_those_that_fit_and_the_rest_are_answered_not_run():
    topics: list[str] = []
    gateway = notes_gateway(found=lambda topic: topics.append(topic) or True)
    calls = [call("lookup", f"c{i}", topic=f"t{i}") for i in range(10)]
    model = ScriptedChatModel.of(tool_reply("look all up", *calls),
                                 AIMessage("t0, t1 and t2 are known; the others could not be looked up."))
    result = ask(build_react_graph(gateway, model=model), "q", Context(reflection="rules", max_tool_calls=3))
    assert sorted(topics) == ["t0", "t1", "t2"]  # the first three of the reply; their tasks run concurrently
    records = [s for s in result["steps"] if s["node"] == "act"]
    assert [r["status"] for r in records] == ["ok"] * 3 + ["not_run"] * 7
    assert {r["observation"] for r in records[3:]} == {"not run: tool-call budget of 3 used up"}
    assert len(model.requests) == 2  # think, then the one closing call: no reflection, no further think
    assert_wrapped_up(result, "max_tool_calls", 3, "tool-call budget of 3")
    assert result["final_answer"].startswith("t0, t1 and t2 are known")


def test_the_tool_call_budget_adds_up_over_rounds():
    topics: list[str] = []
    gateway = notes_gateway(found=lambda topic: topics.append(topic) or True)
    model = ScriptedChatModel.of(tool_reply("one", call("lookup", "a", topic="a")),
                                 tool_reply("two more", call("lookup", "b", topic="b"), call("lookup", "c", topic="c")),
                                 AIMessage("a and b found"))
    result = ask(build_react_graph(gateway, model=model), "q", Context(reflection="rules", max_tool_calls=2))
    assert topics == ["a", "b"] and result["budget"] == {"kind": "max_tool_calls", "limit": 2, "used": 2}
    assert len(model.requests) == 3


@pytest.mark.parametrize("name", BUILDERS)
def test_calls_that_fit_the_budget_exactly_still_end_answered(name):
    builder, options = BUILDERS[name]
    gateway, ran = counting_gateway()
    result = ask(builder(gateway, model=six_times_seven()), SIX_TIMES_SEVEN, Context(max_tool_calls=1, **options))
    assert ran == ["calculator"] and result["status"] == "answered" and "42" in result["final_answer"]
    assert not result.get("stop_reason") and "提前结束" not in result["final_answer"]


def test_a_budget_of_zero_tool_calls_answers_without_tools():
    gateway, ran = counting_gateway()
    result = ask(build_react_graph(gateway, model=six_times_seven()), SIX_TIMES_SEVEN, Context(max_tool_calls=0))
    assert ran == [] and result["usage"]["tool_calls_refused"] == 1
    assert_wrapped_up(result, "max_tool_calls", 0, "工具调用预算（0 次）")


def test_without_a_budget_nothing_changes_and_usage_is_still_counted():
    gateway, ran = counting_gateway()
    result = ask(build_react_graph(gateway, model=compound_model()), COMPOUND, Context())
    assert result["status"] != "budget_exhausted" and not result.get("stop_reason") and not result.get("budget")
    assert len(ran) == 3 and result["usage"]["tool_calls"] == 3 and budget.tokens_used(result["usage"]) > 0


def test_each_question_on_a_thread_gets_the_whole_budget():
    from langgraph.checkpoint.memory import InMemorySaver

    gateway, ran = counting_gateway()
    # The first question computes nothing: the model's rounds are the weather's two, then 6*7 for the second
    # (each question's rounds counted from its own message).
    model = tool_agent([call("get_weather", "w1", city="北京")], [call("get_weather", "w2", city="上海")])
    graph = build_react_graph(gateway, checkpointer=InMemorySaver(), model=model)
    context = Context(max_tool_calls=1)
    first = ask(graph, COMPOUND, context, thread="same")
    graph = build_react_graph(gateway, checkpointer=graph.checkpointer, model=six_times_seven())
    second = ask(graph, SIX_TIMES_SEVEN, context, thread="same")
    assert first["status"] == "budget_exhausted" and first["usage"]["tool_calls"] == 1
    # The second question's usage starts from nothing: its one call runs (and spends its budget of 1).
    assert second["usage"]["tool_calls"] == 1 and ran == ["get_weather", "calculator"]
    assert "42" in second["final_answer"]


# --- max_model_tokens ----------------------------------------------------------------------------------------------

def _with_usage(reply: AIMessage, total: int) -> AIMessage:
    return reply.model_copy(update={"usage_metadata": {"input_tokens": total - 10, "output_tokens": 10,
                                                       "total_tokens": total}})


def test_the_token_budget_counts_the_providers_usage_and_stops_before_the_next_call():
    topics: list[str] = []
    gateway = notes_gateway(found=lambda topic: topics.append(topic) or True)
    model = ScriptedChatModel.of(_with_usage(tool_reply("first", call("lookup", "a", topic="graphs")), 100),
                                 _with_usage(tool_reply("second", call("lookup", "b", topic="never")), 100),
                                 AIMessage("never asked"))
    result = ask(build_react_graph(gateway, model=model), "q", Context(reflection="rules", max_model_tokens=150))
    assert topics == ["graphs"]  # the reply that crossed the line had its call answered "not run"
    assert len(model.requests) == 2  # no closing call: a token budget allows no further model call
    assert result["usage"]["input_tokens"] == 180 and result["usage"]["output_tokens"] == 20
    assert_wrapped_up(result, "max_model_tokens", 150, "model-token budget of 150")
    assert result["budget"]["used"] == 200 and "notes on graphs" in result["final_answer"]


def test_without_usage_metadata_the_tokens_are_the_projects_estimate():
    gateway = notes_gateway()
    reply = tool_reply("look it up", call("lookup", "a", topic="graphs"))
    model = ScriptedChatModel.of(reply)
    result = ask(build_react_graph(gateway, model=model), "what are graphs?",
                 Context(reflection="rules", max_model_tokens=1))
    expected = usage_for(model.requests[0]["messages"], reply)
    assert result["usage"]["input_tokens"] == expected["input_tokens"] > 0
    assert result["usage"]["output_tokens"] == expected["output_tokens"] > 0
    assert_wrapped_up(result, "max_model_tokens", 1, "model-token budget of 1")
    assert [s["status"] for s in result["steps"] if s["node"] == "act"] == ["not_run"]


@pytest.mark.parametrize("name", BUILDERS)
def test_the_token_budget_stops_each_graph_after_the_call_that_crossed_it(name):
    builder, options = BUILDERS[name]
    gateway, ran = counting_gateway()
    calls = ModelCalls()
    result = ask(builder(gateway, model=compound_model()), COMPOUND, Context(max_model_tokens=50, **options),
                 callbacks=[calls])
    assert ran == []  # the first model call crossed the line: none of its tool calls ran
    assert calls.count == 1
    assert_wrapped_up(result, "max_model_tokens", 50, "模型 token 预算（50）")


def test_a_larger_token_budget_lets_some_rounds_run_then_wraps_up():
    gateway, ran = counting_gateway()
    unbounded = ask(build_plan_solve_graph(gateway, model=compound_model()), COMPOUND, Context())
    spent = budget.tokens_used(unbounded["usage"])
    ran.clear()
    result = ask(build_plan_solve_graph(gateway, model=compound_model()), COMPOUND,
                 Context(max_model_tokens=spent // 2))
    assert 0 < len(ran) < 3
    assert_wrapped_up(result, "max_model_tokens", spent // 2, f"模型 token 预算（{spent // 2}）")
    assert "Steps not finished" in result["final_answer"]


# --- max_cost_usd and the price table ------------------------------------------------------------------------------

@pytest.fixture
def prices(monkeypatch):
    """The price table, restored afterwards."""
    monkeypatch.setattr(model_prices, "PRICES", dict(model_prices.PRICES))
    monkeypatch.delenv(model_prices.PRICES_ENV, raising=False)
    return model_prices.PRICES


def test_the_table_knows_common_models_and_offline_is_free(prices):
    assert model_prices.price_of("offline") == (0.0, 0.0)
    assert model_prices.price_of("openai:gpt-4o-mini") == (0.15, 0.60)
    assert model_prices.price_of("anthropic:claude-sonnet-4-0") == (3.0, 15.0)
    assert model_prices.price_of("openai:some-local-model") is None


@pytest.mark.parametrize("name", BUILDERS)
def test_a_registered_price_makes_the_cost_budget_stop_each_graph(name, prices):
    model_prices.register_price("offline", 1000.0, 1000.0)  # a dear model: the first call costs more than a cent
    builder, options = BUILDERS[name]
    gateway, ran = counting_gateway()
    result = ask(builder(gateway, model=compound_model()), COMPOUND, Context(max_cost_usd=0.01, **options))
    assert ran == [] and result["usage"]["cost_usd"] >= 0.01
    assert_wrapped_up(result, "max_cost_usd", 0.01, "费用预算（$0.01）")


def test_a_price_file_extends_the_table(prices, tmp_path, monkeypatch):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"offline": {"input": 1000, "output": 2000}, "openai:my-model": {"input": 1,
                                                                                              "output": 2}}))
    monkeypatch.setenv(model_prices.PRICES_ENV, str(path))
    assert model_prices.price_of("openai:my-model") == (1.0, 2.0)
    reply = _with_usage(AIMessage("done"), 1010)  # 1000 in, 10 out
    model = ScriptedChatModel.of(reply)
    result = ask(build_react_graph(notes_gateway(), model=model), "q", Context(max_cost_usd=5))
    assert result["usage"]["cost_usd"] == pytest.approx((1000 * 1000 + 10 * 2000) / 1e6)
    assert result["status"] == "answered"  # the model answered with the call that crossed the line


@pytest.mark.parametrize("content", ["not json", json.dumps({"x": {"input": -1, "output": 1}}), json.dumps([1])])
def test_a_bad_price_file_is_one_line_before_anything_runs(content, cli, tmp_path, monkeypatch):
    path = tmp_path / "prices.json"
    path.write_text(content)
    monkeypatch.setenv(model_prices.PRICES_ENV, str(path))
    code, out, err = cli("ask", "计算 6*7", "--max-cost", "1", "--store", "memory")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("error: REACTGRAPH_PRICES") or "price of" in err


# --- Context, Studio and the CLI -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("field", "value", "accepted"), [
    ("max_tool_calls", -1, "an integer from 0 to 10000, or null for no budget"),
    ("max_tool_calls", True, "an integer from 0 to 10000"),
    ("max_model_tokens", "500", "an integer from 1 to"),
    ("max_cost_usd", 0, "a number above 0 and at most 10000, or null for no budget"),
    ("max_cost_usd", -1.5, "a number above 0"),
])
def test_bad_budget_values_are_one_line(field, value, accepted):
    with pytest.raises(ValueError, match=f"Context.{field} = .* is not accepted: expected {accepted}"):
        Context(**{field: value})


def test_budgets_arrive_as_a_mapping_from_the_api():
    from reactgraph.nodes.context import resolve_context

    context = resolve_context({"max_tool_calls": 2, "max_model_tokens": None, "max_cost_usd": 0.5})
    assert (context.max_tool_calls, context.max_model_tokens, context.max_cost_usd) == (2, None, 0.5)


def test_the_budgets_are_in_studios_form():
    schema = build_react_graph().get_context_jsonschema()["properties"]
    for field in ("max_tool_calls", "max_model_tokens", "max_cost_usd"):
        assert schema[field].get("default") is None and "Budget" in schema[field]["description"]


def test_ask_with_a_budget_flag_wraps_up_with_status_budget_exhausted(cli, cli_session):
    # (The exit code of budget_exhausted is the statuses' part, not asserted here.)
    _, out, err = cli("ask", COMPOUND, "--session", cli_session, "--max-tool-calls", "1", "--json")
    payload = json.loads(out)
    assert payload["status"] == "budget_exhausted", err
    assert NOTE_ZH.format(what="工具调用预算（1 次）") in payload["answer"]


@pytest.mark.parametrize(("flags", "line"), [
    (["--max-tool-calls", "-1"], "error: --max-tool-calls: -1 is not accepted: expected an integer from 0 to 10000"),
    (["--max-tokens", "-5"], "error: --max-tokens: -5 is not accepted: expected an integer from 1 to"),
    (["--max-cost", "0"], "error: --max-cost: 0.0 is not accepted: expected a number above 0"),
])
@pytest.mark.parametrize("command", ["ask", "compare"])
def test_a_bad_budget_flag_is_one_line_naming_the_flag(command, flags, line, cli, tmp_path):
    args = ["ask", "q", "--store", "memory"] if command == "ask" else ["compare", "--out", str(tmp_path / "o")]
    code, out, err = cli(*args, *flags)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and err.startswith(line)


def test_compare_passes_the_budgets_to_every_run(cli, tmp_path):
    out = tmp_path / "results"
    code, _, err = cli("compare", "--graphs", "react,plan_solve", "--limit", "2", "--max-tool-calls", "1",
                       "--out", str(out), "--no-plots")
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["max_tool_calls"] == 1
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert records and all(r.get("tool_calls", 0) <= 1 for r in records)


async def test_the_async_path_counts_and_cuts_the_same_way():
    topics: list[str] = []
    gateway = notes_gateway(found=lambda topic: topics.append(topic) or True)
    model = ScriptedChatModel.of(tool_reply("all", *[call("lookup", f"c{i}", topic=f"t{i}") for i in range(4)]),
                                 AIMessage("t0 and t1 known"))
    result = await build_react_graph(gateway, model=model).ainvoke(
        {"messages": [HumanMessage("q")]}, context=Context(reflection="rules", max_tool_calls=2),
        config={"configurable": {"thread_id": "a"}})
    assert topics == ["t0", "t1"] and result["status"] == "budget_exhausted"


def test_a_reflexion_run_shares_its_budget_across_trials():
    gateway, ran = counting_gateway()
    result = build_reflexion_graph(gateway, model=six_times_seven()).invoke(
        {"messages": [HumanMessage(SIX_TIMES_SEVEN)], "expected": "no such answer"},
        context=Context(max_tool_calls=2), config={"configurable": {"thread_id": "r"}})
    # Trials 1 and 2 use one call each (the second spends the budget exactly and still answers); trial 3's call
    # is refused, and that ends the run.
    assert result["trial"] == 3 and ran == ["calculator", "calculator"]
    assert result["budget"] == {"kind": "max_tool_calls", "limit": 2, "used": 2}
    assert NOTE_ZH.format(what="工具调用预算（2 次）") in result["final_answer"]


@pytest.mark.parametrize(("question", "note", "foreign"), [
    (COMPOUND, "（提前结束：工具调用预算（1 次）已用完，已用 1。", "Stopped early"),
    ("What is the weather in Beijing and in Shanghai?", "(Stopped early: the tool-call budget of 1 is used up",
     "提前结束"),
])
def test_the_wrap_up_note_is_in_the_questions_language(question, note, foreign):
    gateway, _ = counting_gateway()
    result = ask(build_react_graph(gateway, model=compound_model()), question, Context(max_tool_calls=1))
    assert result["status"] == "budget_exhausted"
    assert note in result["final_answer"] and foreign not in result["final_answer"]


def _judged(passed: bool, total: int) -> AIMessage:
    return _with_usage(AIMessage("", tool_calls=[call("Evaluation", "e1", passed=passed, reason="part 2 is missing")]),
                       total)


def _lesson(total: int) -> AIMessage:
    return _with_usage(AIMessage("", tool_calls=[call("Lesson", "l1", lesson="Look part 2 up too.")]), total)


@pytest.mark.parametrize("question", ["what is x?", "x 是什么？"])
def test_a_budget_used_up_by_reflexions_evaluation_ends_the_run_budget_exhausted(question):
    model = ScriptedChatModel.of(_with_usage(AIMessage("x is a letter."), 20), _judged(False, 200),
                                 AIMessage("never asked"))
    result = ask(build_reflexion_graph(notes_gateway(), model=model), question,
                 Context(max_model_tokens=100, closing_check=False))  # the trial's one call is its answer
    assert len(model.requests) == 2  # the trial, its evaluation; no lesson, no second trial
    assert result["status"] == "budget_exhausted" and result["stop_reason"] == "budget"
    assert result["budget"] == {"kind": "max_model_tokens", "limit": 100, "used": 220}
    note = NOTE_ZH.format(what="模型 token 预算（100）") if "是" in question else NOTE.format(
        what="model-token budget of 100")
    assert result["final_answer"].startswith("x is a letter.") and note in result["final_answer"]
    assert result["messages"][-1].content == result["final_answer"]


def test_a_budget_used_up_by_reflexions_lesson_ends_the_run_before_another_trial():
    model = ScriptedChatModel.of(_with_usage(AIMessage("x is a letter."), 20), _judged(False, 20), _lesson(200),
                                 AIMessage("never asked"))
    result = ask(build_reflexion_graph(notes_gateway(), model=model), "what is x?",
                 Context(max_model_tokens=100, closing_check=False))  # the trial's one call is its answer
    assert len(model.requests) == 3 and result["trial"] == 1
    assert result["status"] == "budget_exhausted" and result["budget"]["kind"] == "max_model_tokens"
    assert result["lessons"] == ["Look part 2 up too."]  # the lesson it paid for is kept
    assert NOTE.format(what="model-token budget of 100") in result["final_answer"]


def test_a_passed_evaluation_keeps_its_status_even_when_judging_used_up_the_budget():
    model = ScriptedChatModel.of(_with_usage(AIMessage("x is a letter."), 20), _judged(True, 200))
    result = ask(build_reflexion_graph(notes_gateway(), model=model), "what is x?", Context(max_model_tokens=100))
    assert result["status"] == "answered" and not result.get("stop_reason")


# --- the memory summary is a model call of the turn ---------------------------------------------------------------

HISTORY = [message for letter in "uvwyz" for message in (HumanMessage(f"what is {letter}?"),
                                                         AIMessage(f"{letter} is a letter."))]
FOLDING = {"memory_window": 2, "reflection": "off", "closing_check": False}  # the earlier turns are folded


def _summary(total: int) -> AIMessage:
    return _with_usage(AIMessage("", tool_calls=[call("ConversationSummary", "s1", summary="y and z are letters.")]),
                       total)


def _summarised_turn(name: str, *, answer_calls_a_tool: bool) -> list[AIMessage]:
    """The model's replies for one turn whose summary runs first (300 tokens) and whose next call takes 100."""
    first = (tool_reply("look x up", call("lookup", "a", topic="x")) if answer_calls_a_tool
             else AIMessage("x is a letter."))
    if name == "plan_solve":  # the plan is the call after the summary; a plan of no steps goes on to solve
        plan = AIMessage("", tool_calls=[call("Plan", "p1", steps=[{"goal": "look x up", "tool": "lookup"}]
                                              if answer_calls_a_tool else [])])
        return [_summary(300), _with_usage(plan, 100), _with_usage(AIMessage("x is a letter."), 50)]
    return [_summary(300), _with_usage(first, 100)]


def _ask_with_history(name: str, model: ScriptedChatModel, topics: list[str], context: Context) -> dict:
    gateway = notes_gateway(found=lambda topic: topics.append(topic) or True)
    builder = {"react": build_react_graph, "plan_solve": build_plan_solve_graph,
               "reflexion": build_reflexion_graph}[name]
    question: dict = {"messages": [*HISTORY, HumanMessage("what is x?")]}
    if name == "reflexion":
        question["expected"] = "letter"  # the trial's answer is checked without a model call
    return builder(gateway, model=model).invoke(question, context=context)


@pytest.mark.parametrize("name", ["react", "plan_solve", "reflexion"])
def test_the_memory_summary_counts_in_the_turns_usage(name):
    from reactgraph.cli.console_view import usage_totals

    model = ScriptedChatModel.of(*_summarised_turn(name, answer_calls_a_tool=False))
    result = _ask_with_history(name, model, [], Context(**FOLDING))
    assert result["status"] == "answered"  # Reflexion's trial folds in its actor's state, not the run's
    assert name == "reflexion" or result["summary"] == "y and z are letters."
    expected = 450 if name == "plan_solve" else 400  # summary 300, then 100 (and plan_solve's answer, 50)
    assert len(model.requests) == len(_summarised_turn(name, answer_calls_a_tool=False))
    assert result["usage"]["input_tokens"] + result["usage"]["output_tokens"] == expected
    assert usage_totals(result)["total_tokens"] == expected  # what `ask --json` prints


@pytest.mark.parametrize("name", ["react", "plan_solve", "reflexion"])
def test_a_token_budget_smaller_than_the_summary_and_the_first_call_stops_the_turn(name):
    topics: list[str] = []
    model = ScriptedChatModel.of(*_summarised_turn(name, answer_calls_a_tool=True), AIMessage("never asked"))
    result = _ask_with_history(name, model, topics, Context(max_model_tokens=350, **FOLDING))
    assert topics == []  # the first call's tool call was not run: summary 300 + 100 crossed 350
    assert len(model.requests) == 2
    assert_wrapped_up(result, "max_model_tokens", 350, "model-token budget of 350")
    assert result["budget"]["used"] == 400


def test_a_prompts_estimate_is_that_of_its_whole_text_and_follows_a_message_given_new_content():
    # Each message's counts are kept between requests (a run sends its history again every time): the sum must
    # stay the estimate of the prompt's whole text, and a message whose content changed is counted again.
    weather = {"name": "get_weather", "args": {"city": "北京"}, "id": "w1", "type": "tool_call"}
    result = '{"city": "北京", "condition": "晴", "temperature_c": 12}'
    history = [HumanMessage("北京的天气怎么样？"), AIMessage("", tool_calls=[weather]),
               ToolMessage(result, tool_call_id="w1")]
    reply = AIMessage("晴，12°C")
    before_result = "北京的天气怎么样？" + 'get_weather{"city": "北京"}'
    first = usage_for(history, reply)
    assert first["input_tokens"] == estimate_tokens(before_result + result)
    assert usage_for(history, reply) == first
    history[2].content = "a much longer result, " * 40
    assert usage_for(history, reply)["input_tokens"] == estimate_tokens(before_result + history[2].content)
