"""MCP servers through the gateway: a local stdio server and a local streamable-HTTP server (tests/mcp_servers/).

One server of each kind serves the whole module (module fixtures; the module runs on one worker, see
ONE_WORKER_MODULES): starting a Python MCP server costs about a second, the budget of the suite is small.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool, StructuredTool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests

from reactgraph.graph import Context, build_react_graph
from reactgraph.nodes.context import InvalidContext
from reactgraph.tools import BreakerConfig, ToolGateway, ToolRegistrationError, ToolSession, default_gateway
from reactgraph.tools.mcp.config import McpConfigError, read_config
from reactgraph.tools.mcp.server import McpServer, McpStartError
from reactgraph.tools.mcp.tools import register
from support.local_servers import free_port
from support.scripted import ScriptedChatModel, call, tool_reply

SERVER = Path(__file__).parent / "mcp_servers" / "toy_server.py"
TOY_TOOLS = {"echo", "add", "fail", "slow", "crash", "picture", "trace_context"}


def stdio(*extra: str, **settings: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(SERVER), "stdio", *extra], **settings}


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def wait_for(predicate, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp")


@pytest.fixture(scope="module")
def gateway(files: Path) -> Iterator[ToolGateway]:
    """The stdio toy server (calls time out after 5 s: a restart fits), plus `slow_short`, its `slow` tool with a
    0.5 s timeout; the breaker opens after 2 failures."""
    gateway = ToolGateway(breaker=BreakerConfig(failure_threshold=2, cooldown_s=600))
    gateway.add_mcp_servers({"mcpServers": {"toy": stdio("--starts", str(files / "starts"), "--events",
                                                         str(files / "events"), timeout_s=5)}})
    gateway.register(dataclasses.replace(gateway.registry.get("slow"), name="slow_short", timeout_s=0.5))
    _shared.append(gateway)
    yield gateway
    _shared.clear()
    gateway.close()


def _served(app_of: str, path: str) -> Iterator[str]:
    """The toy server's `app_of` ASGI app served by uvicorn on a thread of this process (no second interpreter
    to start: `mcp` is imported here already); yields its URL."""
    import uvicorn

    from mcp_servers.toy_server import build

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(getattr(build(port), app_of)(), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name=f"toy-mcp-{app_of}", daemon=True)
    thread.start()
    try:
        assert wait_for(lambda: server.started, 20), f"the MCP server ({app_of}) did not start"
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        server.should_exit = True
        thread.join(5)


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The toy server over streamable HTTP."""
    yield from _served("streamable_http_app", "/mcp")


@pytest.fixture(scope="module")
def http_config(http_url: str, files: Path) -> Path:
    path = files / "http.json"
    path.write_text(json.dumps({"mcpServers": {"web": {"url": http_url, "prefix": "web_", "approval": "never"}}}))
    return path


@pytest.fixture(scope="module")
def http_gateway(http_config: Path) -> Iterator[ToolGateway]:
    gateway = ToolGateway()
    gateway.add_mcp_servers(str(http_config))
    yield gateway
    gateway.close()


def server_of(gateway: ToolGateway, name: str = "toy") -> McpServer:
    return next(server for server in gateway.mcp_servers if server.name == name)


# -- registration ------------------------------------------------------------------------------------------


def test_the_servers_schemas_reach_the_model_unchanged_with_tags_approval_and_server(gateway):
    schemas = {s["function"]["name"]: s["function"] for s in gateway.schemas()}
    assert set(schemas) == TOY_TOOLS | {"slow_short"}
    listed = server_of(gateway).tools
    for name in TOY_TOOLS:
        assert schemas[name]["parameters"] == listed[name].args_schema  # the server's inputSchema, as listed
    assert schemas["add"]["parameters"]["required"] == ["a"]
    assert schemas["add"]["description"] == "Add two integers."
    meta = gateway.registry.get("add")
    assert meta.tags == ("mcp", "mcp:toy") and meta.approval == "always" and meta.timeout_s == 5
    rows = {row["name"]: row for row in asyncio.run(gateway.status())}
    assert rows["add"]["server"] == "toy"


def test_tags_mcp_and_mcp_server_work_in_allow_and_deny(gateway):
    assert {m.name for m in gateway.tools(ToolSession.of(allow=["mcp:toy"]))} == TOY_TOOLS | {"slow_short"}
    assert gateway.tools(ToolSession.of(deny=["mcp"])) == []
    denied = asyncio.run(gateway.execute(call("echo", text="x"), ToolSession.of(deny=["mcp:toy"])))
    assert denied.status == "denied"


