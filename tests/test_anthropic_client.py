"""Real provider path: the real langchain-anthropic client against a local Anthropic Messages API server.

Every test scripts the server's replies, runs the agent (Python API or the `reactgraph` command) with
`anthropic:test-model`, and checks what the server received: the system prompt, tool definitions, tool_use /
tool_result blocks, the reflection's forced tool, the closing call's tool_choice, retries. The server refuses
requests the real API refuses (see tests/support/provider_anthropic.py), so a test also fails when the client sends
one. No network and no real LLM.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph.graph import Context, ModelConfigError, build_react_graph, load_chat_model
from reactgraph.models.loader import describe_model_error, without_tool_use
from reactgraph.tools import ToolSession, default_gateway
from support.cli_env import clean_env, run_in_process
from support.forked_commands import forked_run
from support.local_servers import free_port
from support.provider_server import ProviderServer, calls, closing_check, error, slow, text, verdict

# Found, not imported: the Anthropic SDK's import (≈ 1.6 s of CPU, its thousands of pydantic types) is left to the
# worker that runs these tests, not paid by every worker that collects them.
if importlib.util.find_spec("langchain_anthropic") is None:
    pytest.skip("the anthropic extra is not installed", allow_module_level=True)

BUILTIN_TOOLS = ["calculator", "get_time", "get_weather", "search", "rag_search", "http_get"]
SECRET = "sk-ant-test-SECRET123"
MODEL = "anthropic:test-model"
NO_TOOL_USE = {"type": "none"}


@pytest.fixture
def provider(monkeypatch):
    """Points `anthropic:` models at a server; one retry and a short timeout keep failing tests fast."""

    def use(server: ProviderServer | str, retries: int = 1, timeout: float = 10,
            node_retries: int = 0) -> None:
        for name in [n for n in os.environ if n.startswith(("REACTGRAPH_", "ANTHROPIC_")) and n != "REACTGRAPH_HOME"]:
            monkeypatch.delenv(name)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server if isinstance(server, str) else server.anthropic_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
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
    env.update(ANTHROPIC_API_KEY=SECRET, REACTGRAPH_MODEL_RETRIES=str(retries), REACTGRAPH_NODE_RETRIES="0",
               ANTHROPIC_BASE_URL=server if isinstance(server, str) else server.anthropic_url)
    return forked_run(["ask", *args, "--model", MODEL], env, timeout=120)


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture):
    """`reactgraph ask ARGS --model MODEL` in this process (support.cli_env.run_in_process) against `server`."""

    def run(*args: str, server: ProviderServer | str, retries: int = 1) -> subprocess.CompletedProcess:
        base_url = server if isinstance(server, str) else server.anthropic_url
        return run_in_process(monkeypatch, capfd, ["ask", *args, "--model", MODEL], ANTHROPIC_API_KEY=SECRET,
                              REACTGRAPH_MODEL_RETRIES=str(retries), REACTGRAPH_NODE_RETRIES="0",
                              ANTHROPIC_BASE_URL=base_url)

    return run


def offered(deny=()) -> list[str]:
    """The tools the default gateway offers a session, in order: the built-ins (and any added later)."""
    names = [s["function"]["name"] for s in default_gateway().schemas(ToolSession.of("t", deny=deny))]
    assert deny or set(BUILTIN_TOOLS) <= set(names)
    return names


def tool(request: dict, name: str) -> dict:
    return next(t for t in request["tools"] if t["name"] == name)


def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there


# --- tool calling ------------------------------------------------------------------------------------------

def test_parallel_tool_use_reflection_and_the_answer_travel_through_the_real_client(provider):
    with ProviderServer(calls(("get_weather", {"city": "北京"}), ("get_weather", {"city": "上海"}),
                               content="Need both cities."),
                         verdict(True, note="Both temperatures are known."),
                         text("上海更热：12°C，北京 3°C。")) as server:
        provider(server)
        result = ask("北京和上海哪个更热？")
    assert server.rejections == []
    assert (result["status"], result["final_answer"]) == ("answered", "上海更热：12°C，北京 3°C。")
    acts = [s for s in result["steps"] if s["node"] == "act"]
    assert [(s["action"], s["action_input"], s["status"]) for s in acts] == [
        ("get_weather", {"city": "北京"}, "ok"), ("get_weather", {"city": "上海"}, "ok")]
    assert acts[0]["thought"] == "Need both cities." and acts[0]["tokens"] > 0

    think, reflect, finalize = server.requests
    assert server.api_keys() == [SECRET] * 3 and all(h["anthropic-version"] for h in server.headers)
    # the system prompt is the top-level `system` field; messages hold only user/assistant turns
    assert think["model"] == "test-model" and think["max_tokens"] > 0 and "stop_sequences" not in think
    assert think["system"].startswith("You are a careful assistant") and server.roles(0) == ["user"]
    # the five built-in tools as Anthropic tools: name, description, input_schema (JSON Schema)
    assert server.tool_names(0) == offered() and "tool_choice" not in think
    weather = tool(think, "get_weather")
    assert weather["input_schema"]["type"] == "object" and weather["input_schema"]["required"] == ["city"]
    assert weather["description"] and "function" not in weather and "parameters" not in weather
    # the reflection forces the ReflectionVerdict tool, over the tool_use / tool_result blocks
    assert reflect["tool_choice"] == {"type": "tool", "name": "ReflectionVerdict"}
    assert server.tool_names(1) == ["ReflectionVerdict"]
    assert "enough_information" in reflect["tools"][0]["input_schema"]["properties"]
    assert reflect["system"].startswith("You are reviewing an agent's progress")
    assert server.roles(1) == ["user", "assistant", "user"]
    uses, results = server.blocks(1, "tool_use"), server.blocks(1, "tool_result")
    assert [(u["id"], u["name"], u["input"]) for u in uses] == [
        ("toolu_1_0", "get_weather", {"city": "北京"}), ("toolu_1_1", "get_weather", {"city": "上海"})]
    assert [r["tool_use_id"] for r in results] == ["toolu_1_0", "toolu_1_1"]
    assert '"city":"上海"' in results[1]["content"] and results[1]["is_error"] is False
    assert server.blocks(1, "text")[0]["text"] == "Need both cities."
    # enough information: finalize may not call tools, but the tools stay defined (the API requires it)
    assert finalize["tool_choice"] == NO_TOOL_USE and server.tool_names(2) == offered()
    assert "sufficient to answer" in finalize["system"] and len(server.blocks(2, "tool_result")) == 2
    assert result["reflection"]["note"] == "Both temperatures are known."


def test_tool_results_go_back_to_the_model_under_the_right_tool_use_ids(provider):
    with ProviderServer(calls(("calculator", {"expression": "(15+27)*3"}), content="Compute it."),
                         verdict(False, note="Check the result."), text("126")) as server:
        provider(server)
        result = ask("(15+27)*3?")
    assert server.rejections == []
    assert result["final_answer"] == "126" and result["iteration"] == 2
    follow_up = server.requests[2]
    assert server.roles(2) == ["user", "assistant", "user"] and server.tool_names(2) == offered()
    (use,), (told,) = server.blocks(2, "tool_use"), server.blocks(2, "tool_result")
    assert use["id"] == "toolu_1_0" == told["tool_use_id"] and use["input"] == {"expression": "(15+27)*3"}
    assert told["content"].startswith('<tool_output tool="calculator">\n')
    assert json.loads(told["content"].split("\n")[1])["result"] == 126
    # The verdict's note reaches think as data: in the first user turn (notes, then the question), not the system.
    opening = json.dumps(follow_up["messages"][0]["content"], ensure_ascii=False)
    assert "<notes>" in opening and "Reflection: Check the result." in opening
    assert "Check the result" not in follow_up["system"]


def test_invalid_tool_input_is_returned_as_an_error_tool_result(provider):
    with ProviderServer(calls(("calculator", {"expr": "2+2"}), content="Add."),
                         calls(("calculator", {"expression": "2+2"})), text("4")) as server:
        provider(server)
        result = ask("2+2?", reflection="rules")
    assert server.rejections == []
    acts = [s for s in result["steps"] if s["node"] == "act"]
    assert [s["status"] for s in acts] == ["invalid_args", "ok"] and result["final_answer"] == "4"
    (told,) = server.blocks(1, "tool_result")
    assert told["tool_use_id"] == "toolu_1_0" and told["is_error"] is True
    assert "Invalid arguments for calculator" in told["content"]


def test_denied_tools_are_not_offered_to_the_provider(provider):
    with ProviderServer(text("Hello.")) as server:
        provider(server)
        ask("hi", denied_tools=["network", "search"])
    names = server.tool_names(0)
    assert names == offered(deny=["network", "search"]) and "search" not in names and "http_get" not in names
    assert {"calculator", "get_time", "get_weather"} <= set(names)


# --- the closing call: tool history needs tools defined ------------------------------------------------------

def test_the_server_refuses_tool_history_without_tools_like_the_real_api(provider):
    """The rule finalize has to respect, shown on the bare client: tools defined + tool_choice none passes."""
    with ProviderServer(text("Noon.")) as server:  # a refused request uses no scripted reply
        provider(server, retries=0)
        model = load_chat_model(MODEL)
        history = [HumanMessage("time?"),
                   AIMessage("", tool_calls=[{"name": "get_time", "args": {}, "id": "toolu_9", "type": "tool_call"}]),
                   ToolMessage('{"time": "12:00"}', tool_call_id="toolu_9")]
        with pytest.raises(Exception) as refused:
            model.invoke(history)
        schema = {"type": "function", "function": {"name": "get_time", "description": "Current time.",
                                                   "parameters": {"type": "object", "properties": {}}}}
        reply = without_tool_use(model, [schema]).invoke(history)
    import anthropic

    assert isinstance(refused.value, anthropic.BadRequestError)
    assert describe_model_error(refused.value, model) == (
        f"model provider error: 400 Bad Request from {server.anthropic_url}: Requests which include `tool_use` or "
        "`tool_result` blocks must define tools.")
    assert reply.content == "Noon." and server.requests[1]["tool_choice"] == NO_TOOL_USE
    assert server.rejections == ["Requests which include `tool_use` or `tool_result` blocks must define tools."]


def test_at_the_iteration_limit_finalize_answers_with_tools_defined_but_not_callable(provider):
    with ProviderServer(calls(("search", {"query": "LangGraph"}), content="Look it up."),
                         verdict(False, note="More detail needed."),
                         calls(("search", {"query": "LangGraph"}), content="Will be ignored: tool_choice none.")
                         ) as server:
        provider(server)
        result = ask("What is LangGraph?", max_iterations=1)
    assert server.rejections == [] and len(server.requests) == 3
    closing = server.requests[2]
    assert closing["tool_choice"] == NO_TOOL_USE and server.tool_names(2) == offered()
    assert "The step limit of 1 rounds has been reached." in closing["system"]
    assert (result["status"], result["final_answer"]) == ("limit_reached", "Will be ignored: tool_choice none.")


def test_a_repeated_call_ends_with_a_closing_call_the_api_accepts(provider):
    same = calls(("calculator", {"expression": "6*7"}))
    with ProviderServer(same, same, text("42")) as server:
        provider(server)
        result = ask("6*7?", reflection="rules")
    assert server.rejections == []
    assert (result["status"], result["final_answer"]) == ("limit_reached", "42")  # a repeated call stops the loop
    assert result["reflection"]["repeated_call"] is True
    closing = server.requests[2]
    assert "repeated an earlier one" in closing["system"] and closing["tool_choice"] == NO_TOOL_USE
    assert [r["tool_use_id"] for r in server.blocks(2, "tool_result")] == ["toolu_1_0", "toolu_2_0"]


def test_a_later_question_on_the_same_thread_sends_the_earlier_tool_rounds_validly(provider):
    with ProviderServer(calls(("get_time", {})), verdict(True), text("Noon."),
                         calls(("calculator", {"expression": "1+1"})), verdict(True), text("2")) as server:
        provider(server)
        saver = InMemorySaver()
        first = ask("time?", checkpointer=saver)
        second = ask("1+1?", checkpointer=saver)
    assert server.rejections == [] and (first["final_answer"], second["final_answer"]) == ("Noon.", "2")
    assert server.roles(3) == ["user", "assistant", "user", "assistant", "user"]
    assert [r["tool_use_id"] for r in server.blocks(5, "tool_result")] == ["toolu_1_0", "toolu_4_0"]


# --- the text protocol -------------------------------------------------------------------------------------

def test_text_protocol_sends_stop_sequences_no_tools_and_observations_as_text(provider):
    with ProviderServer(text('Thought: Add them.\nAction: calculator\nAction Input: {"expression": "2+3"}\n'
                              "Observation: 7 (made up)"),
                         text("Thought: I can answer now.\nFinal Answer: 2 + 3 = 5")) as server:
        provider(server)
        result = ask("2+3?", protocol="text")
    assert server.rejections == []
    assert (result["status"], result["final_answer"]) == ("answered", "2 + 3 = 5")
    first, second = server.requests
    assert first["stop_sequences"] == second["stop_sequences"] == ["Observation:"]
    assert "tools" not in first and "tools" not in second
    assert all(f"- {name}:" in first["system"] for name in BUILTIN_TOOLS)
    assert server.roles(1) == ["user", "assistant", "user"]
    assert second["messages"][1]["content"] == ('Thought: Add them.\nAction: calculator\n'
                                                'Action Input: {"expression": "2+3"}')
    assert second["messages"][2]["content"] == ('Observation: <tool_output tool="calculator">\n'
                                                '{"expression":"2+3","result":5}\n</tool_output>')


# --- streaming ---------------------------------------------------------------------------------------------

async def test_stream_mode_messages_yields_the_providers_tokens(provider):
    with ProviderServer(calls(("get_time", {"timezone": "Tokyo"}), content="Check the clock."),
                         verdict(True, note="Time known."), text("It is late evening in Tokyo.")) as server:
        provider(server)
        graph = build_react_graph()
        chunks = [(chunk, meta["langgraph_node"]) async for chunk, meta in graph.astream(
            {"messages": [HumanMessage("Tokyo time?")]}, context=Context(model=MODEL, closing_check=False),
            stream_mode="messages")]
    assert server.rejections == [] and len(server.requests) == 3
    think, reflect, finalize = server.requests
    # the structured verdict is one plain request: its tokens are JSON, nothing to show (models/gateway.py)
    assert think["stream"] is finalize["stream"] is True and not reflect.get("stream")
    assert "reflect" not in {node for _, node in chunks}
    finalize_tokens = [t for c, node in chunks if node == "finalize" for t in _texts(c)]
    assert "".join(finalize_tokens) == "It is late evening in Tokyo." and len(finalize_tokens) >= 5
    streamed_call = [c for c, node in chunks if node == "think" and getattr(c, "tool_call_chunks", None)]
    assert streamed_call and streamed_call[0].tool_call_chunks[0]["name"] == "get_time"
    args = "".join(tc["args"] or "" for c in streamed_call for tc in c.tool_call_chunks)
    assert json.loads(args) == {"timezone": "Tokyo"}


def _texts(chunk) -> list[str]:
    content = chunk.content
    if isinstance(content, str):
        return [content] if content else []
    return [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text" and b.get("text")]


# --- provider failures -------------------------------------------------------------------------------------

@pytest.mark.parametrize("status", [429, 529])
def test_a_rate_limit_or_overload_is_retried_and_the_run_goes_on(provider, status):
    with ProviderServer(error(status, "slow down"), text("Fine.")) as server:
        provider(server, retries=2)
        result = ask("hi")
    assert (result["status"], result["final_answer"]) == ("answered", "Fine.") and len(server.requests) == 2
    assert [h["x-stainless-retry-count"] for h in server.headers] == ["0", "1"]


@pytest.mark.parametrize(("status", "phrase"), [(500, "Internal Server Error"), (529, "Overloaded")])
def test_a_persistent_server_error_fails_the_run_with_one_line(provider, status, phrase):
    with ProviderServer(*[error(status, "upstream exploded")] * 3) as server:
        provider(server, retries=2)
        result = ask("hi")
    assert result["status"] == "failed" and len(server.requests) == 3
    assert result["final_answer"] == (f"model provider error: {status} {phrase} from {server.anthropic_url}: "
                                      "upstream exploded (after 2 retries)")
    assert [(s["node"], s["status"]) for s in result["steps"]] == [("think", "model_error"), ("finalize", "failed")]


def test_an_outage_longer_than_the_clients_retries_is_survived_by_the_nodes_retry_policy(provider):
    with ProviderServer(*[error(529, "overloaded")] * 3, text("Fine.")) as server:
        provider(server, retries=1, node_retries=1)
        result = ask("hi")
    assert (result["status"], result["final_answer"]) == ("answered", "Fine.") and len(server.requests) == 4
    # Each run of the node is one call of the client, which retries once itself.
    assert [h["x-stainless-retry-count"] for h in server.headers] == ["0", "1", "0", "1"]


def test_an_outage_longer_than_every_retry_fails_with_one_line_that_counts_them(provider):
    with ProviderServer(*[error(500, "upstream exploded")] * 4) as server:
        provider(server, retries=1, node_retries=1)
        result = ask("hi")
    assert result["status"] == "failed" and len(server.requests) == 4
    assert result["final_answer"] == (f"model provider error: 500 Internal Server Error from {server.anthropic_url}: "
                                      "upstream exploded (after 1 retry) (gave up after 2 attempts)")


def test_a_timeout_at_temperature_0_is_sent_twice_at_most_and_a_bad_request_500_once(provider):
    """Anthropic's SDK retries timeouts and 5xx itself; under the bounded transports a timeout is final for it
    (the node sends it once more) and a 500 that says the request is bad is not sent again."""
    with ProviderServer(*[slow(3)] * 8) as server:
        provider(server, retries=3, timeout=0.3, node_retries=3)
        result = ask("hi")
    assert result["status"] == "failed" and len(server.requests) == 2
    with ProviderServer(*[error(500, "Invalid request: 'messages' must be a non-empty list")] * 8) as server:
        provider(server, retries=3, node_retries=3)
        result = ask("hi")
    assert result["status"] == "failed" and len(server.requests) == 1


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
    assert result["final_answer"] == f"model provider error: no reply from {server.anthropic_url} within 0.3s"


def test_the_cli_reports_a_failing_provider_in_one_line_and_exits_1(run_cli):
    with ProviderServer(*[error(500, "upstream exploded")] * 2) as server:
        done = run_cli("hi", "--json", "--store", "memory", server=server)
    assert done.returncode == 1 and done.stderr == ""
    payload = json.loads(done.stdout)
    assert payload["status"] == "failed" and payload["answer"].startswith("model provider error: 500")
    assert "\n" not in payload["answer"] and "(after 1 retry)" in payload["answer"]
    assert SECRET not in done.stdout


def test_a_refused_connection_from_the_cli_is_one_line_and_exit_1(run_cli):
    done = run_cli("hi", "--json", "--store", "memory", server=closed_port_url(), retries=0)
    assert done.returncode == 1 and done.stderr == ""
    payload = json.loads(done.stdout)
    assert payload["status"] == "failed" and "cannot connect to" in payload["answer"]


# --- configuration -----------------------------------------------------------------------------------------

def test_keys_base_url_retries_and_timeout_come_from_the_environment(monkeypatch):
    for name in [n for n in os.environ if n.startswith(("REACTGRAPH_", "ANTHROPIC_")) and n != "REACTGRAPH_HOME"]:
        monkeypatch.delenv(name)
    with pytest.raises(ModelConfigError, match="ANTHROPIC_API_KEY is not set"):
        load_chat_model(MODEL)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # a local server needs no key
    assert load_chat_model(MODEL).anthropic_api_url == "http://127.0.0.1:9"
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("REACTGRAPH_MODEL_RETRIES", "4")
    monkeypatch.setenv("REACTGRAPH_MODEL_TIMEOUT", "7.5")
    model = load_chat_model(MODEL, temperature=0.3)
    assert (model.model, model.temperature, model.max_retries, model.default_request_timeout) == (
        "test-model", 0.3, 4, 7.5)
    assert model.anthropic_api_key.get_secret_value() == SECRET and SECRET not in repr(model)
    assert load_chat_model(MODEL, retries=0, timeout=5).max_retries == 0
    monkeypatch.setenv("REACTGRAPH_MODEL_TIMEOUT", "-1")
    with pytest.raises(ModelConfigError, match="REACTGRAPH_MODEL_TIMEOUT must be a non-negative float"):
        load_chat_model(MODEL)


def test_other_models_still_get_no_tools_for_the_closing_call(monkeypatch):
    pytest.importorskip("langchain_openai")
    from reactgraph.models.offline import OfflineChatModel
    schemas = [{"type": "function", "function": {"name": "x", "parameters": {"type": "object", "properties": {}}}}]
    offline = OfflineChatModel()
    assert without_tool_use(offline, schemas) is offline  # the offline model answers when no tools are bound
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    openai = load_chat_model("openai:test-model")  # OpenAI accepts tool history without tools: unchanged
    assert without_tool_use(openai, schemas) is openai
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    claude = load_chat_model(MODEL)
    bound = without_tool_use(claude, schemas)
    assert bound.kwargs["tool_choice"] == NO_TOOL_USE and [t["name"] for t in bound.kwargs["tools"]] == ["x"]
    assert without_tool_use(claude, []) is claude


# --- the command line, end to end and the API key ------------------------------------------------------------

def test_the_cli_runs_against_the_provider():
    with ProviderServer(calls(("calculator", {"expression": "6*7"})), verdict(True), text("42")) as server:
        done = reactgraph("6*7?", "--json", "--store", "memory", server=server)
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert (payload["answer"], payload["status"], payload["model"]) == ("42", "answered", MODEL)
    assert server.rejections == [] and server.tool_names(0) == offered()
    assert server.requests[1]["tool_choice"] == {"type": "tool", "name": "ReflectionVerdict"}
    assert server.requests[2]["tool_choice"] == NO_TOOL_USE


def test_the_api_key_never_appears_in_output_logs_or_saved_state(tmp_path, run_cli):
    store = tmp_path / "sessions.db"
    with ProviderServer(calls(("search", {"query": "LangGraph"})), verdict(True), text("A graph library."),
                      closing_check(["what LangGraph is"]),
                         error(401, f"invalid x-api-key: {SECRET}")) as server:
        done = run_cli("What is LangGraph?", "--json", "--debug", "--session", "s1",
                       "--store", f"sqlite:///{store}", server=server)
        failed = run_cli("again", "--json", "--session", "s1", "--store", f"sqlite:///{store}", server=server)
    assert done.returncode == 0, done.stderr
    assert server.api_keys() == [SECRET] * 5  # it was used…
    assert failed.returncode == 1
    assert json.loads(failed.stdout)["answer"] == (
        f"model provider error: 401 Unauthorized from {server.anthropic_url}: invalid x-api-key: ***")
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
