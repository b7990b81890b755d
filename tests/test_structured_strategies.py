"""Structured output on the servers people run, against the local OpenAI-compatible test server playing each
one: llama.cpp's llama-server (json_schema refused with a 400, a tool call forced by the object form ignored, the
string `"required"` honoured), a server that forces nothing (JSON mode only), and one that accepts nothing but
JSON in the text. The closing self-check is read on each, and the strategy that worked is remembered per base URL
and model across processes: a second `reactgraph ask` process pays no refused request."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import HumanMessage

from reactgraph.graph import Context, build_react_graph
from support.cli_env import clean_env
from support.forked_commands import forked_run
from support.provider_server import ProviderServer, Reply, calls, error, text

MODEL = "openai:small-local"
CHECK = {"parts": ["the product"], "missing": []}
GRAMMAR_REFUSED = "error initializing grammar sampler"


def llama_server(body: dict) -> Reply:
    """What llama-server did in the issue: json_schema refused, an object-form tool_choice ignored (a text reply),
    the string "required" honoured."""
    if (body.get("response_format") or {}).get("type") == "json_schema":
        return error(400, GRAMMAR_REFUSED)
    if body.get("tool_choice") == "required":
        return calls(("ClosingCheck", CHECK))
    return text("17 * 23 = 391.")


def json_mode_only(body: dict) -> Reply:
    """A server that applies neither json_schema nor a forced call, but keeps to JSON in JSON mode."""
    if (body.get("response_format") or {}).get("type") == "json_object":
        return text(json.dumps(CHECK))
    return text("17 * 23 = 391.")


def text_only(body: dict) -> Reply:
    """A server that refuses every response format and forced call; the model wraps its JSON in prose."""
    if body.get("response_format"):
        return error(400, "response_format is not supported")
    if body.get("tool_choice") not in (None, "auto"):
        return error(400, "tool_choice is not supported")
    if "JSON" in json.dumps(body["messages"][-1]):
        return text(f"Sure! Here it is:\n```json\n{json.dumps(CHECK)}\n```\nHope that helps.")
    return text("17 * 23 = 391.")


def ask(server: ProviderServer) -> dict:
    """`reactgraph ask --json` in a process of its own (forked: the same as a new `reactgraph` process)."""
    env = clean_env(OPENAI_BASE_URL=server.openai_url, OPENAI_API_KEY="sk-test", REACTGRAPH_MODEL_RETRIES="0",
                    REACTGRAPH_NODE_RETRIES="0")
    done = forked_run(["ask", "--json", "--store", "memory", "--model", MODEL, "What is 17 * 23?"], env, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def kind(body: dict) -> str:
    fmt = (body.get("response_format") or {}).get("type")
    choice = body.get("tool_choice")
    return fmt or (json.dumps(choice) if choice not in (None, "auto") else "tools" if body.get("tools") else "plain")


def test_on_llama_server_the_check_is_read_and_a_second_process_pays_no_refused_request(strategy_record):
    with ProviderServer(then=llama_server) as server:
        first = ask(server)
        first_kinds = [kind(b) for b in server.requests]
        del server.requests[:]
        second = ask(server)
        second_kinds = [kind(b) for b in server.requests]
    assert first["status"] == second["status"] == "answered"
    assert first["coverage"]["by"] == second["coverage"]["by"] == "model"
    assert first_kinds == ["tools", "json_schema", '"required"']  # the answer, the refused check, the forced one
    assert second_kinds == ["tools", '"required"']  # a new process starts with what worked: no refused request
    record = json.loads(strategy_record.read_text())
    assert record["servers"] == {f"{server.openai_url}|small-local": {"strategy": "function_calling",
                                                                       "at": pytest.approx(record["servers"][
                                                                           f"{server.openai_url}|small-local"]["at"])}}


@pytest.mark.parametrize(("server_kind", "used"), [(json_mode_only, "json_object"), (text_only, "json")])
def test_a_server_that_applies_fewer_forms_still_gets_its_check_read_and_remembered(server_kind, used, provider):
    with ProviderServer(then=server_kind) as server:
        provider(server)
        graph = build_react_graph()
        first = graph.invoke({"messages": [HumanMessage("What is 17 * 23?")]},
                             context=Context(model=MODEL, reflection="off"))
        asked_first = len(server.requests)
        second = build_react_graph().invoke({"messages": [HumanMessage("What is 17 * 23?")]},
                                            context=Context(model=MODEL, reflection="off"))
        asked_second = len(server.requests) - asked_first
    assert first["coverage"] == second["coverage"] == {"parts": ["the product"], "missing": [], "by": "model"}
    assert asked_first == 1 + {"json_object": 3, "json": 4}[used]  # each form the server refused or ignored, once
    assert asked_second == 2  # the answer and the check, in the form that worked
    assert kind(server.requests[-1]) == ("json_object" if used == "json_object" else "plain")


@pytest.mark.parametrize("content", [
    {"servers": {"KEY": {"strategy": "rm -rf /", "at": 1}}},  # a value off the allow-list
    {"servers": {"KEY": {"strategy": "json", "at": 1}}, "pad": "x" * 70_000},  # a file over its bound
    {"servers": ["KEY"]}, "not json at all"])
def test_the_record_is_untrusted_and_a_bad_one_is_ignored(content, tmp_path, provider, monkeypatch):
    with ProviderServer(then=llama_server) as server:
        provider(server)
        path = tmp_path / "strategies.json"
        raw = json.dumps(content) if isinstance(content, dict) else content
        path.write_text(raw.replace("KEY", f"{server.openai_url}|small-local"))
        monkeypatch.setenv("REACTGRAPH_STRATEGY_FILE", str(path))
        result = build_react_graph().invoke({"messages": [HumanMessage("What is 17 * 23?")]},
                                            context=Context(model=MODEL, reflection="off"))
    assert result["coverage"]["by"] == "model"
    assert [kind(b) for b in server.requests] == ["tools", "json_schema", '"required"']  # as with no record
    assert json.loads(path.read_text())["servers"][f"{server.openai_url}|small-local"]["strategy"] == \
        "function_calling"  # rewritten whole, the bad entries gone


def test_with_the_record_off_a_process_keeps_what_it_learned_and_writes_nothing(tmp_path, provider, monkeypatch):
    with ProviderServer(then=llama_server) as server:
        provider(server)
        monkeypatch.setenv("REACTGRAPH_STRATEGY_FILE", "off")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
        for _ in range(2):
            build_react_graph().invoke({"messages": [HumanMessage("What is 17 * 23?")]},
                                       context=Context(model=MODEL, reflection="off"))
    assert [kind(b) for b in server.requests].count("json_schema") == 1
    assert not list(tmp_path.iterdir())


def test_a_constrained_reply_the_server_cannot_read_back_is_not_sent_again_and_the_next_form_is_asked(provider):
    def unreadable_grammar(body: dict) -> Reply:  # llama-server, on some replies under a JSON schema
        if (body.get("response_format") or {}).get("type") == "json_schema":
            return error(500, "The model produced output that does not match the expected peg-native format")
        return json_mode_only(body)

    with ProviderServer(then=unreadable_grammar) as server:
        provider(server, retries=2, node_retries=2)
        for _ in range(2):
            result = build_react_graph().invoke({"messages": [HumanMessage("What is 17 * 23?")]},
                                                context=Context(model=MODEL, reflection="off"))
            assert result["coverage"]["by"] == "model"
    # sent once each time (not retried), and not remembered: one reply the server could not read back says nothing
    # about the form, so the next question asks for a JSON schema again
    assert [kind(b) for b in server.requests] == ["tools", "json_schema", '"required"', "json_object"] * 2
