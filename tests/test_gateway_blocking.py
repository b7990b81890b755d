"""A sync caller's tool call (`execute_sync`: the graphs' `invoke`, a gateway tool's `.invoke()`) goes through the
same pipeline as an awaited one, on the caller's own thread with no event loop, and keeps every guarantee: the
same answers, the timeout of a hanging tool, the concurrency limit across threads, the breaker, retries,
the events, a tool's own async code, and a user's Ctrl-C."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from reactgraph.tools import (
    BreakerConfig,
    ToolGateway,
    ToolInputError,
    ToolRegistrationError,
    ToolSession,
    ToolStatus,
    TransientToolError,
)
from reactgraph.tools.resilience import Retry

SLACK_S = 3.0  # a shared, noisy machine: bounds are generous, and each hang outlasts its bound by far


def call(name, args=None, id: str = "c1") -> dict:
    return {"name": name, "args": {} if args is None else args, "id": id}


def gateway_of_every_outcome() -> ToolGateway:
    gateway = ToolGateway(retry=Retry(base_delay_s=0.001, max_delay_s=0.002))
    flaky = iter([TransientToolError("503"), "sunny"] * 2)  # one pass for each entry point

    @gateway.tool(tags=("web",))
    def weather(city: str) -> str:
        """Forecast for a city."""
        reply = next(flaky)
        if isinstance(reply, Exception):
            raise reply
        return f"{reply} in {city}"

    @gateway.tool
    async def later(text: str) -> str:
        """An async tool."""
        await asyncio.sleep(0)
        return text.upper()

    @gateway.tool
    def broken(n: int) -> str:
        """Always fails."""
        raise (ToolInputError("n must be even") if n % 2 else KeyError("missing"))

    @gateway.tool(approval="always")
    def delete(path: str) -> str:
        """Delete a file."""
        return "deleted"

    @gateway.tool(timeout_s=0.2)
    def stuck() -> str:
        """Never answers in time."""
        time.sleep(3)
        return "late"

    return gateway


CALLS = [call("weather", {"city": "Oslo"}), call("later", {"text": "hi"}), call("broken", {"n": 1}),
         call("broken", {"n": 2}), call("delete", {"path": "/tmp/x"}), call("missing"),
         call("weather", {"city": 3}), call("weather", "not json"), call("stuck"), call("later", {"text": "x"})]


async def test_every_call_gets_the_same_answer_from_execute_sync_as_from_execute():
    awaited_gateway, blocking_gateway = gateway_of_every_outcome(), gateway_of_every_outcome()
    session = ToolSession.of(deny=["nothing"])
    awaited = [(await awaited_gateway.execute(c, session)).to_dict() for c in CALLS]
    blocking = await asyncio.to_thread(lambda: [blocking_gateway.execute_sync(c, session).to_dict() for c in CALLS])

    def outcome(result: dict) -> dict:
        return {k: v for k, v in result.items() if k != "latency_ms"}

    assert [outcome(r) for r in blocking] == [outcome(r) for r in awaited]
    assert [r["status"] for r in blocking] == ["ok", "ok", "invalid_args", "error", "needs_approval",
                                               "unknown_tool", "invalid_args", "invalid_args", "timeout", "ok"]
    assert blocking[0]["attempts"] == 2, "the transient failure was retried"


def test_the_call_runs_on_the_callers_thread_and_the_tool_on_a_gateway_thread():
    gateway = ToolGateway()
    seen: dict[str, str] = {}

    @gateway.tool(max_attempts=2)
    def where() -> str:
        """Name the thread this runs on."""
        seen.setdefault("tool", threading.current_thread().name)
        raise TransientToolError("once more")

    events: list[dict] = []
    result = gateway.execute_sync(call("where"), events=lambda event: (events.append(event), seen.setdefault(
        "events", threading.current_thread().name)))

    assert result.status is ToolStatus.ERROR and result.attempts == 2
    assert [e["event"] for e in events] == ["retry"]
    assert seen["events"] == threading.current_thread().name, "the pipeline ran on the caller's own thread"
    assert seen["tool"].startswith("reactgraph-tool-"), "the sync tool ran on a gateway thread"


def test_a_tool_without_a_deadline_runs_on_the_callers_own_thread_with_every_other_step_kept():
    gateway = ToolGateway()
    attempts = iter([TransientToolError("once more"), None, None])

    @gateway.tool(timeout_s=None, max_attempts=2)
    def where() -> str:
        """Name the thread this runs on."""
        if (failure := next(attempts)) is not None:
            raise failure
        return threading.current_thread().name

    result = gateway.execute_sync(call("where"))
    assert (result.status, result.attempts) == (ToolStatus.OK, 2), "retried as any tool is"
    assert result.content == threading.current_thread().name, "no hand-off to a gateway thread"
    awaited = asyncio.run(gateway.execute(call("where", id="c2")))
    assert awaited.content.startswith("reactgraph-tool-"), "under asyncio it still never blocks the event loop"
    assert [row["timeout_s"] for row in asyncio.run(gateway.status())] == [None]


def test_in_a_graph_a_tool_without_a_deadline_runs_on_the_nodes_thread():
    from langchain_core.messages import AIMessage, HumanMessage

    from reactgraph.graph import Context, build_react_graph
    from reactgraph.testing import ScriptedChatModel

    gateway = ToolGateway()

    @gateway.tool(timeout_s=None)
    def where() -> str:
        """Name the thread this runs on."""
        return threading.current_thread().name

    model = ScriptedChatModel.of(AIMessage("", tool_calls=[{"name": "where", "args": {}, "id": "c1"}]),
                                 AIMessage("Done."))
    graph = build_react_graph(gateway, model=model)
    result = graph.invoke({"messages": [HumanMessage("where?")]}, context=Context(reflection="rules"))
    [observed] = [m.content for m in result["messages"] if m.type == "tool"]
    assert observed == threading.current_thread().name, "the act node ran it on its own thread (invoke's)"


@pytest.mark.parametrize("raised", [StopIteration("done"), SystemExit(3), KeyboardInterrupt(), KeyError("k")],
                         ids=lambda e: type(e).__name__)
def test_a_tool_without_a_deadline_fails_as_one_on_a_thread_does(raised):
    results = []
    for timeout_s in (10.0, None):
        gateway = ToolGateway()

        @gateway.tool(timeout_s=timeout_s)
        def fails() -> str:
            """Raises."""
            raise raised

        results.append({k: v for k, v in gateway.execute_sync(call("fails")).to_dict().items() if k != "latency_ms"})
    assert results[0]["status"] == "error" and results[1] == results[0]


def test_a_tool_without_a_deadline_that_raises_timeout_error_itself_times_out_without_a_figure():
    gateway = ToolGateway()

    @gateway.tool(timeout_s=None)
    def upstream() -> str:
        """Asks a server that gives up."""
        raise TimeoutError("the upstream server gave up")

    result = gateway.execute_sync(call("upstream"))
    assert result.status is ToolStatus.TIMEOUT
    assert result.content.startswith("Tool upstream timed out and is unavailable right now")


def test_a_deadline_of_zero_is_refused_in_one_line():
    with pytest.raises(ToolRegistrationError, match=r"timeout_s must be > 0 \(or None: no deadline\)"):
        @ToolGateway().tool(timeout_s=0)
        def instant() -> str:
            """Answers at once."""
            return "x"


def test_a_hanging_sync_tool_is_cut_off_at_its_timeout_and_its_thread_counted_stuck_until_it_returns():
    gateway = ToolGateway()
    release = threading.Event()

    @gateway.tool(timeout_s=0.3)
    def hang() -> str:
        """Waits on a server that never answers."""
        release.wait(30)
        return "too late"

    started = time.perf_counter()
    result = gateway.execute_sync(call("hang"))

    assert result.status is ToolStatus.TIMEOUT and "timed out after 0.3s" in result.content
    assert 0.3 <= time.perf_counter() - started < 0.3 + SLACK_S
    assert gateway.threads.stuck("hang") == 1
    release.set()
    deadline = time.monotonic() + SLACK_S
    while gateway.threads.stuck("hang") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gateway.threads.stuck("hang") == 0


def test_a_hanging_async_tool_is_cut_off_at_its_timeout_too():
    gateway = ToolGateway()

    @gateway.tool(timeout_s=0.2)
    async def hang() -> str:
        """Awaits a reply that never comes."""
        await asyncio.Event().wait()
        return "never"

    started = time.perf_counter()
    result = gateway.execute_sync(call("hang"))

    assert (result.status, result.attempts) == (ToolStatus.TIMEOUT, 1)
    assert time.perf_counter() - started < 0.2 + SLACK_S


def test_sync_callers_on_many_threads_share_one_concurrency_limit_and_a_long_wait_is_rate_limited():
    gateway = ToolGateway(max_concurrent=2, max_wait_s=0.2)
    release, running = threading.Event(), []

    @gateway.tool
    def hold() -> str:
        """Hold a slot until released."""
        running.append(1)
        release.wait(30)
        return "done"

    with ThreadPoolExecutor(6) as pool:
        futures = [pool.submit(gateway.execute_sync, call("hold", id=str(i))) for i in range(6)]
        deadline = time.monotonic() + 30
        while sum(f.done() for f in futures) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)  # the four that found no slot give up after max_wait_s; the two holders wait
        release.set()
        results = [f.result(timeout=30) for f in futures]

    assert sorted(r.status for r in results) == [ToolStatus.OK] * 2 + [ToolStatus.RATE_LIMITED] * 4
    assert gateway.bulkhead.peak_in_flight == 2 and gateway.bulkhead.in_flight == 0
    assert len(running) == 2


def test_the_breaker_opens_on_blocking_calls_and_refuses_awaited_ones_alike(clock):
    gateway = ToolGateway(clock=clock, breaker=BreakerConfig(failure_threshold=2, cooldown_s=30))

    @gateway.tool
    def down() -> str:
        """A backend that is down."""
        raise ConnectionError("refused")

    statuses = [gateway.execute_sync(call("down")).status for _ in range(3)]
    assert statuses == [ToolStatus.ERROR, ToolStatus.ERROR, ToolStatus.CIRCUIT_OPEN]
    assert asyncio.run(gateway.execute(call("down"))).status is ToolStatus.CIRCUIT_OPEN


def test_a_blocking_call_works_from_code_inside_a_running_event_loop():
    gateway = ToolGateway()

    @gateway.tool
    async def shout(text: str) -> str:
        """An async tool, run on the sync bridge's loop."""
        return text.upper()

    @gateway.tool
    def whisper(text: str) -> str:
        """A sync tool."""
        return text.lower()

    async def notebook_cell() -> list[str]:  # a sync library call made from a cell, as in Jupyter
        return [gateway.execute_sync(call("shout", {"text": "a"})).content,
                gateway.execute_sync(call("whisper", {"text": "B"})).content]

    assert asyncio.run(notebook_cell()) == ["A", "b"]


def test_a_users_ctrl_c_while_a_sync_tool_runs_stops_the_caller_and_leaves_the_thread_stuck():
    gateway = ToolGateway()
    release, started = threading.Event(), threading.Event()

    @gateway.tool(timeout_s=30)
    def hang() -> str:
        """Waits until released."""
        started.set()
        release.wait(30)
        return "late"

    def press_ctrl_c() -> None:
        started.wait(30)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # a user's Ctrl-C

    if threading.current_thread() is not threading.main_thread():
        pytest.fail("a Ctrl-C reaches only the main thread: this test must run on it")
    threading.Thread(target=press_ctrl_c, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            gateway.execute_sync(call("hang"))
        assert gateway.threads.stuck("hang") == 1, "the caller left; the tool's thread is stuck until it returns"
        assert gateway.bulkhead.in_flight == 0, "its slot was given back"
    finally:
        release.set()
