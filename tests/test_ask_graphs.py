"""`reactgraph ask --graph`: every paradigm from the command line, each showing its own steps live, `--json` in
one shape for all, and a session that remembers which graph it belongs to (for the next turn, history and trace)."""

from __future__ import annotations

import json
import uuid

import pytest

QUESTION = "北京和上海的天气分别怎么样？哪个城市更热？"


def session_id() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"  # a session of its own: the Redis is shared with other runs


def test_plan_and_solve_shows_its_plan_and_each_step_of_it(cli):
    code, out, err = cli("ask", QUESTION, "--graph", "plan_solve", "--session", session_id())
    assert code == 0, err
    assert "graph: plan_solve" in out
    assert "Plan: 2 step(s)" in out
    for line in ("1. 北京的天气怎么样？", "[step 1/2] Thought:", "Step 1 done:", "[step 2/2] Thought:",
                 "Action: get_weather", "Final answer · answered"):
        assert line in out, out
    assert "Reflection:" not in out  # ReAct's step, not Plan-and-Solve's


def test_reflexion_shows_its_trial_and_the_evaluation_of_it(cli):
    code, out, err = cli("ask", QUESTION, "--graph", "reflexion", "--session", session_id())
    assert code == 0, err
    assert "graph: reflexion" in out
    # The trial's own ReAct steps are streamed as they happen, then the trial is judged.
    for line in ("Trial 1", "Thought:", "Action: get_weather", "Observation", "Evaluation [trial 1", "passed",
                 "Final answer · answered"):
        assert line in out, out
    assert out.index("Trial 1") < out.index("Action: get_weather") < out.index("Evaluation [trial 1")


@pytest.mark.parametrize("graph", ["react", "plan_solve", "reflexion"])
def test_json_has_the_same_keys_for_every_graph(graph, cli):
    code, out, err = cli("ask", QUESTION, "--graph", graph, "--json", "--session", session_id())
    assert code == 0, err
    payload = json.loads(out)
    assert set(payload) == {"answer", "status", "coverage", "session", "graph", "model", "iterations", "elapsed_s",
                            "resumed", "usage", "steps", "structured_response"}
    assert payload["graph"] == graph and payload["status"] == "answered"
    assert any(step["action"] == "get_weather" for step in payload["steps"])


def test_a_session_keeps_its_graph_for_the_next_turn_and_refuses_another(cli):
    session = session_id()
    assert cli("ask", QUESTION, "--graph", "plan_solve", "--session", session)[0] == 0
    code, out, err = cli("ask", "上海现在几点？", "--session", session)  # no --graph: the session's own
    assert code == 0, err
    assert "graph: plan_solve" in out and "[step 1/1] Thought:" in out
    code, out, err = cli("ask", "上海呢？", "--graph", "reflexion", "--session", session)
    assert code != 0 and out.count("\n") <= 1
    assert f"session {session!r} is a plan_solve session: ask it with --graph plan_solve" in err


def test_history_and_trace_read_a_plan_and_solve_session_with_its_own_graph(cli):
    session = session_id()
    assert cli("ask", QUESTION, "--graph", "plan_solve", "--session", session)[0] == 0
    code, out, err = cli("trace", "--session", session, "--json")
    assert code == 0, err
    nodes = [entry["node"] for entry in json.loads(out)["nodes"]]
    assert nodes[:2] == ["load_memory", "plan"] and "execute_step" in nodes and "solve" in nodes
    code, out, err = cli("history", "--session", session, "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert {"plan", "solve"} <= {row["node"] for row in rows}


def test_an_unknown_graph_is_refused_naming_the_known_ones(cli):
    code, out, err = cli("ask", QUESTION, "--graph", "tree_of_thoughts")
    assert code == 2 and out == ""
    assert "unknown graph 'tree_of_thoughts': choose from react, plan_solve, reflexion" in err


def test_a_graph_name_read_back_from_a_checkpoint_is_only_a_known_one():
    """Checkpoint metadata is Redis content: a name that is not one of the graphs is not used to build anything."""
    from langgraph.checkpoint.memory import InMemorySaver

    from reactgraph.graph import build_react_graph, session_graph

    saver = InMemorySaver()
    graph = build_react_graph(checkpointer=saver)
    graph.invoke({"messages": [("user", "计算 2+3")]}, {"configurable": {"thread_id": "odd"},
                                                       "metadata": {"graph": "../../elsewhere"}})
    graph.invoke({"messages": [("user", "计算 2+3")]}, {"configurable": {"thread_id": "older"}})  # no name recorded
    assert session_graph(saver, "odd") is None and session_graph(saver, "older") == "react"
    assert session_graph(saver, "never-asked") is None
