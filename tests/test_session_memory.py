"""Session memory: which messages fold into the summary, the deterministic summary, and the scripted model's
summary and recall, ending with a 40-turn conversation whose first facts survive only in the summary."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph.message import add_messages

from reactgraph.memory import ConversationSummary, SessionMemory, fallback_summary, summary_prompt
from reactgraph.memory.session_memory import (
    MAX_SUMMARY_CHARS,
    SUMMARY_HEADER,
    read_summary_prompt,
    render_transcript,
    summary_from_messages,
)
from reactgraph.models.offline import OfflineChatModel
from reactgraph.models.offline.conversation import unframed
from reactgraph.nodes.prompts import summary_section, with_notes

_ids = itertools.count()


def human(text: str) -> HumanMessage:
    return HumanMessage(text, id=f"m{next(_ids)}")


def answer(text: str) -> AIMessage:
    return AIMessage(text, id=f"m{next(_ids)}")


def tool_round(*calls: tuple[str, dict, str]) -> list[BaseMessage]:
    """An AI message calling tools, then one result per call."""
    ids = [f"call{next(_ids)}" for _ in calls]
    asked = AIMessage("", id=f"m{next(_ids)}", tool_calls=[
        {"name": name, "args": args, "id": call_id, "type": "tool_call"}
        for (name, args, _), call_id in zip(calls, ids, strict=True)])
    return [asked] + [ToolMessage(result, tool_call_id=call_id, name=name, id=f"m{next(_ids)}")
                      for (name, _, result), call_id in zip(calls, ids, strict=True)]


def weather_turn(city: str) -> list[BaseMessage]:
    return [human(f"{city}天气怎么样？"),
            *tool_round(("get_weather", {"city": city}, json.dumps({"city": city, "temperature_c": 10}))),
            answer(f"{city}：晴，10°C。")]


def chat_turn(question: str, reply: str) -> list[BaseMessage]:
    return [human(question), answer(reply)]


def kept_after(messages: list[BaseMessage], memory: SessionMemory) -> list[BaseMessage]:
    fold = memory.fold(messages, "")
    return messages if fold is None else add_messages(messages, fold.remove)


def assert_pairs_intact(kept: list[BaseMessage]) -> None:
    """Every kept tool result has its call kept, and every kept call has all its results kept."""
    asked = {tc["id"] for m in kept if isinstance(m, AIMessage) for tc in m.tool_calls}
    answered = {m.tool_call_id for m in kept if isinstance(m, ToolMessage)}
    assert answered <= asked
    assert asked <= answered


# --- the window ---------------------------------------------------------------------------------------


def test_nothing_folds_until_the_window_exceeds_keep_last_plus_slack() -> None:
    memory = SessionMemory(keep_last=4)
    assert memory.summarize_after == 8
    messages = [*chat_turn("q1", "a1"), *chat_turn("q2", "a2"), *chat_turn("q3", "a3"), *chat_turn("q4", "a4")]
    assert memory.fold(messages, "") is None  # 8 messages: not more than 4 + 4
    messages.append(human("q5"))
    fold = memory.fold(messages, "older facts")
    assert fold is not None
    assert [m.content for m in fold.messages] == ["q1", "a1", "q2", "a2", "q3"]
    assert all(isinstance(r, RemoveMessage) for r in fold.remove)
    assert [r.id for r in fold.remove] == [m.id for m in fold.messages]
    assert fold.previous_summary == "older facts"
    assert [m.content for m in add_messages(messages, fold.remove)] == ["a3", "q4", "a4", "q5"]


def test_summarize_after_sets_the_threshold() -> None:
    memory = SessionMemory(keep_last=2, summarize_after=2)
    messages = [*chat_turn("q1", "a1"), human("q2")]
    assert [m.content for m in memory.fold(messages, "").messages] == ["q1"]
    with pytest.raises(ValueError):
        SessionMemory(keep_last=4, summarize_after=3)
    with pytest.raises(ValueError):
        SessionMemory(keep_last=0)


def test_a_kept_tool_result_keeps_the_call_that_asked_for_it() -> None:
    memory = SessionMemory(keep_last=3, summarize_after=3)
    parallel = tool_round(("get_weather", {"city": "北京"}, "{}"), ("get_weather", {"city": "上海"}, "{}"))
    messages = [*chat_turn("q1", "a1"), human("哪个更热？"), *parallel, answer("上海更热。"), human("q3")]
    # the last 3 would start at the second weather result; the boundary moves back to the call
    assert messages[-3] is parallel[2]
    kept = kept_after(messages, memory)
    assert kept[0] is parallel[0] and len(kept) == 5
    assert_pairs_intact(kept)


def test_the_current_turn_is_never_folded_however_long() -> None:
    memory = SessionMemory(keep_last=3)
    rounds = [m for city in ["北京", "上海", "广州", "深圳"] for m in tool_round(("get_weather", {"city": city}, "{}"))]
    messages = [*chat_turn("q1", "a1"), *chat_turn("q2", "a2"), human("四个城市的天气？"), *rounds]
    fold = memory.fold(messages, "")
    assert [m.content for m in fold.messages] == ["q1", "a1", "q2", "a2"]
    kept = add_messages(messages, fold.remove)
    assert kept[0].content == "四个城市的天气？" and len(kept) == 9


def test_orphan_tool_results_never_open_the_window() -> None:
    memory = SessionMemory(keep_last=2, summarize_after=2)
    stray = ToolMessage("late result", tool_call_id="unknown", id="stray")
    messages = [human("q1"), answer("a1"), stray, human("q2")]
    kept = kept_after(messages, memory)
    assert [m.content for m in kept] == ["a1", "late result", "q2"]


def test_folding_needs_message_ids() -> None:
    messages = [HumanMessage(f"q{i}") for i in range(20)]
    with pytest.raises(ValueError, match="ids"):
        SessionMemory(keep_last=4).fold(messages, "")


@st.composite
def conversations(draw) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for _ in range(draw(st.integers(1, 12))):
        messages.append(human("q"))
        for _ in range(draw(st.integers(0, 3))):
            calls = [("search", {"query": "x"}, "r")] * draw(st.integers(1, 3))
            messages += tool_round(*calls)
        if draw(st.booleans()):
            messages.append(answer("a"))
    return messages


@settings(max_examples=300, deadline=None)
@given(conversations(), st.integers(1, 10), st.integers(0, 6))
def test_any_conversation_keeps_its_pairs_and_its_current_turn(messages, keep_last, slack) -> None:
    memory = SessionMemory(keep_last=keep_last, summarize_after=keep_last + slack)
    fold = memory.fold(messages, "")
    kept = kept_after(messages, memory)
    assert_pairs_intact(kept)
    last_question = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
    assert messages[last_question] in kept and kept[-1] is messages[-1]
    if fold is None:
        assert len(messages) <= memory.summarize_after or kept == messages
    else:
        assert fold.messages + kept == messages
        assert not isinstance(kept[0], ToolMessage)
        # the window is never cut shorter than keep_last, except where the current turn begins
        assert len(kept) >= keep_last or kept[0] is messages[last_question]


# --- the summary --------------------------------------------------------------------------------------


def test_fallback_summary_is_one_line_per_question_and_final_answer() -> None:
    messages = [*weather_turn("北京"), *chat_turn("what is 2+2?", "4\n(computed)"), human("unanswered")]
    summary = fallback_summary("Q: 我叫小明 → A: 好的", messages)
    assert summary.splitlines() == ["Q: 我叫小明 → A: 好的", "Q: 北京天气怎么样？ → A: 北京：晴，10°C。",
                                    "Q: what is 2+2? → A: 4 (computed)", "Q: unanswered"]


def test_fallback_summary_stays_bounded_dropping_old_lines_but_personal_facts_last() -> None:
    previous = "Q: 我叫小明，我最喜欢的城市是杭州 → A: 好的，我记住了"
    messages = [m for i in range(200) for m in chat_turn(f"question {i} " + "x" * 150, "answer " + "y" * 400)]
    summary = fallback_summary(previous, messages)
    assert len(summary) <= MAX_SUMMARY_CHARS
    lines = summary.splitlines()
    assert lines[0] == previous  # kept: the user said who they are
    assert lines[-1].startswith("Q: question 199 ")  # the newest turn is there, the oldest are gone
    assert "question 0 " not in summary
    assert max(len(line) for line in lines) <= 200 + 300 + 20  # each part truncated
    assert "…" in lines[-1]
    assert len(fallback_summary("", messages, max_chars=300)) <= 300
    assert len(fallback_summary("z" * 5000, [], max_chars=300)) <= 300


def test_summary_prompt_renders_the_transcript_and_reads_back() -> None:
    messages = [human("我叫小明，我最喜欢的城市是杭州"), answer("好的"), *weather_turn("上海"),
                human("two\nlines")]
    prompt = summary_prompt("Q: earlier → A: fine", messages)
    assert isinstance(prompt[0], SystemMessage) and "summary" in prompt[0].content
    text = prompt[1].content
    assert "Q: earlier → A: fine" in text and 'Assistant called get_weather({"city": "上海"})' in text
    assert "Tool get_weather: " in text and "User: two\n  lines" in text
    previous, parsed = read_summary_prompt(prompt)
    assert previous == "Q: earlier → A: fine"
    assert [type(m).__name__ for m in parsed] == ["HumanMessage", "AIMessage", "HumanMessage", "ToolMessage",
                                                  "AIMessage", "HumanMessage"]
    assert parsed[-1].content == "two\nlines"
    assert "(none)" in summary_prompt("", messages)[1].content
    long = ToolMessage("r" * 5000, tool_call_id="x", name="search")
    assert len(render_transcript([long])) < 700


def with_summary(summary: str, messages: list[BaseMessage]) -> list[BaseMessage]:
    """The request as the nodes send it: the summary in the notes block that opens the question's message."""
    return with_notes(messages, summary_section(summary))


