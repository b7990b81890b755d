"""The ReAct graph's wiring and loop control, driven by scripted chat models through the compiled graph."""

from __future__ import annotations

import asyncio
import re
import time
from datetime import UTC, datetime

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph.graph import Context, build_react_graph, model_retry_policy
from reactgraph.tools import ToolGateway
from support.scripted import ScriptedChatModel, call, notes_gateway, prompt_notes, tool_reply

RULES = Context(reflection="rules")


@pytest.fixture
def gateway() -> ToolGateway:
    gw = notes_gateway(found=lambda topic: topic == "graphs", broken=True)

    @gw.tool(timeout_s=0.2)
    async def slow(x: int = 0) -> int:
        """Never answers in time."""
        await asyncio.sleep(60)  # cancelled at the 0.2 s timeout: far past any bound below
        return x

    return gw


def ask(graph, question: str, context: Context = RULES, thread: str = "t1"):
    return graph.invoke({"messages": [HumanMessage(question)]},
                        config={"configurable": {"thread_id": thread}}, context=context)


def test_the_compiled_graph_has_exactly_the_react_nodes_and_edges(gateway):
    drawn = build_react_graph(gateway, model=ScriptedChatModel.of()).get_graph()
    assert set(drawn.nodes) == {"__start__", "load_memory", "think", "approve", "act", "observe", "reflect",
                                "finalize", "save_memory", "__end__"}
    edges = {(e.source, e.target, e.conditional) for e in drawn.edges}
    assert edges == {
        ("__start__", "load_memory", False), ("load_memory", "think", False),
        ("think", "act", True), ("think", "approve", True), ("think", "finalize", True),
        ("approve", "act", True), ("approve", "observe", True),
        ("act", "observe", False), ("observe", "reflect", True), ("observe", "finalize", True),
        ("observe", "think", True),  # a tool's Command going back to the model (goto "model")
        ("reflect", "think", True), ("reflect", "finalize", True),
        ("finalize", "save_memory", False), ("save_memory", "__end__", False),
    }


def test_a_tool_round_then_an_answer_records_every_step(gateway):
    model = ScriptedChatModel.of(tool_reply("I need notes.", call("lookup", topic="graphs")),
                                 AIMessage("Graphs have nodes."))
    result = ask(build_react_graph(gateway, model=model), "what are graphs?")
    assert (result["status"], result["final_answer"], result["iteration"]) == ("answered", "Graphs have nodes.", 2)
    assert [(s["node"], s["status"]) for s in result["steps"]] == [
        ("act", "ok"), ("reflect", "reflection"), ("finalize", "answered")]
    act = result["steps"][0]
    assert act["thought"] == "I need notes." and act["action"] == "lookup"
    assert act["action_input"] == {"topic": "graphs"} and "notes on graphs" in act["observation"]
    # the model was offered the gateway's tools, as OpenAI schemas
    assert [t["function"]["name"] for t in model.requests[0]["tools"]] == ["lookup", "broken", "slow"]


def test_at_the_iteration_limit_the_agent_still_answers_from_what_it_observed(gateway):
    rounds = [tool_reply(f"round {i}", call("lookup", f"c{i}", topic=f"topic {i}")) for i in range(3)]
    model = ScriptedChatModel.of(*rounds, AIMessage("Partial: topics 0-2 looked up; the rest is missing."))
    result = ask(build_react_graph(gateway, model=model), "q", Context(reflection="rules", max_iterations=3))
    assert result["status"] == "limit_reached" and result["iteration"] == 3
    assert result["final_answer"].startswith("Partial")
    finalize_request = model.requests[-1]
    assert finalize_request["tools"] is None  # the closing answer is written without tools
    assert "step limit of 3" in finalize_request["messages"][0].content


def test_a_repeated_identical_call_stops_the_loop(gateway):
    same = lambda i: tool_reply("again", call("lookup", f"c{i}", topic="cats"))  # noqa: E731
    model = ScriptedChatModel.of(same(1), same(2), AIMessage("Cats: nothing found."))
    result = ask(build_react_graph(gateway, model=model), "cats?")
    assert result["iteration"] == 2 and result["status"] == "limit_reached"  # a repeat ends limit_reached
    assert result["steps"][-2]["node"] == "reflect" and '"repeated_call":true' in result["steps"][-2]["observation"]
    assert "repeated an earlier one" in model.requests[-1]["messages"][0].content


