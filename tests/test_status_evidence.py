"""Statuses from evidence (issue 23), the same for every model and every graph: `answered` needs a final answer
given in the protocol, not cut off at the output limit, something the run tried that worked, and no part missing
in the model's own account of the question (its reflection verdict, its plan, or one closing self-check). Where
no model gave that account the coverage says `unchecked`, never borrowed from the scripted model's rules.

The wire is checked against the local provider server (OpenAI's and Anthropic's shapes); the graphs' rules with
scripted chat models."""

from __future__ import annotations

import json
import uuid

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from reactgraph.graph import Context, build_react_graph
from reactgraph.graph.plan_solve import build_plan_solve_graph
from reactgraph.graph.reflexion import build_reflexion_graph
from support.cli_env import run_in_process
from support.provider_server import ProviderServer, Reply, closing_check, cut_off, text
from support.scripted import ScriptedChatModel, call, notes_gateway, tool_reply

SHAPES = ("openai", "anthropic")  # the API shapes the provider server speaks (conftest `provider`)
OFF = Context(reflection="off")




def ask(graph, question: str, context: Context) -> dict:
    return graph.invoke({"messages": [HumanMessage(question)]}, context=context)


def closing_status(result: dict) -> str:
    return [s for s in result["steps"] if s["node"] in ("finalize", "solve")][-1]["status"]


# --- over the wire ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES)
def test_a_reply_cut_off_at_the_output_limit_is_never_answered(provider, shape):
    with ProviderServer(cut_off("Paris is the capital of France, and Paris is the capital of")) as server:
        model = provider(server, shape)
        result = ask(build_react_graph(), "Capital of France?", Context(model=model, reflection="off"))
    assert result["status"] == closing_status(result) == "limit_reached"
    assert result["final_answer"].endswith("(The answer was cut off at the model's output limit.)")
    # The evidence settles the status: no self-check is paid for, and no account is claimed.
    assert len(server.requests) == 1 and result["coverage"]["by"] == "unchecked"


@pytest.mark.parametrize("shape", SHAPES)
def test_with_reflection_off_one_closing_check_gives_the_models_account(provider, shape):
    with ProviderServer(text("Paris."), closing_check(["the capital of France", "its population"],
                                                      ["its population"])) as server:
        model = provider(server, shape)
        result = ask(build_react_graph(), "Capital of France, and its population?",
                     Context(model=model, reflection="off"))
    assert server.rejections == [] and len(server.requests) == 2
    assert "ClosingCheck" in json.dumps(server.requests[1])  # the schema the check asks the model to fill in
    assert result["coverage"] == {"parts": ["the capital of France", "its population"],
                                  "missing": ["its population"], "by": "model"}
    assert result["status"] == closing_status(result) == "partial"
    assert result["final_answer"] == "Paris.\nMissing: its population."


def test_an_account_with_nothing_missing_is_answered(provider):
    with ProviderServer(text("Paris."), closing_check(["the capital of France"])) as server:
        result = ask(build_react_graph(), "Capital of France?", Context(model=provider(server), reflection="rules"))
    assert (result["status"], result["final_answer"], result["coverage"]["by"]) == ("answered", "Paris.", "model")


def test_with_the_closing_check_off_the_coverage_is_unchecked(provider):
    with ProviderServer(text("Paris.")) as server:
        result = ask(build_react_graph(), "Capital of France?",
                     Context(model=provider(server), reflection="off", closing_check=False))
    assert len(server.requests) == 1 and result["status"] == "answered"
    assert result["coverage"] == {"parts": [], "missing": [], "by": "unchecked"}


def junk_checker(body: dict) -> Reply:
    """A model that answers, then meets every form of the self-check (a JSON schema, a forced call, JSON mode, JSON
    asked for in the text) with prose."""
    return text("Paris.") if body.get("tool_choice") == "auto" else text("Looks complete to me!")


def test_a_junk_self_check_is_unchecked_in_every_output_and_nothing_crashes(provider, monkeypatch, capfd):
    with ProviderServer(then=junk_checker) as server:
        result = ask(build_react_graph(), "Capital of France?", Context(model=provider(server), reflection="off"))
    assert (result["status"], result["final_answer"]) == ("answered", "Paris.")
    assert result["coverage"]["by"] == "unchecked"
    assert len(server.requests) == 5  # the answer, then each form of the check once: none could be read
    with ProviderServer(then=junk_checker) as server:
        env = {"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-test", "REACTGRAPH_MODEL_RETRIES": "0",
               "REACTGRAPH_NODE_RETRIES": "0"}
        argv = ["ask", "Capital of France?", "--reflection", "off", "--store", "memory", "--model", "openai:test-model"]
        done = run_in_process(monkeypatch, capfd, [*argv, "--json"], **env)
        shown = run_in_process(monkeypatch, capfd, argv, **env)
    payload = json.loads(done.stdout)
    assert done.returncode == 0 and payload["coverage"] == {"parts": [], "missing": [], "by": "unchecked"}
    assert shown.returncode == 0 and "Final answer · answered · coverage unchecked" in shown.stdout


# --- the same rules in every graph (scripted chat models) ----------------------------------------------------------

