"""The gateway's tools inside LangChain runners: honest ToolMessage statuses, sync calls in a loop, nested traces."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from uuid import UUID

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from reactgraph.tools import BreakerConfig, ToolGateway, ToolMeta, default_gateway
from support.scripted import ScriptedChatModel, call
from support.standard_tool_suites import standard_tool_suites


def interop_gateway() -> ToolGateway:
    """add (ok or invalid_args), broken (error, then circuit_open), slow (timeout), shout (a LangChain tool)."""
    gateway = ToolGateway(breaker=BreakerConfig(failure_threshold=1, cooldown_s=600))

    @gateway.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @gateway.tool
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    async def slow() -> str:
        await asyncio.sleep(5)
        return "late"

    gateway.register(ToolMeta.from_json_schema("slow", "Takes too long.", {"type": "object"}, slow, timeout_s=0.05))

    async def shout(text: str) -> str:
        return text.upper()

    gateway.register(StructuredTool.from_function(coroutine=shout, name="shout", description="Shout.",
                                                  args_schema={"type": "object", "required": ["text"],
                                                               "properties": {"text": {"type": "string"}}}))
    return gateway


def tool_graph(tools: list[Any]) -> Any:
    """A graph that is only LangGraph's ToolNode (ToolNode runs inside a graph, where its runtime comes from)."""
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    return graph.compile()


FAILING_CALLS = [call("add", "ok", a=1, b=2), call("add", "invalid", a=1), call("broken", "error"),
                 call("broken", "open"), call("slow", "timeout")]
EXPECTED = {"ok": ("success", "3"), "invalid": ("error", "Invalid arguments for add"),
            "error": ("error", "Tool broken failed: disk on fire"), "open": ("error", "Tool broken is temporarily"),
            "timeout": ("error", "Tool slow timed out")}


def statuses(messages: list[Any]) -> dict[str, tuple[str, str]]:
    found = {}
    for m in messages:
        if isinstance(m, ToolMessage):
            prefix = next(p for _, p in EXPECTED.values() if m.text.startswith(p) or p == m.text)
            found[m.tool_call_id] = (m.status, prefix)
    return found


async def test_tool_node_gives_every_non_ok_result_an_error_status():
    node = tool_graph(interop_gateway().as_langchain_tools())

    # one after another: "open" must see the breaker that "error" opened
    messages = [(await node.ainvoke({"messages": [AIMessage("", tool_calls=[c])]}))["messages"][-1]
                for c in FAILING_CALLS]

    assert statuses(messages) == EXPECTED


def test_tool_node_statuses_also_hold_when_run_synchronously():
    node = tool_graph(interop_gateway().as_langchain_tools())

    messages = [node.invoke({"messages": [AIMessage("", tool_calls=[c])]})["messages"][-1] for c in FAILING_CALLS]

    assert statuses(messages) == EXPECTED


async def test_create_agent_sees_error_statuses_for_failed_calls():
    model = ScriptedChatModel.of(*(AIMessage("", tool_calls=[c]) for c in FAILING_CALLS), AIMessage("done"))
    agent = create_agent(model, interop_gateway().as_langchain_tools())

    state = await agent.ainvoke({"messages": [("user", "go")]})

    assert statuses(state["messages"]) == EXPECTED
    assert state["messages"][-1].content == "done"


async def test_a_sync_invoke_works_from_code_inside_a_running_event_loop():
    add = next(t for t in interop_gateway().as_langchain_tools() if t.name == "add")

    assert asyncio.get_running_loop()  # as in Jupyter or a FastAPI handler
    assert add.invoke({"a": 40, "b": 2}) == "42"
    message = add.invoke(call("add", "t1", a=1))
    assert isinstance(message, ToolMessage) and message.status == "error"


