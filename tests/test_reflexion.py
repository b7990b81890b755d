"""The Reflexion graph: ReAct trials, an evaluator, lessons in the store and in the next trial's prompt."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from reactgraph.graph import Context, build_reflexion_graph, register_checker
from reactgraph.nodes.reflexion import lessons_namespace
from reactgraph.tools import ToolError, ToolGateway
from reactgraph.tools.builtin import builtin_tools
from support.scripted import ScriptedChatModel, by_purpose, call, prompt_notes, verdict

QUIET = Context(reflection="off", closing_check=False)  # a trial's only model call is think's
CALC = "计算 (15 + 27) * 3 等于多少"
SAME_LESSON = "Compare the answer with what the task expects before answering."


def tool_then_answer(name: str, answer: str, **args):
    """think's reply: one call of `name` while no tool result has come back in this trial, then `answer`."""
    def think(messages, info):
        if messages[-1].type == "tool":
            return answer
        return AIMessage("", tool_calls=[call(name, "c1", **args)])
    return think


def calculating(*, passed: bool = True, lesson: str = SAME_LESSON):
    """A model for the calculation question (and any other): each trial calls the calculator once and answers
    126 from its result; the judge passes it (or not) and the lesson is always the same."""
    return by_purpose(think=tool_then_answer("calculator", "(15 + 27) * 3 = 126.", expression="(15 + 27) * 3"),
                      reflect=verdict(parts=["(15 + 27) * 3"]), answer="(15 + 27) * 3 = 126.",
                      check={"parts": ["(15 + 27) * 3"], "missing": []},
                      evaluate={"passed": passed, "reason": "It computes the product."}, lesson={"lesson": lesson})


def ask(graph, question: str, context: Context | None = None, thread: str = "t1", **criteria):
    return graph.invoke({"messages": [HumanMessage(question)], **criteria},
                        config={"configurable": {"thread_id": thread}}, context=context or Context())


def nodes_of(result) -> list[str]:
    return [s["node"] for s in result["steps"]]


def think_notes(model) -> list[str]:
    """The notes messages of the think requests (the ReAct actor's), in order ("" for a request without one);
    lessons are data, so they never reach the system prompt."""
    think = [r.messages for r in model.requests if r.purpose == "think"]
    assert all(isinstance(r[0], SystemMessage) for r in think)
    assert not any("Lessons from earlier attempts" in r[0].content for r in think)
    return [prompt_notes(r) for r in think]


def test_the_compiled_graph_has_the_reflexion_nodes_and_edges():
    drawn = build_reflexion_graph(ToolGateway(), model=ScriptedChatModel.of()).get_graph()
    assert set(drawn.nodes) == {"__start__", "load_lessons", "trial", "evaluate", "self_reflect", "__end__"}
    assert {(e.source, e.target, e.conditional) for e in drawn.edges} == {
        ("__start__", "load_lessons", False), ("load_lessons", "trial", False),
        ("trial", "evaluate", True), ("trial", "__end__", True),
        ("evaluate", "self_reflect", True), ("evaluate", "__end__", True),
        ("self_reflect", "trial", True), ("self_reflect", "__end__", True),
    }


def test_a_first_trial_that_passes_the_models_judgement_ends_the_run():
    model = calculating()
    result = ask(build_reflexion_graph(model=model), CALC)
    assert model.requests[-1].purpose == "evaluate"  # the model's judgement was asked for, once
    assert [r.purpose for r in model.requests].count("evaluate") == 1
    assert result["trial"] == 1 and result["evaluation"]["passed"] and result["evaluation"]["by"] == "model"
    assert "126" in result["final_answer"] and result["status"] == "answered"
    assert nodes_of(result)[-1] == "evaluate" and "self_reflect" not in nodes_of(result)


def test_a_failed_trial_writes_a_lesson_that_the_next_trial_sees_and_passes_with():
    def second_attempt(messages):
        notes = prompt_notes(messages)
        wise = "Lessons from earlier attempts" in notes and "multiply" in notes
        return AIMessage("The answer is 126." if wise else "The answer is 42.")

    model = ScriptedChatModel.of(
        AIMessage("The answer is 42."),  # trial 1: think answers at once (QUIET: no other call)
        AIMessage("", tool_calls=[call("Lesson", "l1", lesson="Remember to multiply the sum by 3.")]),
        second_attempt)
    store = InMemoryStore()
    graph = build_reflexion_graph(ToolGateway(), checkpointer=InMemorySaver(), store=store, model=model)
    result = ask(graph, "(15+27)*3?", QUIET, thread="alice", expected="126")

    assert result["trial"] == 2 and result["evaluation"] == {
        "passed": True, "reason": "the answer contains the expected text", "by": "expected"}
    assert result["final_answer"] == "The answer is 126." and result["status"] == "answered"
    assert nodes_of(result) == ["finalize", "evaluate", "self_reflect", "finalize", "evaluate"]
    assert "Lessons from earlier attempts" not in prompt_notes(model.requests[0]["messages"])
    assert "Remember to multiply the sum by 3." in prompt_notes(model.requests[2]["messages"])
    assert "Remember to multiply" not in model.requests[2]["messages"][0].content
    (item,) = store.search(lessons_namespace("alice"))
    assert item.value["lesson"] == "Remember to multiply the sum by 3." and item.value["trial"] == 1
    assert item.value["answer"] == "The answer is 42." and "'126'" in item.value["reason"]
    # The session keeps the question and the last trial's answer only.
    assert [(m.type, m.content) for m in result["messages"]] == [("human", "(15+27)*3?"), ("ai", "The answer is 126.")]


