"""The text ReAct protocol: a tolerant parser, the rendered transcript, and whole runs that use it."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from reactgraph.graph import Context, build_react_graph
from reactgraph.models.offline.conversation import as_tool_messages
from reactgraph.nodes import prompts
from reactgraph.nodes.react import prompt_messages
from reactgraph.nodes.text_protocol import (
    STOP,
    answer_text,
    answer_without_markup,
    as_text_messages,
    input_text,
    instructions,
    parse_reply,
    to_ai_message,
)
from reactgraph.tools import ToolSession, default_gateway
from support.cli_env import run_in_process
from support.scripted import ScriptedChatModel, call, tool_reply

SCHEMAS = default_gateway().schemas(ToolSession.of("t"))
TEXT = Context(protocol="text", reflection="rules")


def ask(graph, question: str, context: Context = TEXT):
    return graph.invoke({"messages": [HumanMessage(question)]}, context=context)


# --- reading a reply ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("reply", [
    'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "北京"}',
    'thought: I need the weather.\naction: get_weather\naction input: {"city": "北京"}',
    'Thought：I need the weather.\nAction：get_weather\nAction Input：{"city": "北京"}',
    '  Thought:   I need the weather.  \n\n  Action:  get_weather  \n  Action Input:   {"city": "北京"}  \n',
    '```\nThought: I need the weather.\nAction: get_weather\nAction Input: {"city": "北京"}\n```',
    'Thought: I need the weather.\nAction: get_weather\nAction Input:\n```json\n{"city": "北京"}\n```',
    '**Thought:** I need the weather.\n**Action:** `get_weather`\n**Action Input:** {"city": "北京"}',
    ('Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "北京"}\nObservation: sunny, 30°C'
     '\nThought: I can answer now.\nFinal Answer: It is sunny.'),
    'Thought: I need the weather.\nAction: get_weather\nAction Input: 北京',
    "Thought: I need the weather.\nAction: get_weather\nAction Input: '北京'",
    "Thought: I need the weather.\nAction: Get_Weather\nAction Input: {'city': '北京'}",
    'Thought: I need the weather.\nAction: get_weather[北京]',
    'I need the weather.\nAction: the get_weather tool\nAction Input: {"city": "北京"} (then I will compare)',
])
def test_every_spelling_of_an_action_becomes_the_same_tool_call(reply):
    parsed = parse_reply(reply)
    message = to_ai_message(parsed, reply, SCHEMAS)
    assert parsed.problem is None and parsed.thought == "I need the weather."
    assert [(c["name"], c["args"]) for c in message.tool_calls] == [("get_weather", {"city": "北京"})]
    assert message.content == "I need the weather." and message.additional_kwargs["react_text"] == reply


@pytest.mark.parametrize(("reply", "answer"), [
    ("Thought: I can answer now.\nFinal Answer: 126", "126"),
    ("FINAL ANSWER： 上海更热。", "上海更热。"),
    ("final answer:\n\nLine one.\nLine two.\n", "Line one.\nLine two."),
    ("```text\nThought: done\nFinal Answer: 42\n```", "42"),
    ("Thought: done\nFinal Answer: Use:\n```python\nprint(1)\n```", "Use:\n```python\nprint(1)\n```"),
    ("Thought: nothing to do\nAction: None\nFinal Answer: Hi!", "Hi!"),
])
def test_final_answers_are_read_leniently(reply, answer):
    parsed = parse_reply(reply)
    assert parsed.final_answer == answer
    message = to_ai_message(parsed, reply, SCHEMAS)
    assert message.content == answer and not message.tool_calls


def test_an_action_before_a_final_answer_wins_and_a_made_up_observation_is_dropped():
    parsed = parse_reply("Thought: t\nAction: calculator\nAction Input: 2+3\nObservation: 5\nFinal Answer: 5")
    assert (parsed.action, parsed.action_input, parsed.final_answer) == ("calculator", "2+3", None)
    call = to_ai_message(parsed, "", SCHEMAS).tool_calls[0]
    assert call["args"] == {"expression": "2+3"}  # a bare input fills the single required parameter


@pytest.mark.parametrize(("reply", "problem"), [
    ("", "neither"),
    ("The weather in Beijing is probably fine.", "neither"),
    ("Thought: I should look it up.", "neither"),
    ("Thought: hmm\nAction:\nAction Input: {}", "names no tool"),
    ("Thought: done\nFinal Answer:   ", "empty"),
])
def test_a_reply_without_action_or_answer_is_a_format_problem(reply, problem):
    assert problem in parse_reply(reply).problem


def test_unusable_arguments_become_an_invalid_call_the_model_is_told_about():
    for raw, error in (('{"city": "北京"', "not valid JSON"), ("[1, 2]", "not a list"), ("{'city': {1j}}", "JSON")):
        message = to_ai_message(parse_reply(f"Action: get_weather\nAction Input: {raw}"), "", SCHEMAS)
        assert not message.tool_calls and error in message.invalid_tool_calls[0]["error"]
    # `search` has one required parameter, `get_time` only an optional one: a bare value still has a home
    assert to_ai_message(parse_reply("Action: search\nAction Input: LangGraph"), "", SCHEMAS).tool_calls[0][
        "args"] == {"query": "LangGraph"}
    assert to_ai_message(parse_reply("Action: get_time\nAction Input: Tokyo"), "", SCHEMAS).tool_calls[0][
        "args"] == {"timezone": "Tokyo"}
    assert to_ai_message(parse_reply("Action: get_time\nAction Input:"), "", SCHEMAS).tool_calls[0]["args"] == {}
    unknown = to_ai_message(parse_reply("Action: teleport\nAction Input: mars"), "", SCHEMAS).tool_calls[0]
    assert unknown["name"] == "teleport"  # the gateway answers unknown_tool with the available tools


LABELS = st.sampled_from(["Thought:", "Action:", "Action Input:", "Final Answer:", "Observation:", "action：",
                          "```", "```json", "\n", " ", "{", "}", '"', "calculator", "get_weather", "北京", "[", "]"])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(LABELS, st.text(max_size=12)), max_size=25).map("".join))
def test_no_reply_ever_breaks_the_parser(reply):
    parsed = parse_reply(reply)
    assert (parsed.problem is None) == (parsed.action is not None or parsed.final_answer is not None)
    if parsed.problem is None:
        message = to_ai_message(parsed, reply, SCHEMAS)
        assert message.tool_calls or message.invalid_tool_calls or message.content == parsed.final_answer
        json.dumps([c["args"] for c in message.tool_calls])  # arguments are always JSON-serialisable


# --- formatting variants of valid replies: each parses to the same call ------------------------------------

# (tool, arguments, the bare value a single-parameter tool may be given instead of JSON)
CALLS = [("calculator", {"expression": "2**10"}, "2**10"), ("get_weather", {"city": "北京"}, "北京"),
         ("search", {"query": "LangGraph checkpointer"}, "LangGraph checkpointer"),
         ("get_time", {"timezone": "Asia/Tokyo"}, "Asia/Tokyo"), ("search", {"query": "LangGraph", "top_k": 2}, None)]
INPUTS = {  # how a model writes the Action Input; `{}` is the JSON, `{bare}` the bare value
    "json": "{json}", "json in backticks": "`{json}`", "json fence": "\n```json\n{json}\n```",
    "json fence, no language": "\n```\n{json}\n```", "json one-line fence": "```json {json}```",
    "python dict": "{pydict}", "bare": "{bare}", "bare in backticks": "`{bare}`",
    "bare in double backticks": "``{bare}``", "bare fence": "\n```python\n{bare}\n```",
    "bare one-line fence": "```{bare}```", "bare quoted": '"{bare}"', "bare single-quoted": "'{bare}'",
}


def _label(name: str, case: str, bold: str, colon: str) -> str:
    name = {"title": name, "lower": name.lower(), "upper": name.upper(), "snake": name.replace(" ", "_")}[case]
    return {"none": f"{name}{colon}", "around": f"**{name}{colon}**", "inside": f"**{name}**{colon}"}[bold]


@st.composite
def formatted_calls(draw):
    tool, args, bare = draw(st.sampled_from(CALLS))
    style = draw(st.sampled_from([k for k in INPUTS if bare is not None or not k.startswith("bare")]))

    def label(name: str) -> str:
        return _label(name, draw(st.sampled_from(["title", "lower", "upper", "snake"])),
                      draw(st.sampled_from(["none", "around", "inside"])), draw(st.sampled_from([":", "：", " :"])))

    def space() -> str:
        return draw(st.sampled_from([" ", "  ", "\t", " \t "]))

    value = INPUTS[style].format(json=json.dumps(args, ensure_ascii=False), pydict=repr(args), bare=bare)
    name = draw(st.sampled_from([tool, f"`{tool}`", f"**{tool}**", tool.upper()]))
    gap = draw(st.sampled_from(["\n", "\n\n", "\n  "]))
    lines = [f"{label('Thought')}{space()}I should use {tool}." if draw(st.booleans()) else "I should use it.",
             f"{label('Action')}{space()}{name}", f"{label('Action Input')}{space()}{value}"]
    reply = gap.join(lines)
    if draw(st.booleans()):  # the model keeps talking after the call
        reply += draw(st.sampled_from(["\n\nI will wait for the result.", "\nThen I can answer the user."]))
    wrap = draw(st.sampled_from(["", "```\n{}\n```", "```text\n{}\n```", "```\n{}\n```\nHope that helps."]))
    reply = wrap.format(reply) if wrap else reply
    if draw(st.booleans()):
        reply = reply.replace("\n", "\r\n")
    return reply, tool, args


@settings(max_examples=500, deadline=None)
@given(formatted_calls())
def test_every_formatting_of_a_valid_reply_parses_to_the_same_call(case):
    reply, tool, args = case
    parsed = parse_reply(reply)
    assert parsed.problem is None, reply
    message = to_ai_message(parsed, reply, SCHEMAS)
    assert [(c["name"], c["args"]) for c in message.tool_calls] == [(tool, args)], reply
    assert "Thought" not in message.content and "`" not in message.content


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["Final Answer", "final answer", "FINAL ANSWER", "Final_Answer"]),
       st.sampled_from(["{}", "**{}:**", "**{}**:"]), st.sampled_from([":", "："]), st.booleans(),
       st.sampled_from(["", "```\n{}\n```", "```text\n{}\n```"]), st.booleans())
def test_every_formatting_of_a_final_answer_reads_the_same(name, bold, colon, thought, wrap, crlf):
    label = bold.format(name).replace(":", colon) if ":" in bold else bold.format(name) + colon
    reply = (f"Thought: I know it now.\n{label} " if thought else f"{label} ") + "2**10 = 1024, i.e. `1024`."
    reply = wrap.format(reply) if wrap else reply
    reply = reply.replace("\n", "\r\n") if crlf else reply
    assert parse_reply(reply).final_answer == "2**10 = 1024, i.e. `1024`."
    assert answer_without_markup(reply) == "2**10 = 1024, i.e. `1024`."


def test_inline_backticks_and_fences_are_not_part_of_the_arguments():
    for reply in ("Action: calculator\nAction Input: `2**10`", "Action: calculator\nAction Input: ```2**10```",
                  "Action: calculator\nAction Input: ```python\n2**10\n```",
                  "Action: calculator\nAction Input:\n```\n2**10",  # a fence the stop word cut before it closed
                  'Action: calculator\nAction Input: `{"expression": "2**10"}`'):
        assert to_ai_message(parse_reply(reply), reply, SCHEMAS).tool_calls[0]["args"] == {"expression": "2**10"}
    # a fenced value keeps its own lines; a bare one is its first line, the rest being the model's chatter
    assert input_text("```\nline one\nline two\n```") == "line one\nline two"
    assert input_text("北京\nI will compare it next.") == "北京"


@pytest.mark.parametrize(("answer", "shown"), [
    ("Thought: I have both temperatures.\nFinal Answer: 上海更热。", "上海更热。"),
    ("**Final Answer:** 42", "42"),
    ("Thought: The capital of France is Paris.", "The capital of France is Paris."),
    ("```\nParis is the capital.\n```", "Paris is the capital."),
    ("```markdown\nThought: done\nFinal Answer: **Paris**\n```", "**Paris**"),
    ("Final Answer: Use:\n```python\nprint(1)\n```", "Use:\n```python\nprint(1)\n```"),
    ("```python\nprint(1)\n```", "```python\nprint(1)\n```"),  # code is the answer's own formatting
    ("It is 42.\nThought experiments aside, it is 42.", "It is 42.\nThought experiments aside, it is 42."),
    ("Paris.", "Paris."),
])
def test_final_answers_lose_react_markup_and_keep_their_own_formatting(answer, shown):
    assert answer_without_markup(answer) == shown


def test_answer_text_takes_the_final_answer_of_a_closing_reply():
    assert answer_text("Thought: I have enough.\nFinal Answer: 42 apples") == "42 apples"
    assert answer_text("Just plain prose.") == "Just plain prose."


# --- the request ------------------------------------------------------------------------------------------

def test_the_prompt_lists_only_offered_tools_with_their_json_schemas_and_examples():
    text = instructions([s for s in SCHEMAS if s["function"]["name"] in ("calculator", "search")])
    assert "- calculator:" in text and "- search:" in text and "get_weather" not in text
    assert '"required": ["expression"]' in text and "Final Answer:" in text and "Observation" in text
    assert "Action: calculator" in text  # a few-shot example for an offered tool
    assert "no tools are available" in instructions([])


def test_tool_rounds_are_rendered_as_text_that_the_offline_model_reads_back_as_the_same_calls():
    history = [HumanMessage("q"), tool_reply("need both", call("get_weather", "a", city="北京"),
                                             call("get_weather", "b", city="上海")),
               ToolMessage('{"city":"北京"}', tool_call_id="a"),
               ToolMessage("Tool get_weather timed out after 2s", tool_call_id="b", status="error"),
               AIMessage("Beijing is sunny.")]
    rendered = as_text_messages(history)
    assert [m.type for m in rendered] == ["human", "ai", "human", "ai", "human", "ai"]
    assert not any(getattr(m, "tool_calls", None) for m in rendered)  # a plain chat model can read it
    assert rendered[1].content == 'Thought: need both\nAction: get_weather\nAction Input: {"city": "北京"}'
    assert rendered[2].content == 'Observation: <tool_output tool="get_weather">\n{"city":"北京"}\n</tool_output>'
    assert rendered[3].content == 'Action: get_weather\nAction Input: {"city": "上海"}'
    assert rendered[4].content == ('Observation: <tool_output tool="get_weather" status="error">\n'
                                   "Tool get_weather timed out after 2s\n</tool_output>")
    assert rendered[5].content == "Final Answer: Beijing is sunny."
    back = as_tool_messages([SystemMessage("s"), *rendered])
    assert [(c["name"], c["args"]) for m in back if isinstance(m, AIMessage) for c in m.tool_calls] == [
        ("get_weather", {"city": "北京"}), ("get_weather", {"city": "上海"})]
    assert [m.status for m in back if isinstance(m, ToolMessage)] == ["success", "error"]


# --- whole runs ---------------------------------------------------------------------------------------------

def test_the_offline_model_solves_a_chain_in_the_text_protocol_with_the_same_step_records():
    graph = build_react_graph()
    text = ask(graph, "Python 诞生于哪一年？到 2026 年它诞生了多少年？")
    tools = ask(graph, "Python 诞生于哪一年？到 2026 年它诞生了多少年？", Context(reflection="rules"))
    assert text["status"] == "answered" and "35" in text["final_answer"]
    acts = [(s["action"], s["action_input"], s["status"]) for s in text["steps"] if s["node"] == "act"]
    assert acts == [(s["action"], s["action_input"], s["status"]) for s in tools["steps"] if s["node"] == "act"]
    assert set(text["steps"][0]) == set(tools["steps"][0])
    assert not text["steps"][0]["thought"].startswith("Thought")  # the Thought itself, not the raw reply


def test_a_text_model_gets_a_stop_word_no_bound_tools_and_observations_as_text():
    model = ScriptedChatModel.of(AIMessage('Thought: add\nAction: calculator\nAction Input: {"expression": "2+3"}'),
                                 AIMessage("Thought: done\nFinal Answer: 5"))
    result = ask(build_react_graph(model=model), "2+3?")
    assert (result["status"], result["final_answer"]) == ("answered", "5")
    first, second, check = model.requests  # then the closing self-check (its script is empty: unchecked)
    assert check["tools"][0].__name__ == "ClosingCheck" and result["coverage"]["by"] == "unchecked"
    assert first["tools"] is None and "Action Input" in first["messages"][0].content
    assert second["messages"][-1].content.startswith("Observation: ") and '"result":5' in second["messages"][-1].content
    assert [m.type for m in second["messages"]] == ["system", "human", "ai", "human"]


def test_malformed_replies_are_corrected_and_count_toward_the_limit():
    model = ScriptedChatModel.of(AIMessage("I think it's 5."), AIMessage("Final Answer: 5"))
    result = ask(build_react_graph(model=model), "2+3?")
    assert (result["status"], result["final_answer"], result["iteration"]) == ("answered", "5", 2)
    assert [(s["node"], s["status"]) for s in result["steps"]] == [("think", "format_error"), ("finalize", "answered")]
    correction = model.requests[1]["messages"][-1].content
    assert correction.startswith("Observation: Invalid format") and "Final Answer:" in correction
    # the unusable reply itself is not sent back: a fixed stand-in takes its place
    assert model.requests[1]["messages"][-2].content == prompts.TEXT_REPLY_STAND_IN


def test_a_model_that_never_follows_the_format_stops_at_the_limit_and_still_answers():
    model = ScriptedChatModel.of(*[AIMessage("chatter")] * 3, AIMessage("From what I know: unsure."))
    result = ask(build_react_graph(model=model), "q", Context(protocol="text", reflection="rules", max_iterations=3))
    assert result["status"] == "limit_reached" and result["iteration"] == 3
    assert [s["status"] for s in result["steps"]] == ["format_error"] * 3 + ["limit_reached"]
    assert result["final_answer"] == "From what I know: unsure." and len(model.requests) == 4
    assert all(not isinstance(m, AIMessage) or m.content != "chatter" for m in result["messages"])


def test_llm_reflection_in_the_text_protocol_uses_the_rules():
    model = ScriptedChatModel.of(AIMessage('Action: calculator\nAction Input: "2+3"'), AIMessage("Final Answer: 5"))
    result = ask(build_react_graph(model=model), "2+3?", Context(protocol="text", reflection="llm"))
    # the Action, the Final Answer, the closing self-check (the rules' verdict names no parts): no reflection call
    assert len(model.requests) == 3 and result["steps"][1]["node"] == "reflect"
    assert result["final_answer"] == "5"


def test_the_session_summary_reaches_the_notes_block_in_both_protocols():
    state = {"messages": [HumanMessage("what is my name?")], "summary": "The user is Alice."}
    for protocol in ("tools", "text"):
        system, question = prompt_messages(state, Context(protocol=protocol), {"note": "check the name"}, SCHEMAS)
        notes, _, asked = question.content.partition("</notes>\n\n")
        assert "Conversation summary: The user is Alice." in notes and "Reflection: check the name" in notes
        assert notes.startswith("<notes>") and asked == "what is my name?" and "Alice" not in system.content
    assert prompt_messages({**state, "summary": ""}, TEXT, None, SCHEMAS)[1].content == "what is my name?"


def test_stop_word_matches_what_the_offline_model_listens_for():
    from reactgraph.models.offline.conversation import is_text_protocol
    assert is_text_protocol(STOP) and json.dumps(STOP) == '["Observation:"]'


def test_the_cli_speaks_the_text_protocol_offline(monkeypatch, capfd):
    question = "北京和上海哪个城市更热？"
    done = run_in_process(monkeypatch, capfd, ["ask", question, "--protocol", "text", "--store", "memory", "--json"])
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["status"] == "answered" and "上海更热" in payload["answer"]
    assert [s["action_input"] for s in payload["steps"] if s["node"] == "act"] == [{"city": "北京"}, {"city": "上海"}]
