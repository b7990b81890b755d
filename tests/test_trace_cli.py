"""`reactgraph trace`: a user without a tracing backend reads how a turn ran, from its checkpoints."""

from __future__ import annotations

import json


def test_the_trace_of_a_turn_with_a_tool_call_in_text_and_json(cli, cli_session):
    assert cli("ask", "What is the weather in Paris?", "--session", cli_session, "--json")[0] == 0
    assert cli("ask", "What is 2+3*4?", "--session", cli_session, "--json")[0] == 0

    code, out, err = cli("trace", "--session", cli_session, "--json")
    assert code == 0, err
    last = json.loads(out)
    assert (last["turn"], last["turns"], last["status"], last["unfinished"]) == (2, 2, "answered", False)
    assert last["question"] == "What is 2+3*4?" and "14" in last["answer"]
    nodes = [node["node"] for node in last["nodes"]]
    assert nodes == ["load_memory", "think", "act", "observe", "reflect", "finalize", "save_memory"]
    starts = [node["start_ms"] for node in last["nodes"]]
    assert starts == sorted(starts) and all(node["duration_ms"] >= 0 for node in last["nodes"])
    think, act = last["nodes"][1], last["nodes"][2]
    assert think["model_calls"][0]["tool_calls"] == ["calculator"] and think["model_calls"][0]["input_tokens"] > 0
    assert [(c["tool"], c["status"]) for c in act["tool_calls"]] == [("calculator", "ok")]
    assert act["tool_calls"][0]["args"] == {"expression": "2 + 3 * 4"} and act["tool_calls"][0]["latency_ms"] >= 0
    assert last["model_calls"] == 2 and last["tool_calls"] == 1 and last["usage"]["tool_calls"] == 1

    code, out, _ = cli("trace", "--session", cli_session, "--turn", "1")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"Turn 1 of 2 · session {cli_session} · answered · ")
    assert lines[1] == "Q: What is the weather in Paris?"
    act_line = next(i for i, line in enumerate(lines) if line.split()[2:3] == ["act"])
    assert lines[act_line + 1].strip().startswith('tool get_weather({"city": "Paris"}) · ok · ')
    assert lines[-1].startswith("Final (answered): Paris:")

    code, _, err = cli("trace", "--session", cli_session, "--turn", "3")
    assert code == 2 and err.strip().splitlines() == [
        f"error: session '{cli_session}' has 2 turn(s); --turn must be 1..2, not 3"]
    code, _, err = cli("trace", "--session", cli_session, "--turn", "0")
    assert code == 2 and "--turn must be 1..2, not 0" in err


def test_an_unknown_session_is_one_line_and_exit_2(cli, cli_session):
    code, out, err = cli("trace", "--session", cli_session)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"error: session '{cli_session}' has no checkpoints in this store"]