@pytest.mark.parametrize(("config", "message"), [
    ({"mcpServers": {"a": {"command": "x", "url": "http://h"}}}, "MCP server 'a': give either 'command'"),
    ({"mcpServers": {"a": {"command": "x", "headers": {}}}}, "MCP server 'a': unknown key(s) 'headers' for stdio"),
    ({"mcpServers": {"a": {"command": "x", "args": "-v"}}}, "MCP server 'a': 'args' must be a list of strings"),
    ({"mcpServers": {"a": {"url": "ftp://h"}}}, "MCP server 'a': 'url' must be an http"),
    ({"mcpServers": {"a": {"command": "x", "timeout_s": 0}}}, "MCP server 'a': 'timeout_s' must be a number"),
    ({"mcpServers": {"a": {"command": "x", "approval": "sometimes"}}}, "MCP server 'a': 'approval' must be"),
    ({"mcpServers": {"a b": {"command": "x"}}}, "MCP server name 'a b'"),
    ({"mcpServers": {"a": {"args": []}}}, "MCP server 'a': 'command' is required"),
    ({"server": {}}, "MCP config: top-level key 'server': did you mean 'servers'?"),
    ({"mcp_servers": {}}, "MCP config: top-level key 'mcp_servers': did you mean 'mcpServers'?"),
    ({"globalShortcut": "Ctrl+Space"}, "MCP config: no servers: expected 'mcpServers'"),
    ({"servers": {}, "mcpServers": {}}, "MCP config: give the servers under 'mcpServers' or 'servers', exactly one"),
    ({"servers": {"a": {"command": "${input:key}"}}, "inputs": [{"id": "kee", "type": "promptString"}]},
     "MCP server 'a': '${input:key}' names no input of the config's 'inputs' ('kee')"),
    ({"servers": {}, "inputs": [{"id": "key", "type": "promptText"}]}, "MCP config: input 'key': 'type' must be"),
    ({"mcpServers": {"a": {"type": "grpc", "url": "http://h"}}}, "MCP server 'a': 'type' must be one of"),
    ({"mcpServers": {"a": {"type": "sse", "transport": "stdio", "url": "http://h"}}},
     "MCP server 'a': 'type' and 'transport' disagree"),
    ({"mcpServers": {"a": {"type": "http", "command": "x"}}}, "MCP server 'a': unknown key(s) 'command' for "),
    ({"mcpServers": {"a": {"command": "x", "envFile": "/no/such.env"}}}, "MCP server 'a': 'envFile'"),
    ("{not json", "MCP config the JSON text: not valid JSON"),
    ("/no/such/mcp.json", "MCP config '/no/such/mcp.json': cannot read it"),
])
def test_a_bad_config_is_one_line_naming_the_server_and_key(config, message):
    with pytest.raises(McpConfigError) as caught:
        read_config(config)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_the_config_shapes_inferred_transport_and_disabled_servers():
    servers, _ = read_config(json.dumps({"mcpServers": {
        "h": {"url": "http://127.0.0.1:1/mcp", "headers": {"A": "b"}},
        "s": {"command": "srv", "args": ["-v"], "env": {"K": "v"}, "cwd": "/tmp", "enabled": False}}}))
    assert [(s.name, s.transport, s.enabled, s.approval) for s in servers] == [
        ("h", "streamable_http", True, "always"), ("s", "stdio", False, "always")]