def flaky_weather() -> ToolGateway:
    """get_weather fails on its first call only; there is no search to fall back on."""
    gateway = ToolGateway([m for m in builtin_tools() if m.name not in ("get_weather", "search")])
    real = next(m for m in builtin_tools() if m.name == "get_weather")
    calls = []

    @gateway.tool(name="get_weather")
    async def get_weather(city: str) -> dict:
        """Weather for a city (down for its first call)."""
        calls.append(city)
        if len(calls) == 1:
            raise ToolError("weather backend down")
        return await real.run(city=city)

    return gateway


def test_a_trial_spoiled_by_a_failing_tool_is_retried_with_the_lesson_in_its_prompt():
    # Trial 1: get_weather fails, reflection says so, think answers with what is missing; trial 2 calls it again.
    weather = tool_then_answer("get_weather", "北京：晴，3°C。", city="北京")

    def think(messages, info):
        if messages[-1].type == "tool" and "weather backend down" in messages[-1].text:
            return AIMessage("I could not get the weather for 北京.")  # a second round: the answer, part missing
        return weather(messages, info)

    def reflect(messages, info):
        failed = "weather backend down" in messages[-1].text
        return verdict(not failed, tool_error=failed, parts=["北京的天气"], missing=["北京的天气"] if failed else [])

    model = by_purpose(think=think, reflect=reflect, answer="北京：晴，3°C。",
                       lesson={"lesson": "get_weather failed once: call get_weather again before answering."},
                       check=lambda messages, info: {"parts": ["北京的天气"], "missing": []})
    store = InMemoryStore()
    graph = build_reflexion_graph(flaky_weather(), store=store, model=model)
    result = ask(graph, "北京的天气怎么样？", thread="bob", expected="3°C")
    assert result["trial"] == 2 and result["evaluation"]["passed"] and "3°C" in result["final_answer"]
    acts = [(s["step"], s["action"], s["status"]) for s in result["steps"] if s["node"] == "act"]
    # Trial 1 took two rounds (the failed call, then an answer saying what is missing); trial 2's records
    # number on from there, so `step` never repeats across trials.
    assert acts == [(1, "get_weather", "error"), (3, "get_weather", "ok")]
    assert result["iteration"] == 3  # 2 + trial 2's one round (its reflection found enough to answer)
    (lesson,) = [i.value["lesson"] for i in store.search(lessons_namespace("bob"))]
    assert "get_weather" in lesson
    notes = think_notes(model)
    assert not any("Lessons from earlier attempts" in p for p in notes[:2])
    assert lesson in notes[-1]


def test_at_most_max_trials_are_run_and_the_status_is_the_last_trials():
    store = InMemoryStore()
    result = ask(build_reflexion_graph(store=store, max_trials=2, model=calculating()), CALC, expected="999")
    assert result["trial"] == 2 and not result["evaluation"]["passed"]
    assert result["status"] == "answered" and "126" in result["final_answer"]
    assert nodes_of(result).count("evaluate") == 2 and nodes_of(result).count("self_reflect") == 2
    assert len(store.search(lessons_namespace("t1"))) == 2
    assert len(result["lessons"]) == 1  # the same lesson twice is shown once


def test_lessons_from_an_earlier_run_of_the_same_question_are_recalled_from_the_store():
    model = calculating()
    graph = build_reflexion_graph(store=InMemoryStore(), checkpointer=InMemorySaver(), model=model, max_trials=1)
    ask(graph, CALC, thread="carol", expected="999")
    model.requests.clear()
    again = ask(graph, CALC, thread="carol")
    assert again["evaluation"]["by"] == "model"  # the first question's `expected` does not carry over
    assert again["lessons"] and again["lessons"][0] in think_notes(model)[0]
    other = ask(graph, "what is 12 times 7?", thread="carol")
    assert other["lessons"] == []


def test_a_named_checker_judges_the_answer_and_an_unknown_one_is_refused():
    register_checker("mentions_126", lambda answer, steps, **params: ("126" in answer, "looked for 126"))
    result = ask(build_reflexion_graph(model=calculating(passed=False)), CALC, checker="mentions_126")
    assert result["evaluation"] == {"passed": True, "reason": "looked for 126", "by": "checker"}
    with pytest.raises(ValueError, match="unknown checker 'nope'"):
        ask(build_reflexion_graph(model=calculating()), CALC, checker="nope")


def test_bad_max_trials_is_refused_at_build_time():
    with pytest.raises(ValueError, match="max_trials"):
        build_reflexion_graph(max_trials=0)


async def test_async_invoke_gives_the_same_run_as_invoke():
    question = {"messages": [HumanMessage(CALC)], "expected": "999"}
    result = await build_reflexion_graph(max_trials=2, model=calculating()).ainvoke(question, context=Context())
    sync = build_reflexion_graph(max_trials=2, model=calculating()).invoke(question, context=Context())
    assert result["trial"] == sync["trial"] == 2
    assert nodes_of(result) == nodes_of(sync) and result["final_answer"] == sync["final_answer"]
