"""Real provider path: the real langchain-openai client against a local OpenAI-compatible server.

Every test scripts the server's replies, runs the agent (Python API or the `reactgraph` command) with
`openai:test-model`, and checks what the server received: tool schemas, tool results, stop words,
the reflection request, retries. No network and no real LLM.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph.graph import Context, ModelConfigError, build_react_graph, load_chat_model
from support.cli_env import clean_env, run_in_process
from support.forked_commands import forked_run
from support.local_servers import free_port
from support.provider_server import ProviderServer, Reply, calls, closing_check, error, slow, text, verdict

BUILTIN_TOOLS = ["calculator", "get_time", "get_weather", "search", "rag_search", "http_get"]
SECRET = "sk-test-SECRET123"
MODEL = "openai:test-model"


@pytest.fixture
def provider(monkeypatch):
    """Points `openai:` models at a server; one retry and a short timeout keep failing tests fast."""

    def use(server: ProviderServer | str, retries: int = 1, timeout: float = 10, node_retries: int = 0) -> None:
        for name in [n for n in os.environ if n.startswith("REACTGRAPH_")]:
            monkeypatch.delenv(name)
        monkeypatch.setenv("OPENAI_BASE_URL", server if isinstance(server, str) else server.openai_url)
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        monkeypatch.setenv("REACTGRAPH_MODEL_RETRIES", str(retries))
        monkeypatch.setenv("REACTGRAPH_MODEL_TIMEOUT", str(timeout))
        # The client's own retries alone, unless a test asks for the graph's RetryPolicy on top (see model_retry).
        monkeypatch.setenv("REACTGRAPH_NODE_RETRIES", str(node_retries))
        monkeypatch.setenv("REACTGRAPH_NODE_RETRY_DELAY", "0.01")

    return use


def ask(question: str, checkpointer=None, **context):
    """A ReAct run on the server's script; without the closing self-check unless asked (`closing_check=True`):
    these tests script the calls they are about."""
    context.setdefault("closing_check", False)
    graph = build_react_graph(checkpointer=checkpointer)
    config = {"configurable": {"thread_id": "t1"}}
    return graph.invoke({"messages": [HumanMessage(question)]}, config=config,
                        context=Context(model=MODEL, **context))


def reactgraph(*args: str, server: ProviderServer | str, retries: int = 1) -> subprocess.CompletedProcess:
    env = clean_env()
    env.update(OPENAI_API_KEY=SECRET, REACTGRAPH_MODEL_RETRIES=str(retries), REACTGRAPH_NODE_RETRIES="0",
               OPENAI_BASE_URL=server if isinstance(server, str) else server.openai_url)
    return forked_run(["ask", *args, "--model", MODEL], env, timeout=120)


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture):
    """`reactgraph ask ARGS --model MODEL` in this process (support.cli_env.run_in_process) against `server`."""

    def run(*args: str, server: ProviderServer | str, retries: int = 1) -> subprocess.CompletedProcess:
        base_url = server if isinstance(server, str) else server.openai_url
        return run_in_process(monkeypatch, capfd, ["ask", *args, "--model", MODEL], OPENAI_API_KEY=SECRET,
                              REACTGRAPH_MODEL_RETRIES=str(retries), REACTGRAPH_NODE_RETRIES="0",
                              OPENAI_BASE_URL=base_url)

    return run


def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there


# --- tool calling ------------------------------------------------------------------------------------------

def test_parallel_tool_calls_reflection_and_the_answer_travel_through_the_real_client(provider):
    with ProviderServer(calls(("get_weather", {"city": "北京"}), ("get_weather", {"city": "上海"}),
                            content="Need both cities."),
                      verdict(True, note="Both temperatures are known."),
                      text("上海更热：12°C，北京 3°C。")) as server:
        provider(server)
        result = ask("北京和上海哪个更热？")
    assert (result["status"], result["final_answer"]) == ("answered", "上海更热：12°C，北京 3°C。")
    acts = [s for s in result["steps"] if s["node"] == "act"]
    assert [(s["action"], s["action_input"], s["status"]) for s in acts] == [
        ("get_weather", {"city": "北京"}, "ok"), ("get_weather", {"city": "上海"}, "ok")]
    assert acts[0]["thought"] == "Need both cities." and acts[0]["tokens"] > 0

    think, reflect, finalize = server.requests
    assert server.tool_names(0) == BUILTIN_TOOLS and think["model"] == "test-model" and "stop" not in think
    assert think["tools"][2]["function"]["parameters"]["required"] == ["city"]
    assert server.roles(0) == ["system", "user"]
    # the reflection asks for a ReflectionVerdict as structured output, over the tool results
    assert reflect["response_format"]["type"] == "json_schema" and "tools" not in reflect
    assert reflect["response_format"]["json_schema"]["name"] == "ReflectionVerdict"
    assert "enough_information" in reflect["response_format"]["json_schema"]["schema"]["properties"]
    tool_results = [m for m in reflect["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_results] == ["call_1_0", "call_1_1"]
    assert '"city":"上海"' in tool_results[1]["content"]
    # enough information: finalize writes the answer without tools
    assert "tools" not in finalize and "sufficient to answer" in finalize["messages"][0]["content"]
    assert result["reflection"]["note"] == "Both temperatures are known."


def test_tool_results_go_back_to_the_model_under_the_right_call_ids(provider):
    with ProviderServer(calls(("calculator", {"expression": "(15+27)*3"}), content="Compute it."),
                      verdict(False, note="Check the result."), text("126")) as server:
        provider(server)
        result = ask("(15+27)*3?")
    assert result["final_answer"] == "126" and result["iteration"] == 2
    follow_up = server.requests[2]["messages"]
    assert [m["role"] for m in follow_up] == ["system", "user", "assistant", "tool"]
    # The verdict's note reaches think as data: a notes block opening the question, not the system prompt.
    assert follow_up[1]["content"].startswith("<notes>") and "Reflection: Check the result." in follow_up[1]["content"]
    assert follow_up[1]["content"].endswith("</notes>\n\n(15+27)*3?") and "Check the" not in follow_up[0]["content"]
    assert follow_up[2]["tool_calls"][0]["id"] == "call_1_0" == follow_up[3]["tool_call_id"]
    assert json.loads(follow_up[2]["tool_calls"][0]["function"]["arguments"]) == {"expression": "(15+27)*3"}
    assert follow_up[3]["content"].startswith('<tool_output tool="calculator">\n')
    assert json.loads(follow_up[3]["content"].split("\n")[1])["result"] == 126
    assert server.tool_names(2) == BUILTIN_TOOLS


def test_malformed_tool_arguments_become_an_observation_the_model_can_fix(provider):
    with ProviderServer(calls(("calculator", '{"expression": "2+'), content="Add."),
                      calls(("calculator", {"expression": "2+2"})), text("4")) as server:
        provider(server)
        result = ask("2+2?", reflection="rules")
    acts = [s for s in result["steps"] if s["node"] == "act"]
    assert [s["status"] for s in acts] == ["invalid_args", "ok"] and result["final_answer"] == "4"
    told = next(m for m in server.requests[1]["messages"] if m["role"] == "tool")
    assert told["tool_call_id"] == "call_1_0" and "Invalid arguments for calculator" in told["content"]
    # The malformed call goes back as valid JSON (empty arguments, its error in the tool message): a server such as
    # llama.cpp's answers every later request with a 500 when the model's broken arguments are sent back as they came.
    for request in server.requests[1:]:
        sent = [c for m in request["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        assert all(isinstance(json.loads(c["function"]["arguments"]), dict) for c in sent), sent
    assert next(c for m in server.requests[1]["messages"] if m["role"] == "assistant"
                for c in m.get("tool_calls") or [])["function"]["arguments"] == "{}"


@pytest.mark.parametrize(("reply", "held"), [
    (Reply(empty=True), "held no choices (an empty completion)"),
    (Reply(no_message=True), "held a choice without a message"),
], ids=["no-choice", "choice-without-message"])
def test_a_completion_with_nothing_to_read_ends_the_run_with_one_line_naming_the_server(provider, reply, held):
    with ProviderServer(reply) as server:
        provider(server)
        result = ask("2+2?", reflection="rules")
    assert result["status"] == "failed"
    assert result["final_answer"] == f"The model call failed: EmptyReply: the reply from {server.openai_url} {held}"


def test_denied_tools_are_not_offered_to_the_provider(provider):
    with ProviderServer(text("Hello.")) as server:
        provider(server)
        ask("hi", denied_tools=["network", "search"])
    assert server.tool_names(0) == ["calculator", "get_time", "get_weather", "rag_search"]


# --- the text protocol -------------------------------------------------------------------------------------

def test_text_protocol_sends_stop_words_no_tools_and_observations_as_text(provider):
    with ProviderServer(text('Thought: Add them.\nAction: calculator\nAction Input: {"expression": "2+3"}\n'
                           "Observation: 7 (made up)"),
                      text("Thought: I can answer now.\nFinal Answer: 2 + 3 = 5")) as server:
        provider(server)
        result = ask("2+3?", protocol="text")  # reflection "llm" falls back to rules: no structured request
    assert (result["status"], result["final_answer"]) == ("answered", "2 + 3 = 5")
    assert [(s["node"], s["action"], s["status"]) for s in result["steps"]] == [
        ("act", "calculator", "ok"), ("reflect", None, "reflection"), ("finalize", None, "answered")]
    first, second = server.requests
    assert first["stop"] == second["stop"] == ["Observation:"] and "tools" not in first
    system = first["messages"][0]["content"]
    assert all(f"- {name}:" in system for name in BUILTIN_TOOLS) and '"required": ["city"]' in system
    assert server.roles(1) == ["system", "user", "assistant", "user"]
    replayed, observed = second["messages"][2]["content"], second["messages"][3]["content"]
    assert replayed == 'Thought: Add them.\nAction: calculator\nAction Input: {"expression": "2+3"}'
    assert observed.startswith('Observation: <tool_output tool="calculator">\n{') and '"result":5' in observed


def test_text_protocol_copes_with_a_server_that_ignores_stop_and_with_chatter(provider):
    with ProviderServer(text("Sure! Let me think about it."),
                      text("Thought: search\nAction: search\nAction Input: LangGraph\nObservation: invented\n"
                           "Final Answer: invented", ignore_stop=True),
                      text("Final Answer: LangGraph builds agents as graphs.")) as server:
        provider(server)
        result = ask("What is LangGraph?", protocol="text", reflection="rules")
    assert [(s["node"], s["status"]) for s in result["steps"]][:2] == [("think", "format_error"), ("act", "ok")]
    assert result["steps"][1]["action_input"] == {"query": "LangGraph"}
    assert result["final_answer"] == "LangGraph builds agents as graphs." and result["iteration"] == 3
    correction = server.requests[1]["messages"][-1]["content"]
    assert correction.startswith("Observation: Invalid format")
    assert "invented" not in server.requests[2]["messages"][-1]["content"]


# --- streaming ---------------------------------------------------------------------------------------------

async def test_stream_mode_messages_yields_the_providers_tokens_and_counts_them(provider):
    with ProviderServer(calls(("get_time", {"timezone": "Tokyo"}), content="Check the clock."),
                      verdict(True, note="Time known."), text("It is late evening in Tokyo.")) as server:
        provider(server)
        graph = build_react_graph(checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": "t1"}}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            chunks = [(chunk, meta["langgraph_node"]) async for chunk, meta in graph.astream(
                {"messages": [HumanMessage("Tokyo time?")]}, config, context=Context(model=MODEL, closing_check=False),
                stream_mode="messages")]
        result = (await graph.aget_state(config)).values
    assert [str(w.message) for w in caught] == []  # no pydantic serializer warning, nor any other
    think, reflect, finalize = server.requests
    # the free-text calls stream and ask for the usage chunk; the structured verdict is one plain request
    assert think["stream"] is finalize["stream"] is True and not reflect.get("stream")
    assert think["stream_options"] == finalize["stream_options"] == {"include_usage": True}
    finalize_tokens = [c.content for c, node in chunks if node == "finalize" and c.content]
    assert "".join(finalize_tokens) == "It is late evening in Tokyo." and len(finalize_tokens) >= 5
    streamed_call = [c for c, node in chunks if node == "think" and getattr(c, "tool_call_chunks", None)]
    assert streamed_call and streamed_call[0].tool_call_chunks[0]["name"] == "get_time"
    assert "reflect" not in {node for _, node in chunks}  # the verdict's JSON is not a message to show
    # the step records carry exactly the usage the server reported
    assert sum(s["tokens"] for s in result["steps"]) == sum(u["total_tokens"] for u in server.usage_sent) > 0
    assert len(server.usage_sent) == 3 and all(s["tokens"] > 0 for s in result["steps"])


def test_a_server_that_rejects_stream_options_can_be_told_not_to_get_them(provider, monkeypatch):
    with ProviderServer(text("Fine.")) as server:
        provider(server)
        monkeypatch.setenv("REACTGRAPH_STREAM_USAGE", "0")
        graph = build_react_graph()
        list(graph.stream({"messages": [HumanMessage("hi")]}, context=Context(model=MODEL, reflection="off"),
                          stream_mode="messages"))
    assert server.requests[0]["stream"] is True and "stream_options" not in server.requests[0]


# --- provider failures -------------------------------------------------------------------------------------

def test_a_rate_limit_is_retried_and_the_run_goes_on(provider):
    with ProviderServer(error(429, "slow down"), text("Fine.")) as server:
        provider(server, retries=2)
        result = ask("hi")
    assert (result["status"], result["final_answer"]) == ("answered", "Fine.") and len(server.requests) == 2


def test_a_persistent_server_error_fails_the_run_with_one_line(provider):
    with ProviderServer(*[error(500, "upstream exploded")] * 3) as server:
        provider(server, retries=2)
        result = ask("hi")
    assert result["status"] == "failed" and len(server.requests) == 3
    assert result["final_answer"] == (f"model provider error: 500 Internal Server Error from {server.openai_url}: "
                                      "upstream exploded (after 2 retries)")
    assert [(s["node"], s["status"]) for s in result["steps"]] == [("think", "model_error"), ("finalize", "failed")]


def test_an_outage_longer_than_the_clients_retries_is_survived_by_the_nodes_retry_policy(provider):
    with ProviderServer(*[error(503, "overloaded")] * 3, text("Fine.")) as server:
        provider(server, retries=1, node_retries=1)
        result = ask("hi")
    assert (result["status"], result["final_answer"]) == ("answered", "Fine.") and len(server.requests) == 4


def test_an_outage_longer_than_every_retry_fails_with_one_line_that_counts_them(provider):
    with ProviderServer(*[error(500, "upstream exploded")] * 4) as server:
        provider(server, retries=1, node_retries=1)
        result = ask("hi")
    assert result["status"] == "failed" and len(server.requests) == 4
    assert result["final_answer"] == (f"model provider error: 500 Internal Server Error from {server.openai_url}: "
                                      "upstream exploded (after 1 retry) (gave up after 2 attempts)")


def test_a_refused_connection_fails_the_run_instead_of_crashing(provider):
    url = closed_port_url()
    provider(url, retries=0)
    result = ask("hi")
    assert result["status"] == "failed" and "\n" not in result["final_answer"]
    assert result["final_answer"] == f"model provider error: cannot connect to {url} (Connection refused)"


def test_a_provider_that_never_answers_times_out(provider):
    with ProviderServer(slow(3)) as server:
        provider(server, retries=0, timeout=0.3)
        result = ask("hi")
    assert result["status"] == "failed"
    assert result["final_answer"] == f"model provider error: no reply from {server.openai_url} within 0.3s"


def test_the_cli_reports_a_failing_provider_in_one_line_and_exits_1(run_cli):
    with ProviderServer(*[error(500, "upstream exploded")] * 2) as server:
        done = run_cli("hi", "--json", "--store", "memory", server=server)
    assert done.returncode == 1 and done.stderr == ""
    payload = json.loads(done.stdout)
    assert payload["status"] == "failed" and payload["answer"].startswith("model provider error: 500")
    assert "\n" not in payload["answer"] and "(after 1 retry)" in payload["answer"]


def test_bad_retry_settings_and_missing_providers_are_one_line_config_errors(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("REACTGRAPH_MODEL_RETRIES", "many")
    with pytest.raises(ModelConfigError, match="REACTGRAPH_MODEL_RETRIES must be a non-negative int"):
        load_chat_model(MODEL)
    monkeypatch.delenv("REACTGRAPH_MODEL_RETRIES")
    assert load_chat_model(MODEL, retries=0, timeout=5).max_retries == 0
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setitem(sys.modules, "langchain_anthropic", None)  # as on an install without the extra
    with pytest.raises(ModelConfigError, match="pip install langchain-anthropic"):
        load_chat_model("anthropic:claude-sonnet-4-5")


# --- the command line, end to end ----------------------------------------------------------------------------

def test_the_cli_runs_both_protocols_against_the_provider(run_cli):
    with ProviderServer(calls(("calculator", {"expression": "6*7"})), text("42")) as server:
        done = reactgraph("6*7?", "--json", "--store", "memory", "--reflection", "rules", server=server)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["answer"] == "42" and server.tool_names(0) == BUILTIN_TOOLS
    with ProviderServer(text('Thought: multiply\nAction: calculator\nAction Input: "6*7"'),
                      text("Final Answer: 42")) as server:  # the installed script ran above: this one in process
        done = run_cli("6*7?", "--protocol", "text", "--store", "memory", server=server)
    assert done.returncode == 0, done.stderr
    assert "Action: calculator" in done.stdout and "42" in done.stdout
    assert server.requests[0]["stop"] == ["Observation:"] and "tools" not in server.requests[0]


def test_the_api_key_never_appears_in_output_logs_or_saved_state(tmp_path, run_cli):
    store = tmp_path / "sessions.db"
    with ProviderServer(calls(("search", {"query": "LangGraph"})), verdict(True), text("A graph library."),
                      closing_check(["what LangGraph is"]),
                      error(401, f"Incorrect API key provided: {SECRET}")) as server:
        done = run_cli("What is LangGraph?", "--json", "--debug", "--session", "s1",
                       "--store", f"sqlite:///{store}", server=server)
        failed = run_cli("again", "--json", "--session", "s1", "--store", f"sqlite:///{store}", server=server)
    assert done.returncode == 0, done.stderr
    assert all(h["authorization"] == f"Bearer {SECRET}" for h in server.headers)  # it was used…
    assert failed.returncode == 1 and "Incorrect API key provided: ***" in json.loads(failed.stdout)["answer"]
    saved = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert saved and b"A graph library." in saved  # …and the state really was saved
    for shown in (done.stdout, done.stderr, failed.stdout, failed.stderr):
        assert SECRET not in shown
    assert SECRET.encode() not in saved


def test_the_api_key_stays_out_of_checkpoints_from_the_python_api(provider):
    saver = InMemorySaver()
    with ProviderServer(calls(("get_time", {})), verdict(True), text("Noon.")) as server:
        provider(server)
        ask("time?", checkpointer=saver)
    dumped = repr(saver.storage) + repr(saver.writes) + repr(saver.blobs)
    assert "Noon." in dumped and SECRET not in dumped


def test_the_cli_shows_streamed_model_tokens_as_they_arrive(run_cli):
    with ProviderServer(text("Forty two is the answer you were looking for.")) as server:
        done = run_cli("what is the answer?", "--store", "memory", "--reflection", "off", server=server)
    assert done.returncode == 0, done.stderr
    assert server.requests[0].get("stream") is True  # the CLI asked the provider to stream
    streamed = next(line for line in done.stdout.splitlines() if line.startswith("    (think) "))
    assert "Forty two is the answer" in streamed
    assert "Final answer · answered" in done.stdout


def test_a_streamed_cli_run_shows_the_verdicts_note_counts_tokens_and_writes_nothing_on_stderr():
    with ProviderServer(calls(("calculator", {"expression": "6*7"}), content="Multiply."),
                      verdict(True, note="The product is known."), text("6*7 = 42"),
                      closing_check(["6*7"])) as server:  # the verdict named no parts: the self-check does
        done = reactgraph("6*7?", "--store", "memory", server=server)
    assert done.returncode == 0 and done.stderr == ""  # no library warning mid-line
    assert server.requests[0]["stream_options"] == {"include_usage": True}
    assert "(reflect)" not in done.stdout and '{"enough_information"' not in done.stdout
    assert "    Reflection: enough_information — The product is known." in done.stdout.splitlines()
    title = next(line for line in done.stdout.splitlines() if "Final answer · answered" in line)
    tokens = int(title.split("~")[1].split(" tokens")[0])
    assert tokens == sum(u["total_tokens"] for u in server.usage_sent) > 0


def test_a_refusal_ends_the_run_with_what_the_model_said_asked_once(provider):
    with ProviderServer(Reply(refusal="I can't help with that.\nSorry.")) as server:
        provider(server)
        result = ask("2+2?", reflection="rules")
        asked = len(server.requests)
    assert result["status"] == "failed" and asked == 1  # no nudge, no retry: the refusal is the model's answer
    assert result["final_answer"] == ("The model call failed: ModelRefusal: the model declined to answer: "
                                      "I can't help with that. Sorry.")
    assert result["usage"]["input_tokens"] > 0  # what the refused request cost is counted