def test_summary_travels_in_the_notes_block_never_a_system_message() -> None:
    assert summary_section("") == [] and summary_section(" \n ") == []
    request = with_summary("Q: a → A: b\n\nQ: c", [SystemMessage("You are an agent."), human("x")])
    assert request[0].text == "You are an agent."
    assert request[1].text.startswith("<notes>\n") and request[1].text.endswith("</notes>\n\nx")
    assert f"{SUMMARY_HEADER} Q: a → A: b\nQ: c\n</notes>" in request[1].text  # blank lines separate sections
    # The scripted model reads the notes as its own working notes, apart from the question.
    assert summary_from_messages(unframed(request)) == "Q: a → A: b\nQ: c"
    inline = SystemMessage(f"Rules.\n{SUMMARY_HEADER} the user is 小明\n\nOther notes.")
    assert summary_from_messages([inline]) == "the user is 小明"
    assert summary_from_messages([human(f"{SUMMARY_HEADER} fake")]) == ""


# --- the scripted model: summaries and recall ---------------------------------------------------------
# Kept on the offline model on purpose: these are the default, user-facing model's own summary and recall (no
# graph runs here; a test model would only echo its script).


def summarise(previous: str, messages: list[BaseMessage]) -> str:
    model = OfflineChatModel().with_structured_output(ConversationSummary)
    # the purpose the model gateway tags a summary request with (run metadata, models/purpose.py)
    return model.invoke(summary_prompt(previous, messages), {"metadata": {"reactgraph_purpose": "summarize"}}).summary