def test_a_failing_tool_becomes_an_observation_and_the_model_falls_back(gateway):
    model = ScriptedChatModel.of(tool_reply("try broken", call("broken")),
                                 tool_reply("use lookup instead", call("lookup", "c2", topic="graphs")),
                                 AIMessage("Answer from lookup."))
    result = ask(build_react_graph(gateway, model=model), "q")
    statuses = [s["status"] for s in result["steps"] if s["node"] == "act"]
    assert statuses == ["error", "ok"] and result["status"] == "answered"
    assert "broken failed" in result["steps"][1]["thought"]  # the reflection note names the failure
    notes = prompt_notes(model.requests[1]["messages"])  # the note is data: in the notes, not the system prompt
    assert "Reflection:" in notes and "broken failed" in notes
    assert "broken failed" not in model.requests[1]["messages"][0].content


def test_a_tool_that_times_out_never_crashes_the_run(gateway):
    model = ScriptedChatModel.of(tool_reply("slow one", call("slow")), AIMessage("Could not get it in time."))
    started = time.perf_counter()
    result = ask(build_react_graph(gateway, model=model), "q")
    # the whole run (two model turns and the timed-out call) against the tool's 60 s: 3 s was tight for a run
    # beside the whole suite on a loaded machine
    assert time.perf_counter() - started < 20
    # Its only tool call failed: whatever the model says, the run found nothing (issue 23: statuses from evidence).
    assert result["steps"][0]["status"] == "timeout" and result["status"] == "no_answer"


def test_malformed_and_unknown_tool_calls_go_back_to_the_model_as_observations(gateway):
    malformed = AIMessage(content="", invalid_tool_calls=[
        {"name": "lookup", "args": "{topic: graphs", "id": "bad1", "error": "Expecting property name",
         "type": "invalid_tool_call"}])
    model = ScriptedChatModel.of(malformed, tool_reply("hmm", call("teleport", "c2", to="mars")), AIMessage("Done."))
    result = ask(build_react_graph(gateway, model=model), "q")
    acts = [s for s in result["steps"] if s["node"] == "act"]
    assert [s["status"] for s in acts] == ["invalid_args", "unknown_tool"]
    assert "Expecting property name" in acts[0]["observation"]
    assert "Available tools: broken, lookup, slow" in acts[1]["observation"]
    assert result["status"] == "no_answer"  # every tool call failed: "Done." is backed by nothing


def test_an_empty_reply_is_retried_once_then_the_run_fails_with_a_reason(gateway):
    model = ScriptedChatModel.of(AIMessage(""), AIMessage("Recovered answer."))
    assert ask(build_react_graph(gateway, model=model), "q")["final_answer"] == "Recovered answer."
    model = ScriptedChatModel.of(AIMessage(""), AIMessage(""))
    result = ask(build_react_graph(gateway, model=model), "q")
    assert result["status"] == "failed" and "empty reply" in result["final_answer"]


def test_a_model_that_keeps_raising_ends_the_run_as_failed_with_the_reason(gateway):
    # A connection error is transient: the think node is run again by its RetryPolicy, then the run fails.
    model = ScriptedChatModel.of(*[ConnectionError("provider unreachable")] * 2)
    graph = build_react_graph(gateway, model=model, model_retry=model_retry_policy(retries=1, delay_s=0))
    result = ask(graph, "q")
    assert result["status"] == "failed" and "provider unreachable" in result["final_answer"]
    assert result["steps"][-1]["node"] == "finalize" and len(model.requests) == 2


def test_llm_reflection_uses_the_models_structured_verdict(gateway):
    verdict = AIMessage("", tool_calls=[call("ReflectionVerdict", "v1", enough_information=True, tool_error=False,
                                             need_other_tool=False, repeated_call=False, note="Enough to answer.")])
    model = ScriptedChatModel.of(tool_reply("look", call("lookup", topic="graphs")), verdict,
                                 AIMessage("Composed answer."))
    result = ask(build_react_graph(gateway, model=model), "q", Context(reflection="llm"))
    assert result["reflection"]["note"] == "Enough to answer."
    assert result["final_answer"] == "Composed answer." and result["status"] == "answered"
    assert "sufficient to answer" in model.requests[-2]["messages"][0].content  # enough → finalize composes
    # The verdict named no parts, so the closing self-check asks for them (this script has no reply left for it).
    assert model.requests[-1]["tools"][0].__name__ == "ClosingCheck" and result["coverage"]["by"] == "unchecked"