def test_a_run_whose_every_tool_call_failed_is_never_answered():
    model = ScriptedChatModel.of(tool_reply("count", call("broken", "c1", x=1)), AIMessage("The count is 42."))
    result = ask(build_react_graph(notes_gateway(broken=True), model=model), "the count?", OFF)
    assert result["status"] == closing_status(result) == "no_answer"
    assert result["final_answer"] == "The count is 42.\n(Every tool call failed: no tool result backs this answer.)"
    assert len(model.requests) == 2  # no self-check: nothing could make this run answered


def test_a_call_that_found_nothing_did_not_fail():
    model = ScriptedChatModel.of(tool_reply("look", call("lookup", "c1", topic="zzq")), AIMessage("No notes."))
    result = ask(build_react_graph(notes_gateway(found=lambda topic: False), model=model), "zzq?",
                 Context(reflection="off", closing_check=False))
    assert result["status"] == "answered"  # no account says a part is missing: the model's answer stands


def test_a_plan_and_solve_run_on_a_fallback_plan_whose_step_failed_is_never_answered():
    model = ScriptedChatModel.of(AIMessage("Sure! First I will count."),  # no plan: the whole question, one step
                                 tool_reply("count", call("broken", "c1", x=1)), AIMessage("The tool failed."),
                                 AIMessage("The count is 42."))
    result = ask(build_plan_solve_graph(notes_gateway(broken=True), model=model), "the count?", OFF)
    assert [s["status"] for s in result["steps"] if s["node"] == "plan"] == ["plan_fallback"]
    assert [r["status"] for r in result["step_results"]] == ["failed"]
    assert result["status"] == closing_status(result) == "no_answer"


def test_a_plan_whose_every_step_failed_without_a_tool_is_never_answered():
    plan = AIMessage("", tool_calls=[call("Plan", "p1", steps=[{"goal": "count", "tool": None}])])
    model = ScriptedChatModel.of(plan, AIMessage(""), AIMessage("The count is 42."))  # an empty step result fails
    result = ask(build_plan_solve_graph(notes_gateway(), model=model), "the count?", OFF)
    assert [r["status"] for r in result["step_results"]] == ["failed"]
    assert result["status"] == "no_answer" and result["final_answer"].endswith("(Every step of the plan failed.)")


def test_a_text_protocol_closing_reply_without_a_final_answer_gives_none():
    plan = AIMessage("1. look x up")  # the text protocol's plan: a numbered list
    action = 'Action: lookup\nAction Input: {"topic": "x"}'
    model = ScriptedChatModel.of(plan, AIMessage(f"Thought: look\n{action}"), AIMessage("Final Answer: notes on x"),
                                 AIMessage(f"Thought: I should look again.\n{action}"))  # the closing reply
    result = ask(build_plan_solve_graph(notes_gateway(), model=model), "what is x?",
                 Context(protocol="text", reflection="off"))
    assert result["status"] == closing_status(result) == "no_answer"
    assert result["final_answer"] == "I should look again.\n(The model gave no final answer.)"


def test_a_cut_off_closing_reply_is_never_answered_in_plan_and_solve():
    plan = AIMessage("", tool_calls=[call("Plan", "p1", steps=[{"goal": "look x up", "tool": "lookup"}])])
    cut = AIMessage("x is a letter, and x is a letter, and x is", response_metadata={"finish_reason": "length"})
    model = ScriptedChatModel.of(plan, tool_reply("look", call("lookup", "c1", topic="x")), AIMessage("Found."), cut)
    result = ask(build_plan_solve_graph(notes_gateway(), model=model), "what is x?", OFF)
    assert result["status"] == closing_status(result) == "limit_reached"


def test_reflexion_keeps_its_trials_status_even_when_the_judge_passes_it():
    judged = AIMessage("", tool_calls=[call("Evaluation", "e1", passed=True, reason="Looks right.")])
    model = ScriptedChatModel.of(tool_reply("count", call("broken", "c1", x=1)), AIMessage("The count is 42."),
                                 judged)
    graph = build_reflexion_graph(notes_gateway(broken=True), model=model, max_trials=1)
    result = ask(graph, "the count?", OFF)
    assert result["evaluation"]["passed"] and result["status"] == "no_answer"


def test_a_models_coverage_account_is_bounded():
    from reactgraph.nodes.closing import model_account

    account = model_account(["x" * 5000, *[f"part {n}\n" for n in range(500)]], ["y" * 5000])
    assert len(account.parts) == 20 and len(account.parts[0]) == 200 and account.parts[1] == "part 0"
    assert len(account.missing[0]) == 200


def test_the_trace_of_an_unchecked_turn_says_so_where_it_shows_the_status(monkeypatch, capfd, redis_url):
    with ProviderServer(then=junk_checker) as server:
        env = {"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-test", "REACTGRAPH_MODEL_RETRIES": "0",
               "REACTGRAPH_NODE_RETRIES": "0"}
        session = f"unchecked-{uuid.uuid4().hex[:8]}"
        asked = run_in_process(monkeypatch, capfd, ["ask", "Capital of France?", "--reflection", "off", "--store",
                                                    redis_url, "--session", session, "--model", "openai:test-model"],
                               **env)
    traced = run_in_process(monkeypatch, capfd, ["trace", "--session", session, "--store", redis_url])
    assert asked.returncode == 0 and traced.returncode == 0, traced.stderr
    assert f"session {session} · answered · coverage unchecked · " in traced.stdout
    assert "Final (answered · coverage unchecked): Paris." in traced.stdout