def test_the_shapes_claude_code_vs_code_cursor_and_the_adapters_write(tmp_path):
    """Claude Code's `.mcp.json` (`type`), VS Code's `mcp.json` (`servers`, `envFile`), Cursor's (bare `url`),
    langchain-mcp-adapters' `transport` spellings: each read as the transport it names."""
    claude_code = {"mcpServers": {"local": {"type": "stdio", "command": "srv", "args": []},
                                  "remote": {"type": "http", "url": "https://h/mcp", "headers": {"A": "${KEY}"}},
                                  "legacy": {"type": "sse", "url": "https://h/sse"}}}
    (tmp_path / ".env").write_text("# the server's secrets\nexport TOKEN='t0k'\nLEVEL=debug\n")
    (tmp_path / "mcp.json").write_text(json.dumps({"inputs": [], "servers": {
        "vs": {"type": "stdio", "command": "srv", "envFile": ".env", "env": {"LEVEL": "info"}}}}))
    cursor = {"mcpServers": {"c": {"url": "https://h/mcp"}}}
    adapters = {"mcpServers": {"a": {"transport": "streamable-http", "url": "https://h/mcp"},
                               "b": {"transport": "streamable_http", "url": "https://h/mcp"}}}
    shapes = [s for config in (claude_code, str(tmp_path / "mcp.json"), cursor, adapters)
              for s in read_config(config)[0]]
    assert [(s.name, s.transport) for s in shapes] == [
        ("local", "stdio"), ("remote", "streamable_http"), ("legacy", "sse"), ("vs", "stdio"),
        ("c", "streamable_http"), ("a", "streamable_http"), ("b", "streamable_http")]
    assert shapes[3].env == {"TOKEN": "t0k", "LEVEL": "info"}  # env wins over envFile, as in VS Code


def test_variables_in_the_command_args_and_env_are_expanded_as_claude_code_and_vs_code_write_them(monkeypatch):
    from reactgraph.tools.mcp.transports import expand

    monkeypatch.setenv("MCP_HOME", "/srv/mcp")
    monkeypatch.delenv("MCP_UNSET", raising=False)
    assert expand("${MCP_HOME}/bin") == "/srv/mcp/bin" and expand("${env:MCP_HOME}") == "/srv/mcp"
    assert expand("${MCP_UNSET:-8080}") == "8080" and expand("${MCP_UNSET}") == "${MCP_UNSET}"
    monkeypatch.setenv("MCP_PYTHON", sys.executable)
    gateway = ToolGateway()
    try:  # the command itself names a variable: the server starts
        gateway.add_mcp_servers({"mcpServers": {"v": {"type": "stdio", "command": "${MCP_PYTHON}",
                                                      "args": [str(SERVER), "stdio"], "approval": "never"}}})
        assert "echo" in {m.name for m in gateway.tools()}
    finally:
        gateway.close()


def _fake_server(name: str, *tools: str, prefix: str = "") -> McpServer:
    from reactgraph.tools.mcp.config import server
    fake = McpServer(server(name, {"command": "unused", "prefix": prefix}))
    fake.tools = {t: StructuredTool(name=t, description=t, args_schema={"type": "object", "properties": {}},
                                    coroutine=lambda: None) for t in tools}
    return fake


def test_a_name_clash_names_both_sources_and_suggests_a_prefix():
    gateway = ToolGateway()

    @gateway.tool
    def lookup(topic: str) -> str:
        """Look up notes."""
        return topic

    with pytest.raises(ToolRegistrationError, match=r"'lookup' from MCP server 'a' clashes with the registered "
                                                    r"tool 'lookup'; set a \"prefix\""):
        register(gateway, [_fake_server("a", "lookup")])
    with pytest.raises(ToolRegistrationError, match="'find' from MCP server 'b' clashes with MCP server 'a'"):
        register(gateway, [_fake_server("a", "find"), _fake_server("b", "find")])
    assert [m.name for m in gateway.registry] == ["lookup"]  # all or none
    register(gateway, [_fake_server("a", "find", "lookup", prefix="a_"), _fake_server("b", "find")])
    assert [m.name for m in gateway.registry] == ["lookup", "a_find", "a_lookup", "find"]
    with pytest.raises(ToolRegistrationError, match="'calculator' from MCP server 'm' clashes with the built-in tool"):
        register(default_gateway(), [_fake_server("m", "calculator")])


# -- calls -------------------------------------------------------------------------------------------------


async def test_calls_results_and_non_text_content(gateway):
    ok = await gateway.execute(call("add", a=2, b=3), approved=True)
    assert (ok.status, ok.content) == ("ok", "5")
    picture = await gateway.execute(call("picture"), approved=True)
    assert picture.status == "ok"
    assert picture.content.startswith("a red pixel\n[image: image/png, ") and "not shown" in picture.content
    assert len(picture.content) < 100  # the image's bytes are never in the observation


def test_invalid_arguments_are_invalid_args_from_the_json_schema(gateway):
    result = asyncio.run(gateway.execute(call("add", a="two"), approved=True))
    assert result.status == "invalid_args"
    assert "a: 'two' is not of type 'integer'" in result.content  # jsonschema's wording: never sent to the server