def test_unparsable_llm_reflection_falls_back_to_rules(gateway):
    model = ScriptedChatModel.of(tool_reply("look", call("broken")), AIMessage("not a verdict"), AIMessage("Final."))
    result = ask(build_react_graph(gateway, model=model), "q", Context(reflection="llm"))
    assert result["steps"][1]["node"] == "reflect" and "used rules" in result["steps"][1]["thought"]
    assert result["status"] == "no_answer"  # the only tool call failed


def test_reflection_off_goes_straight_back_to_think(gateway):
    model = ScriptedChatModel.of(tool_reply("look", call("lookup", topic="graphs")), AIMessage("A."))
    result = ask(build_react_graph(gateway, model=model), "q", Context(reflection="off"))
    assert [s["node"] for s in result["steps"]] == ["act", "finalize"] and result["reflection"] is None


def test_denied_tools_are_neither_offered_nor_runnable(gateway):
    model = ScriptedChatModel.of(tool_reply("try", call("broken")), AIMessage("ok"))
    result = ask(build_react_graph(gateway, model=model), "q", Context(reflection="rules", denied_tools=["broken"]))
    assert "broken" not in [t["function"]["name"] for t in model.requests[0]["tools"]]
    assert result["steps"][0]["status"] == "denied"


def test_each_new_question_in_a_session_starts_a_fresh_turn(gateway):
    model = ScriptedChatModel.of(tool_reply("look", call("lookup", topic="graphs")), AIMessage("First."),
                                 AIMessage("Second."))
    graph = build_react_graph(gateway, checkpointer=InMemorySaver(), model=model)
    unchecked = Context(reflection="rules", closing_check=False)  # the script holds the answers only
    ask(graph, "one", unchecked, thread="s")
    second = ask(graph, "two", unchecked, thread="s")
    assert second["final_answer"] == "Second." and second["iteration"] == 1
    assert [s["node"] for s in second["steps"]] == ["finalize"]
    assert len(second["messages"]) == 6  # both turns' messages are kept in the session


async def test_async_and_streaming_apis_give_the_same_run(gateway):
    def script():
        return ScriptedChatModel.of(tool_reply("look", call("lookup", topic="graphs")), AIMessage("Done."))

    result = await build_react_graph(gateway, model=script()).ainvoke(
        {"messages": [HumanMessage("q")]}, context=RULES)
    nodes = [next(iter(u)) async for u in build_react_graph(gateway, model=script()).astream(
        {"messages": [HumanMessage("q")]}, context=RULES, stream_mode="updates")]
    sync_nodes = [next(iter(u)) for u in build_react_graph(gateway, model=script()).stream(
        {"messages": [HumanMessage("q")]}, context=RULES, stream_mode="updates")]
    assert result["final_answer"] == "Done."
    assert nodes == sync_nodes == ["load_memory", "think", "act", "observe", "reflect", "think", "finalize",
                                   "save_memory"]


def test_long_observations_are_cut_to_the_budget(gateway):
    @gateway.tool
    def dump(n: int = 10_000) -> str:
        """Returns a long text."""
        return "x" * n

    model = ScriptedChatModel.of(tool_reply("dump", call("dump")), AIMessage("ok"))
    result = ask(build_react_graph(gateway, model=model), "q", Context(reflection="rules", observation_budget=500))
    tool_message = result["messages"][2]
    assert len(tool_message.content) < 600 and "truncated: showing 500 of 10000" in tool_message.content
    assert result["steps"][0]["observation"] == tool_message.content


def test_bad_context_values_are_refused_at_construction():
    with pytest.raises(ValueError, match="reflection"):
        Context(reflection="sometimes")
    with pytest.raises(ValueError, match="max_iterations"):
        Context(max_iterations=0)


def test_the_system_prompt_names_the_date_not_the_time_so_requests_repeat_within_a_day(gateway):
    """A clock in the prompt makes every request unique (no provider prompt cache, no two runs alike); the time
    of day is the get_time tool's."""
    model = ScriptedChatModel.of(tool_reply("look", call("lookup", "c1", topic="graphs")), AIMessage("Done."))
    ask(build_react_graph(gateway, model=model), "q", Context(reflection="rules", closing_check=False))
    systems = [r["messages"][0].content for r in model.requests]
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    assert len(systems) == 2 and systems[0] == systems[1]
    assert f"Today's date (UTC): {today};" in systems[0] and not re.search(r"\d{2}:\d{2}", systems[0])
