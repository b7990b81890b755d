"""The text protocol with weak models: junk replies do not grow the prompt, loops are cut, both paradigms get the
same format-error budget, plans are asked for in text, and the CLI shows each attempt on its own line.

Compiled graphs with scripted chat models that reply junk; the real langchain-openai client against the local
OpenAI-compatible server where the request's shape matters (tests/support/provider_server.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage

from reactgraph.graph import Context, build_plan_solve_graph, build_react_graph, build_reflexion_graph
from reactgraph.nodes import prompts
from reactgraph.nodes.plan_solve_state import parse_plan
from reactgraph.nodes.text_protocol import without_repetition
from support.provider_server import ProviderServer, text
from support.scripted import ScriptedChatModel

MODEL = "openai:test-model"
TEXT = Context(protocol="text", reflection="rules")
BUDGET = Context().max_format_errors


def junk(n: int) -> AIMessage:
    """A reply with neither Action nor Final Answer: the same rambling a weak model writes up to its token limit."""
    return AIMessage(f"Well, reply {n} is about numbers and more numbers, " + "the sum of things is large " * 3 +
                     " ".join(f"junkword{n}_{k}" for k in range(300)))


def ask(graph, question: str, context: Context = TEXT):
    return graph.invoke({"messages": [HumanMessage(question)]}, context=context)


def request_chars(request: dict) -> int:
    return sum(len(str(m.content)) for m in request["messages"])




# --- loops ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("reply", "cut"), [
    ("Final Answer: 4\n" + "The answer is four.\n" * 40, "Final Answer: 4\nThe answer is four."),
    ("Thought: It is 4. " + "It is 4. " * 30, "Thought: It is 4. It is 4."),
    ("Final Answer: " + "4 " * 200, "Final Answer: 4"),
    ("and then " * 50 + "we stop.", "and then we stop."),
    ("上海更热。" * 20, "上海更热。"),
])
def test_a_looping_reply_keeps_its_first_occurrence(reply, cut):
    assert without_repetition(reply) == cut


@pytest.mark.parametrize("reply", [
    'Thought: add\nAction: calculator\nAction Input: {"expression": "2+3"}',
    "Final Answer: Use:\n```python\nprint(1)\n```\nor:\n```python\nprint(2)\n```\nor:\n```\nx\n```",
    "No, no, no. It is 4, as I said: it is 4.",
    "- Beijing: 9 °C\n- Shanghai: 12 °C\n- Hangzhou: 9 °C",
])
def test_a_reply_without_a_loop_is_unchanged(reply):
    assert without_repetition(reply) == reply


UNITS = st.sampled_from(["It is 4.", " ", "\n", "4", "and then", "Thought:", "```", "上海更热。", "Plan:", "1. a"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(UNITS, st.text(max_size=8)), max_size=60).map("".join))
def test_cutting_loops_never_lengthens_a_reply_and_a_cut_reply_has_none_left(reply):
    cut = without_repetition(reply)
    assert len(cut) <= len(reply) and without_repetition(cut) == cut
    parse_plan(reply)  # nor does any reply break the plan reader


def test_loops_are_cut_before_a_reply_is_parsed_stored_or_shown():
    looping = ('Thought: I need to add. ' + 'I need to add. ' * 30 +
               '\nAction: calculator\nAction Input: {"expression": "2+3"}')
    model = ScriptedChatModel.of(AIMessage(looping), AIMessage("Thought: done\nFinal Answer: " + "5 " * 100))
    result = ask(build_react_graph(model=model), "2+3?")
    assert (result["status"], result["final_answer"]) == ("answered", "5")
    think = next(m for m in result["messages"] if isinstance(m, AIMessage) and m.tool_calls)
    assert think.content == "I need to add. I need to add."
    assert think.additional_kwargs["react_text"].count("I need to add.") == 2
    assert "I need to add. I need to add. I need to add." not in model.requests[1]["messages"][-2].content
    assert result["steps"][0]["thought"] == "I need to add. I need to add."


def test_a_looping_reply_is_cut_in_the_tools_protocol_too():
    model = ScriptedChatModel.of(AIMessage("Paris is the capital. " * 50))
    result = build_react_graph(model=model).invoke({"messages": [HumanMessage("Capital of France?")]},
                                                   context=Context(reflection="off"))
    assert result["final_answer"] == result["messages"][-1].content == "Paris is the capital."


# --- malformed replies do not grow the prompt -----------------------------------------------------------------

def test_the_request_stays_the_same_size_however_many_replies_were_malformed():
    errors = 6
    model = ScriptedChatModel.of(*[junk(n) for n in range(errors)], AIMessage("Final Answer: 5"))
    result = ask(build_react_graph(model=model), "2+3?",
                 Context(protocol="text", reflection="rules", max_iterations=10, max_format_errors=errors,
                         closing_check=False))  # the think requests are measured, not the closing self-check's
    assert (result["status"], result["final_answer"]) == ("answered", "5")
    sizes = [request_chars(r) for r in model.requests]
    assert len(sizes) == errors + 1
    assert len(set(sizes[1:])) == 1  # call 2 and call N: the same request
    assert sizes[-1] - sizes[0] < 700  # a stand-in and one short correction, never the junk (~3,000 characters)
    for request in model.requests[1:]:
        assert not [m for m in request["messages"] if "junkword" in str(m.content)]
        assert request["messages"][-2].content == prompts.TEXT_REPLY_STAND_IN
    assert [s["status"] for s in result["steps"]] == ["format_error"] * errors + ["answered"]


def test_a_plan_reply_in_the_wrong_format_is_corrected_without_its_junk():
    model = ScriptedChatModel.of(junk(0), AIMessage("Plan: none"), AIMessage("No tool is needed: hello!"))
    result = ask(build_plan_solve_graph(model=model), "Say hello.")
    assert result["status"] == "answered" and result["final_answer"] == "No tool is needed: hello!"
    assert [(s["node"], s["status"]) for s in result["steps"]][:2] == [("plan", "format_error"), ("plan", "plan")]
    assert model.requests[1]["messages"][-2].content == prompts.TEXT_REPLY_STAND_IN
    assert request_chars(model.requests[1]) - request_chars(model.requests[0]) < 700


def test_a_model_error_after_a_malformed_reply_still_reports_the_malformed_one():
    model = ScriptedChatModel.of(junk(0), ValueError("the provider broke"))
    result = ask(build_react_graph(model=model), "2+3?")
    assert result["status"] == "failed"
    assert [(s["node"], s["status"], s["step"]) for s in result["steps"]] == [
        ("think", "format_error", 1), ("think", "model_error", 2), ("finalize", "failed", 2)]


# --- one format-error budget for both paradigms ---------------------------------------------------------------------

@pytest.mark.parametrize("budget", [0, BUDGET])
def test_react_and_plan_solve_give_a_junk_reply_the_same_number_of_attempts(budget):
    context = Context(protocol="text", reflection="rules", max_format_errors=budget)
    react_model = ScriptedChatModel.of(*[junk(n) for n in range(budget + 1)], AIMessage("I could not work it out."))
    react = ask(build_react_graph(model=react_model), "2+3?", context)
    plan_model = ScriptedChatModel.of(*[junk(n) for n in range(budget + 1)], AIMessage("I could not work it out."))
    plan_solve = ask(build_plan_solve_graph(model=plan_model), "2+3?", context)

    def attempts(result, node):
        return [s["status"] for s in result["steps"] if s["node"] == node and s["status"] == "format_error"]

    assert len(attempts(react, "think")) == len(attempts(plan_solve, "plan")) == budget + 1
    assert len(react_model.requests) == len(plan_model.requests) == budget + 2  # the attempts, then the closing call
    assert react["status"] == plan_solve["status"] == "limit_reached"
    assert "execute_step" not in {s["node"] for s in plan_solve["steps"]}  # the budget ended the run's steps
    assert "format" in react_model.requests[-1]["messages"][0].content  # the closing prompt says why
    assert "format" in plan_model.requests[-1]["messages"][0].content


def test_reflexion_tries_no_further_trial_once_the_budget_is_spent():
    model = ScriptedChatModel.of(*[junk(n) for n in range(BUDGET + 1)], AIMessage("I could not work it out."))
    result = ask(build_reflexion_graph(model=model), "2+3?", Context(protocol="text"))
    assert result["status"] == "limit_reached" and len(model.requests) == BUDGET + 2
    assert [s["status"] for s in result["steps"]].count("format_error") == BUDGET + 1


def test_the_budget_is_the_run_s_not_each_step_s():
    step = 'Thought: add\nAction: calculator\nAction Input: {"expression": "2+3"}'
    model = ScriptedChatModel.of(junk(0), AIMessage("Plan:\n1. Add 2 and 3 (tool: calculator)\n2. Check the sum"),
                                 junk(1), AIMessage(step), AIMessage("Final Answer: The sum is 5."), junk(2),
                                 AIMessage("Unfinished."))
    result = ask(build_plan_solve_graph(model=model), "2+3?", Context(protocol="text", max_format_errors=2))
    assert [s["node"] for s in result["steps"] if s["status"] == "format_error"] == ["plan", "execute_step",
                                                                                    "execute_step"]
    assert result["status"] == "limit_reached" and len(model.requests) == 7
    assert [r["status"] for r in result["step_results"]] == ["done", "failed"]


def test_a_step_that_spends_the_budget_goes_to_solve_without_a_replan():
    model = ScriptedChatModel.of(AIMessage("Plan:\n1. Add 2 and 3 (tool: calculator)"),
                                 *[junk(n) for n in range(3)], AIMessage("Unfinished."))
    result = ask(build_plan_solve_graph(model=model), "2+3?", Context(protocol="text", replan=True))
    assert [s["node"] for s in result["steps"]] == ["plan", *["execute_step"] * 4, "solve"]
    assert result["status"] == "limit_reached" and len(model.requests) == 5


# --- plans in text, never json_schema --------------------------------------------------------------------------------

@pytest.mark.parametrize(("reply", "steps"), [
    ("Plan:\n1. Weather in Beijing (tool: get_weather)\n2. Compare them (tool: none)",
     [("Weather in Beijing", "get_weather"), ("Compare them", None)]),
    ("**Plan:**\n1) **Goal:** Find X [tool: search]\n2) Compute Y — tool: calculator",
     [("Find X", "search"), ("Compute Y", "calculator")]),
    ("```\nPlan:\nStep 1: get the weather (Tool: get_weather)\n- compare them\n```",
     [("get the weather", "get_weather"), ("compare them", None)]),
    ("Plan: 1. Compute (15+27)*3 (tool: calculator)", [("Compute (15+27)*3", "calculator")]),
    ("Plan:\n" + "\n".join(f"{i}. Find X (tool: search)" for i in range(1, 40)), [("Find X", "search")]),
    ("Plan: none", []),
])
def test_a_numbered_plan_is_read_leniently(reply, steps):
    plan = parse_plan(reply)
    assert plan.problem is None and [(s.goal, s.tool) for s in plan.steps] == steps


def test_a_plan_reply_reads_its_parts_reason_and_tools_to_avoid_and_prose_is_no_plan():
    plan = parse_plan("Reason: search failed\nAvoid tools: search, http_get\nParts: the weather; the time\n"
                      "Plan:\n1. Ask the time (tool: get_time)")
    assert (plan.reason, plan.avoid_tools, plan.parts) == ("search failed", ["search", "http_get"],
                                                           ["the weather", "the time"])
    assert "numbered plan" in (parse_plan("I would first look it up, then answer.").problem or "")


def test_plan_solve_asks_a_text_model_for_a_numbered_plan_and_never_for_json_schema(provider):
    with ProviderServer(text("Parts: the sum\nPlan:\n1. Add 2 and 3 (tool: calculator)"),
                        text('Thought: add\nAction: calculator\nAction Input: {"expression": "2+3"}'),
                        text("Thought: done\nFinal Answer: 2+3 = 5"), text("2 + 3 = 5.")) as server:
        provider(server)
        result = ask(build_plan_solve_graph(), "2+3?", Context(model=MODEL, protocol="text"))
    assert (result["status"], result["final_answer"]) == ("answered", "2 + 3 = 5.")
    assert result["plan"] == [{"goal": "Add 2 and 3", "tool": "calculator", "part": None}]
    assert result["plan_parts"] == ["the sum"]
    assert len(server.requests) == 4
    for body in server.requests:
        assert "response_format" not in body and not body.get("tools") and "tool_choice" not in body
    assert "numbered list" in server.requests[0]["messages"][0]["content"]


def test_the_offline_model_plans_the_same_in_both_protocols():
    question = "北京和上海的天气分别怎么样？哪个城市更热？"
    tools = ask(build_plan_solve_graph(), question, Context())
    text_run = ask(build_plan_solve_graph(), question, Context(protocol="text"))
    assert text_run["plan"] == tools["plan"] and text_run["steps"][0]["status"] == "plan"
    assert text_run["status"] == tools["status"] == "answered"


def test_replanning_in_the_text_protocol_reads_a_numbered_revision():
    step = 'Thought: look\nAction: teleport\nAction Input: {"to": "mars"}'
    model = ScriptedChatModel.of(
        AIMessage("Plan:\n1. Travel to Mars (tool: teleport)\n2. Report"), AIMessage(step),
        AIMessage("Final Answer: teleport does not exist."), junk(0),
        AIMessage("Reason: teleport failed\nAvoid tools: teleport\nPlan:\n1. Report what is known (tool: none)"),
        AIMessage("Final Answer: Nothing is known."), AIMessage("Mars could not be reached."))
    result = ask(build_plan_solve_graph(model=model), "Go to Mars.", Context(protocol="text", replan=True))
    replans = [s for s in result["steps"] if s["node"] == "replan"]
    assert [s["status"] for s in replans] == ["format_error", "replan"]
    assert result["avoid_tools"] == ["teleport"] and result["plan"][-1]["goal"] == "Report what is known"
    assert not [m for r in model.requests for m in r["messages"] if "junkword0_" in str(m.content)]


# --- the CLI -------------------------------------------------------------------------------------------------------

def test_the_cli_shows_each_streamed_attempt_on_its_own_line(cli, provider):
    with ProviderServer(text("Sure! Let me think.\nIt is probably four."), text("I believe the answer is four."),
                        text("Final Answer: 4")) as server:
        provider(server)
        code, out, err = cli("ask", "2+2?", "--model", MODEL, "--protocol", "text", "--reflection", "off",
                             "--store", "memory")
    assert code == 0, err
    streamed = [line for line in out.splitlines() if line.startswith("    (think) ")]
    assert streamed == ["    (think) Sure! Let me think. It is probably four.",
                        "    (think) I believe the answer is four.", "    (think) Final Answer: 4"]
    assert out.count("Format error:") == 2