def test_the_offline_model_summarises_like_the_fallback() -> None:
    messages = [human("我叫小明，我最喜欢的城市是杭州"), answer("好的，我记住了"), *weather_turn("北京")]
    assert summarise("Q: 更早 → A: 早", messages) == fallback_summary("Q: 更早 → A: 早", messages)
    assert summarise("", messages).splitlines()[0] == "Q: 我叫小明，我最喜欢的城市是杭州 → A: 好的，我记住了"


def get_weather(city: str) -> dict:
    """Current weather of a city."""


def search(query: str) -> dict:
    """Search the offline knowledge base."""


def ask(messages: list[BaseMessage], *, text_protocol: bool = False) -> AIMessage:
    """The scripted model's reply with the weather and search tools bound (or in the text protocol)."""
    model = OfflineChatModel()
    if text_protocol:
        return model.invoke(messages, stop=["Observation:"])
    return model.bind_tools([get_weather, search]).invoke(messages)


@pytest.mark.parametrize(("question", "expected"), [
    ("我最喜欢的城市是哪个？", "杭州"), ("我叫什么名字？", "小明"), ("what is my name?", "小明"),
    ("What did I say my favorite city is?", "杭州"), ("我最喜欢的颜色是什么？", "没有告诉过我"),
])
def test_the_offline_model_recalls_facts_found_only_in_the_summary(question: str, expected: str) -> None:
    summary = "Q: 我叫小明，我最喜欢的城市是杭州 → A: 好的，我记住了\nQ: 北京天气？ → A: 晴"
    reply = ask(with_summary(summary, [SystemMessage("You are a ReAct agent."), answer("…"), human(question)]))
    assert expected in reply.content and not reply.tool_calls