class ToolRuns(BaseCallbackHandler):
    """Records each tool run's id and its parent's id, in the order the runs start."""

    def __init__(self) -> None:
        self.started: list[tuple[UUID, UUID | None]] = []
        self.ended: set[UUID] = set()

    def on_tool_start(self, serialized: dict[str, Any], input_str: str, *, run_id: UUID,
                      parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self.started.append((run_id, parent_run_id))

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.ended.add(run_id)


@pytest.mark.parametrize("mode", ["async", "sync", "sync inside a loop"])
async def test_tool_runs_nest_under_the_callers_run_in_traces(mode: str):
    outer = ToolGateway(interop_gateway().as_langchain_tools())  # gateway tool → gateway tool → StructuredTool
    node = tool_graph(outer.as_langchain_tools())
    runs = ToolRuns()
    request = {"messages": [AIMessage("", tool_calls=[call("shout", "s1", text="hi")])]}
    config: Any = {"callbacks": [runs]}

    if mode == "async":
        state = await node.ainvoke(request, config)
    elif mode == "sync":
        state = await asyncio.to_thread(node.invoke, request, config)
    else:
        state = node.invoke(request, config)

    assert state["messages"][-1].content == "HI"
    (outer_run, node_run), (inner_run, inner_parent), (tool_run, tool_parent) = runs.started
    assert node_run is not None  # the outermost tool run sits under ToolNode's own run
    assert (inner_parent, tool_parent) == (outer_run, inner_run)
    assert runs.ended == {outer_run, inner_run, tool_run}


class ChainRuns(ToolRuns):
    """Also records the name of every chain run (the graph's nodes), to tell under which one a tool ran."""

    def __init__(self) -> None:
        super().__init__()
        self.names: dict[UUID, str] = {}

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.names[run_id] = kwargs.get("name") or ""


@pytest.mark.parametrize("mode", ["async", "sync"])
async def test_tool_runs_of_our_graphs_nest_under_their_act_node(mode: str):
    from langchain_core.messages import HumanMessage

    from reactgraph.graph import build_react_graph
    from reactgraph.nodes.context import Context

    model = ScriptedChatModel.of(AIMessage("", tool_calls=[call("shout", "s1", text="hi")]), AIMessage("HI"))
    graph = build_react_graph(interop_gateway(), model=model)
    runs = ChainRuns()
    request, config = {"messages": [HumanMessage("shout hi")]}, {"callbacks": [runs]}
    context = Context(reflection="off")
    if mode == "async":
        await graph.ainvoke(request, config, context=context)
    else:  # the gateway's coroutine runs on the sync bridge's loop thread: the run context goes along
        await asyncio.to_thread(graph.invoke, request, config, context=context)
    ((tool_run, parent),) = runs.started
    assert runs.names[parent] == "act" and runs.ended == {tool_run}


# --- langchain-tests' standard suites over every built-in tool and a JSON-schema StructuredTool ----------------

class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html><body>hello from loopback</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


_page_url: list[str] = []  # set by the module's server fixture; the suites read their example args lazily


@pytest.fixture(scope="module", autouse=True)
def _local_page() -> Iterator[None]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    _page_url.append(f"http://127.0.0.1:{httpd.server_address[1]}/")
    yield
    httpd.shutdown()
    httpd.server_close()
    _page_url.clear()


_EXAMPLES: dict[str, Callable[[], dict[str, Any]]] = {
    "calculator": lambda: {"expression": "(15+27)*3"},
    "get_time": lambda: {"timezone": "Europe/Paris"},
    "get_weather": lambda: {"city": "Shanghai"},
    "search": lambda: {"query": "who founded LangChain", "top_k": 2},
    "rag_search": lambda: {"query": "circuit breaker failures", "top_k": 2},
    "http_get": lambda: {"url": _page_url[0]},
    "shout": lambda: {"text": "hi"},
}


@functools.cache
def _standard_tools() -> dict[str, BaseTool]:
    # http_approval="never": a LangChain agent using these tools brings its own approval step (e.g.
    # HumanInTheLoopMiddleware, then as_langchain_tools(approved_by=it): tests/test_approval_create_agent.py);
    # with the default, http_get answers needs_approval (tests/test_approval.py).
    gateway = default_gateway(http_allow_hosts=["127.0.0.1"], http_allow_private=True, weather_url="",
                              http_approval="never")
    gateway.register(interop_gateway().registry.get("shout"))  # the JSON-schema StructuredTool, as registered
    return {tool.name: tool for tool in gateway.as_langchain_tools()}


standard_tool_suites(globals(), _standard_tools, _EXAMPLES)