async def test_an_in_band_error_is_an_error_and_counts_for_the_breaker(gateway):
    first = await gateway.execute(call("fail", message="disk on fire"), approved=True)
    assert first.status == "error" and "disk on fire" in first.content
    await gateway.execute(call("fail", message="again"), approved=True)
    assert (await gateway.execute(call("fail", message="third"), approved=True)).status == "circuit_open"


async def test_a_timeout_cancels_the_request_and_the_session_goes_on(gateway, files):
    starts = server_of(gateway).starts
    result = await gateway.execute(call("slow_short", seconds=5), approved=True)
    assert result.status == "timeout"
    assert await asyncio.to_thread(wait_for, lambda: "cancelled" in lines(files / "events"), 10)  # server told
    after = await gateway.execute(call("echo", text="still here"), approved=True)
    assert (after.status, after.content, server_of(gateway).starts) == ("ok", "still here", starts)


async def test_twenty_concurrent_calls_share_one_session(gateway, files):
    processes = len(lines(files / "starts"))
    results = await gateway.execute_many([call("add", f"c{i}", a=i, b=1) for i in range(20)], approved=True)
    assert [r.status for r in results] == ["ok"] * 20
    assert [r.content for r in results] == [str(i + 1) for i in range(20)]
    assert len(lines(files / "starts")) == processes  # no server process was started for them


def test_a_server_that_crashes_mid_call_is_an_error_and_the_next_call_restarts_it(gateway, files):
    server = server_of(gateway)
    starts, processes = server.starts, len(lines(files / "starts"))
    crashed = asyncio.run(gateway.execute(call("crash"), approved=True))
    assert crashed.status == "error" and "stopped during the call" in crashed.content
    again = asyncio.run(gateway.execute(call("echo", text="back"), approved=True))
    assert (again.status, again.content) == ("ok", "back")
    assert (server.starts, len(lines(files / "starts"))) == (starts + 1, processes + 1)


def test_calls_from_sync_invoke_and_async_ainvoke_through_langchain_tools(gateway):
    # The caller's agent brings its own approval step: this session lets MCP tools run unasked.
    unasked = ToolSession.of(approval={"mcp": "never"})
    echo = next(t for t in gateway.as_langchain_tools(unasked) if t.name == "echo")
    assert echo.invoke({"text": "sync"}) == "sync"

    async def inside_a_running_loop() -> tuple[str, str]:
        return echo.invoke({"text": "sync in loop"}), await echo.ainvoke({"text": "async"})

    assert asyncio.run(inside_a_running_loop()) == ("sync in loop", "async")


