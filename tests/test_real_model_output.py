"""What a user sees of a real model's run: answers without ReAct markup, streams without internal sentinels or
duplicate messages, one clear line for a format correction, the verdict's note instead of its JSON.

Real models are the real langchain-openai client against the local OpenAI-compatible server
(tests/support/provider_server.py); the scripted chat model stands in where only the reply's wording matters.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Overwrite

from reactgraph.graph import Context, build_plan_solve_graph, build_react_graph
from reactgraph.graph.sessions import plan_run, run
from support.provider_server import ProviderServer, calls, text, verdict
from support.scripted import ScriptedChatModel, call, notes_gateway, tool_reply

MODEL = "openai:test-model"




def _sentinels(value: Any, depth: int = 0) -> list[Any]:
    """Every LangGraph instruction object (`Overwrite`, ...) anywhere in an update; bounded in depth."""
    if depth > 6:
        return []
    if isinstance(value, Overwrite) or type(value).__module__.startswith("langgraph."):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _sentinels(v, depth + 1)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _sentinels(v, depth + 1)]
    return []


# --- final answers ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("reply", "answer"), [
    ("Thought: I know this one.\nFinal Answer: Paris is the capital of France.", "Paris is the capital of France."),
    ("**Final Answer:** Paris.", "Paris."),
    ("```text\nThought: easy\nFinal Answer: Paris.\n```", "Paris."),
    ("Thought: Paris is the capital of France.", "Paris is the capital of France."),
])
def test_an_answer_written_in_react_markup_reaches_the_user_without_it(reply, answer):
    model = ScriptedChatModel.of(AIMessage(reply))
    result = build_react_graph(model=model).invoke({"messages": [HumanMessage("Capital of France?")]},
                                                   context=Context(reflection="off"))
    assert (result["status"], result["final_answer"]) == ("answered", answer)
    assert result["steps"][-1]["observation"] == answer


def test_a_closing_reply_in_markup_is_cleaned_in_finalize_and_in_solve():
    gateway = notes_gateway()
    finalize_model = ScriptedChatModel.of(tool_reply("look it up", call("lookup", topic="Paris")),
                                          AIMessage("Thought: the notes say so.\nFinal Answer: Paris, per the notes."))
    result = build_react_graph(gateway, model=finalize_model).invoke(
        {"messages": [HumanMessage("Capital of France?")]}, context=Context(reflection="rules", max_iterations=1))
    assert result["final_answer"] == "Paris, per the notes."
    assert result["messages"][-1].content == "Paris, per the notes."  # the conversation keeps the clean text too

    plan = AIMessage("", tool_calls=[call("Plan", "p1", steps=[{"goal": "Look up Paris", "tool": "lookup"}])])
    solve_model = ScriptedChatModel.of(plan, tool_reply("look it up", call("lookup", topic="Paris")),
                                       AIMessage("The notes are about Paris."),
                                       AIMessage("```\nThought: one step, done.\nFinal Answer: Paris.\n```"))
    result = build_plan_solve_graph(gateway, model=solve_model).invoke(
        {"messages": [HumanMessage("Capital of France?")]}, context=Context())
    assert (result["status"], result["final_answer"]) == ("answered", "Paris.")


# --- the updates stream ---------------------------------------------------------------------------------------

def test_the_updates_stream_carries_values_only_and_each_message_once(redis_url):
    graph = build_react_graph(checkpointer=InMemorySaver())
    updates: list[tuple[str, dict[str, Any]]] = []
    for question in ("北京和上海哪个更热？", "计算 (15+27)*3"):  # the second turn resets the steps again
        run(graph, plan_run(graph, question, "s-updates"), Context(), lambda node, u: updates.append((node, u)))
    assert updates and not [s for _, u in updates for s in _sentinels(u)]
    turn_starts = [u for node, u in updates if node == "load_memory" and "turn_id" in u]  # begin_turn's reset
    assert len(turn_starts) == 2 and all(isinstance(u["steps"], list) for u in turn_starts)
    ids = [m.id for _, u in updates for m in u.get("messages", []) if isinstance(m, BaseMessage)]
    assert len(ids) == len(set(ids))


def test_a_streamed_real_model_run_shows_each_message_once_and_no_structured_json(provider):
    with ProviderServer(calls(("calculator", {"expression": "6*7"}), content="Multiply."),
                      verdict(True, note="The product is known."), text("6*7 = 42")) as server:
        provider(server)
        graph = build_react_graph(checkpointer=InMemorySaver())
        updates: list[tuple[str, dict[str, Any]]] = []
        tokens: list[tuple[str, str]] = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = run(graph, plan_run(graph, "6*7?", "s-stream"), Context(model=MODEL),
                         lambda node, u: updates.append((node, u)), lambda node, t, reply: tokens.append((node, t)))
    assert [str(w.message) for w in caught] == []
    assert result["final_answer"] == "6*7 = 42"
    assert {node for node, _ in tokens} == {"think", "finalize"}  # never the reflection's JSON
    assert "".join(t for node, t in tokens if node == "finalize") == "6*7 = 42"
    assert not [s for _, u in updates for s in _sentinels(u)]
    answers = [m for _, u in updates for m in u.get("messages", []) if m.type == "ai" and m.text == "6*7 = 42"]
    assert len(answers) == 1
    assert sum(s["tokens"] for s in result["steps"]) == sum(u["total_tokens"] for u in server.usage_sent) > 0


def test_the_messages_stream_has_the_closing_answer_once(provider):
    with ProviderServer(calls(("get_time", {"timezone": "Tokyo"})), verdict(True, note="Known."),
                      text("Evening in Tokyo.")) as server:
        provider(server)
        parts = list(build_react_graph().stream({"messages": [HumanMessage("Tokyo time?")]},
                                                context=Context(model=MODEL), stream_mode=["messages", "updates"]))
    finalize = [chunk for mode, part in parts if mode == "messages"
                for chunk, meta in [part] if meta["langgraph_node"] == "finalize"]
    assert "".join(c.text for c in finalize) == "Evening in Tokyo."  # streamed once, not repeated whole
    assert len({c.id for c in finalize}) == 1
    final_update = next(part["finalize"] for mode, part in parts if mode == "updates" and "finalize" in part)
    assert final_update["messages"][0].id == finalize[0].id


# --- the CLI ------------------------------------------------------------------------------------------------------

def test_the_cli_labels_a_format_correction_in_one_line(cli, provider):
    with ProviderServer(text("Sure! Let me think about it.\nIt is probably four."), text("Final Answer: 4")) as server:
        provider(server)
        code, out, err = cli("ask", "2+2?", "--model", MODEL, "--protocol", "text", "--reflection", "off",
                             "--store", "memory")
    assert code == 0, err
    lines = out.splitlines()
    assert "    Format error: the reply has neither 'Action:' nor 'Final Answer:'" in lines
    assert not [line for line in lines if "Model:" in line or "Reply in exactly" in line]
    assert not [line for line in lines if line.strip().startswith(("Thought: <", "Action Input: <"))]


def test_the_cli_shows_an_answer_in_markup_without_it(cli, provider):
    with ProviderServer(text("Thought: I can answer directly.\nFinal Answer: Forty-two.")) as server:
        provider(server)
        code, out, err = cli("ask", "answer?", "--model", MODEL, "--reflection", "off", "--store", "memory",
                             "--json")
    assert code == 0, err
    assert json.loads(out)["answer"] == "Forty-two."


def test_public_updates_unwrap_overwrite_only():
    from reactgraph.graph.sessions import public_update
    marker = dataclasses.make_dataclass("Other", ["value"])(1)
    assert public_update({"steps": Overwrite([1]), "x": marker, "y": [2]}) == {"steps": [1], "x": marker, "y": [2]}