def test_recall_prefers_the_newest_statement_and_earlier_messages_too() -> None:
    summary = "Q: My name is Bob and my favourite city is Paris → A: Got it"
    messages = [SystemMessage("sys"), human("Actually my favourite city is Rome."), answer("Noted.")]
    assert "Rome" in ask(with_summary(summary, [*messages, human("what is my favourite city?")])).content
    assert "Bob" in ask(with_summary(summary, [*messages, human("What's my name?")])).content
    assert "haven't told me your name" in ask([human("what is my name?")]).content


def test_stating_facts_is_acknowledged_and_mixed_questions_still_use_tools() -> None:
    reply = ask([human("我叫小明，我最喜欢的城市是杭州")])
    assert reply.content == "好的，我记住了：你叫小明，你最喜欢的城市是杭州。" and not reply.tool_calls
    assert ask([human("北京天气怎么样？")]).tool_calls  # the planner is untouched
    text = ask(with_summary("Q: 我叫小明 → A: 好的", [SystemMessage("sys"), human("我叫什么？")]), text_protocol=True)
    assert "Final Answer" in text.content and "小明" in text.content


# --- 40 turns -----------------------------------------------------------------------------------------


def test_forty_turns_keep_the_window_bounded_and_the_first_facts_recallable() -> None:
    memory = SessionMemory(keep_last=8)
    model = OfflineChatModel()
    messages: list[BaseMessage] = []
    summary = ""
    sizes, folds = [], 0
    cities = ["北京", "上海", "广州", "深圳", "成都", "西安"]
    for turn in range(1, 41):
        if turn == 1:
            question = "我叫小明，我最喜欢的城市是杭州"
        elif turn == 39:
            question = "我最喜欢的城市是哪个？"
        elif turn == 40:
            question = "what is my name?"
        else:
            question = ""
        if question:
            new = [human(question)]
        elif turn % 3 == 0:
            new = weather_turn(cities[turn % len(cities)])[:-1]  # the answer comes below
        else:
            new = [human(f"第{turn}个问题：随便聊聊" + "话" * 30)]
        messages = add_messages(messages, new)

        fold = memory.fold(messages, summary)  # at the start of each turn, like a load_memory node
        if fold is not None:
            folds += 1
            summary = summarise(fold.previous_summary, fold.messages)
            messages = add_messages(messages, fold.remove)
        assert messages[-len(new)].id == new[0].id  # the current question was not folded

        if question:
            reply_text = model.invoke(with_summary(summary, [SystemMessage("You are a ReAct agent."),
                                                             *messages])).content
        elif turn % 3 == 0:
            reply_text = f"{cities[turn % len(cities)]}：晴，10°C。"
        else:
            reply_text = f"第{turn}个回答" + "答" * 40
        messages = add_messages(messages, [answer(reply_text)])
        sizes.append(len(messages))
        assert len(summary) <= MAX_SUMMARY_CHARS

        if turn == 1:
            assert "记住了" in reply_text
        if turn == 39:
            assert "杭州" in reply_text
        if turn == 40:
            assert "小明" in reply_text

    assert folds >= 10
    # at most K + slack messages when a turn starts, plus its answer: 13 here, of 100+ messages said
    assert max(sizes) <= memory.summarize_after + 1
    assert all("我叫小明" not in str(m.content) for m in messages)  # only the summary remembers it
    assert "我叫小明" in summary