@pytest.mark.parametrize(("settings", "cause"), [
    ({"command": "/no/such/mcp-server"}, "No such file"),
    ({"command": sys.executable, "args": ["-c", "import sys; print('bad token', file=sys.stderr); sys.exit(3)"]},
     "exited with status 3; its last output: bad token"),
    ({"command": "/bin/false"}, "the server closed the connection (/bin/false); exited with status 1"),
    ({"command": sys.executable, "args": ["-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]},
     "was killed by SIGKILL"),
    ({"command": sys.executable, "args": ["-c", "import sys; sys.stdin.read()"], "startup_timeout_s": 0.5},
     "no answer within 0.5 s"),
    ({"url": "http://127.0.0.1:9/mcp", "startup_timeout_s": 5}, "did not start"),
])
def test_a_server_that_never_starts_is_one_line(settings, cause, caplog):
    gateway = ToolGateway()
    with caplog.at_level("WARNING", logger="reactgraph.tools.mcp"):
        assert gateway.add_mcp_servers({"mcpServers": {"x": settings}}) == []
    message = gateway.mcp_failed["x"]
    assert message.startswith("MCP server 'x' did not start: ") and cause in message and "\n" not in message
    assert len(gateway.registry) == 0 and gateway.mcp_servers == []
    # Ours only: asyncio may warn of a child it found reaped already (another of this worker's subprocesses' reaper).
    assert [r.getMessage() for r in caplog.records if r.name.startswith("reactgraph.")] == [  # the server, then:
        # no server of the config started
        f"{message}; its tools are left out",
        "MCP config (a dict or JSON text): none of its 1 server(s) started; going on without their tools"]
    with pytest.raises(McpStartError, match=r"^MCP server 'x' did not start") as caught:  # one server: raises
        asyncio.run(_start_once(read_config({"mcpServers": {"x": settings}})[0][0]))
    assert caught.value.server == "x"


async def _start_once(config) -> None:
    server = McpServer(config)
    try:
        await server.start()
    finally:
        await server.aclose()


# -- streamable HTTP -----------------------------------------------------------------------------------------


async def test_the_http_server_with_a_prefix_from_sync_and_async_code(http_gateway, http_config):
    assert {m.name for m in http_gateway.tools()} == {f"web_{name}" for name in TOY_TOOLS}
    assert http_gateway.registry.get("web_add").approval == "never"
    assert (await http_gateway.execute(call("web_add", a=20, b=22), approved=True)).content == "42"
    tool = next(t for t in http_gateway.as_langchain_tools() if t.name == "web_echo")
    assert tool.invoke({"text": "sync inside a running loop"}) == "sync inside a running loop"
    other = ToolGateway()
    other.add_mcp_servers(str(http_config))  # the sync form, called inside this test's running loop
    try:
        assert (await other.execute(call("web_echo", text="hi"), approved=True)).content == "hi"
    finally:
        await other.aclose()
    closed = await other.execute(call("web_echo", text="hi"), approved=True)
    assert closed.status == "error" and "MCP server 'web' was closed" in closed.content


def test_an_sse_server_as_claude_code_configures_it():
    """The SSE transport (deprecated by MCP in 2025, still what many hosted servers speak), `type: "sse"`."""
    for url in _served("sse_app", "/sse"):
        gateway = ToolGateway()
        try:
            gateway.add_mcp_servers({"mcpServers": {"old": {"type": "sse", "url": url, "approval": "never"}}})
            result = asyncio.run(gateway.execute(call("add", a=2, b=3)))
            assert (result.status, result.content) == ("ok", "5")
        finally:
            gateway.close()


# -- the graphs ----------------------------------------------------------------------------------------------


def test_the_react_graph_answers_through_an_mcp_tool(gateway):
    model = ScriptedChatModel.of(tool_reply("add them", call("add", a=40, b=2)), AIMessage("It is 42."))
    graph = build_react_graph(gateway, model=model)
    result = graph.invoke({"messages": [HumanMessage("40 + 2?")]}, config={"configurable": {"thread_id": "m"}},
                          context=Context(reflection="off", closing_check=False, approval={"mcp": "never"}))
    assert result["final_answer"] == "It is 42."
    assert [(s["action"], s["status"], s["observation"]) for s in result["steps"] if s["node"] == "act"] == [
        ("add", "ok", "42")]


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_an_mcp_call_carries_the_runs_trace_context_with_the_tool_span_as_parent(transport, request):
    pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from reactgraph.graph.tracing import disable_tracing, enable_tracing

    gateway = request.getfixturevalue("http_gateway" if transport == "http" else "gateway")
    tool = "web_trace_context" if transport == "http" else "trace_context"
    model = ScriptedChatModel.of(*[m for _ in range(2) for m in (tool_reply("look", call(tool)), AIMessage("ok"))])
    graph = build_react_graph(gateway, model=model)

    def seen(thread: str) -> dict[str, Any]:
        result = graph.invoke({"messages": [HumanMessage("q")]}, config={"configurable": {"thread_id": thread}},
                              context=Context(reflection="off", closing_check=False, approval={"mcp": "never"}))
        (observation,) = [s["observation"] for s in result["steps"] if s["node"] == "act"]
        return json.loads(observation)

    untraced = seen(f"untraced-{transport}")  # tracing off: nothing is sent
    assert untraced["meta"] == {"traceparent": None, "tracestate": None}
    assert untraced["headers"] == {"traceparent": None, "tracestate": None}
    exporter = InMemorySpanExporter()
    enable_tracing(exporter=exporter, batch=False)
    try:
        got = seen(f"traced-{transport}")
    finally:
        disable_tracing()
    finished = exporter.get_finished_spans()
    (root,) = [s for s in finished if s.name == "invoke_agent react"]
    (span,) = [s for s in finished if s.name == f"execute_tool {tool}"]
    # version-trace id-parent id-flags: the run's trace, the gateway's tool span as the parent
    expected = f"00-{root.context.trace_id:032x}-{span.context.span_id:016x}-"
    assert got["meta"]["traceparent"].startswith(expected), got  # params._meta: every transport
    if transport == "http":  # and the W3C header on that call's POST
        assert got["headers"]["traceparent"] == got["meta"]["traceparent"], got
    else:
        assert got["headers"]["traceparent"] is None


async def test_a_context_mcp_config_adds_tools_only_for_runs_that_name_it(http_config):
    gateway = ToolGateway()
    model = ScriptedChatModel.of(tool_reply("echo", call("web_echo", text="from context")), AIMessage("done"),
                                 tool_reply("echo", call("web_echo", text="not mine")), AIMessage("done"))
    graph = build_react_graph(gateway, model=model)
    try:
        named = await graph.ainvoke({"messages": [HumanMessage("q")]}, config={"configurable": {"thread_id": "a"}},
                                    context=Context(reflection="off", closing_check=False,
                                                    mcp_config=str(http_config)))
        unnamed = await graph.ainvoke({"messages": [HumanMessage("q")]}, config={"configurable": {"thread_id": "b"}},
                                      context=Context(reflection="off", closing_check=False))
    finally:
        await gateway.aclose()
    offered = [{t["function"]["name"] for t in r["tools"] or []} for r in model.requests]
    assert "web_echo" in offered[0] and "web_echo" not in offered[2]
    assert [s["status"] for s in named["steps"] if s["node"] == "act"] == ["ok"]
    assert [s["status"] for s in unnamed["steps"] if s["node"] == "act"] == ["denied"]


def test_a_context_naming_a_bad_mcp_config_stops_the_run_in_one_line(files):
    graph = build_react_graph(ToolGateway(), model=ScriptedChatModel.of(AIMessage("never asked")))
    with pytest.raises(McpConfigError, match=r"^MCP config '.*missing.json': cannot read it"):
        graph.invoke({"messages": [HumanMessage("q")]}, config={"configurable": {"thread_id": "bad"}},
                     context=Context(reflection="off", mcp_config=str(files / "missing.json")))
    with pytest.raises(InvalidContext, match=r"Context\.mcp_config = .* text of at most 4,096 characters"):
        Context(mcp_config="x" * 5000)


# -- the command line ----------------------------------------------------------------------------------------


def test_cli_tools_lists_mcp_tools_with_their_server_from_mcp_and_the_env(cli, http_config, monkeypatch):
    code, out, _ = cli("tools", "--mcp", str(http_config), "--json")
    assert code == 0
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["web_add"]["server"] == "web" and rows["calculator"]["server"] is None
    monkeypatch.setenv("REACTGRAPH_MCP", str(http_config))
    code, out, _ = cli("tools")
    assert code == 0 and "web_echo" in out and "web " in out


def test_cli_ask_with_mcp_answers_and_closes_the_sessions(cli, http_config):
    code, out, err = cli("ask", "计算 2+3", "--mcp", str(http_config), "--store", "memory", "--json",
                         "--allow", "calculator", "--allow", "mcp:web")
    assert code == 0, err
    assert json.loads(out)["status"] == "answered"


def test_cli_ask_with_its_only_server_down_says_so_and_answers_without_mcp_tools(cli, files):
    path = files / "refused.json"
    path.write_text(json.dumps({"mcpServers": {"down": {"url": "http://127.0.0.1:9/mcp", "startup_timeout_s": 5}}}))
    code, out, err = cli("ask", "现在几点了？", "--mcp", str(path), "--store", "memory", "--json")
    assert code == 0, err
    assert json.loads(out)["status"] == "answered"
    assert err.splitlines() == [
        "warning: MCP server 'down' did not start: All connection attempts failed (http://127.0.0.1:9/mcp); its "
        "tools are left out", f"warning: no MCP server of {path} started; going on without MCP tools"]


# -- LangChain's standard tool tests over an MCP tool ---------------------------------------------------------

_shared: list[ToolGateway] = []  # the module's stdio gateway, set by its fixture (the suites build no fixtures)


class _McpEcho:
    @pytest.fixture(autouse=True)
    def _server(self, gateway: ToolGateway) -> None:  # the suites read the tool lazily, after this runs
        return None

    @property
    def tool_constructor(self) -> BaseTool:
        return next(t for t in _shared[0].as_langchain_tools() if t.name == "echo")

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"text": "hello"}


class TestMcpEchoUnit(_McpEcho, ToolsUnitTests):
    pass


class TestMcpEchoIntegration(_McpEcho, ToolsIntegrationTests):
    pass
