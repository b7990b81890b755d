"""Hostile tools: whatever a tool raises, however long it hangs and however much it returns, the gateway contains
it, and a user's Ctrl-C or a caller's cancellation still stops the run."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import redis
from langchain_core.messages import AIMessage, HumanMessage

from reactgraph.cli.app import main
from reactgraph.graph import Context, build_react_graph
from reactgraph.memory import RedisSaver
from reactgraph.tools import BreakerConfig, ToolError, ToolGateway, ToolStatus
from support.cli_env import clean_env
from support.scripted import ScriptedChatModel, tool_reply
from support.scripted import call as tool_call
from support.waits import until

REACTGRAPH = str(Path(sys.executable).parent / "reactgraph")
TESTS = str(Path(__file__).parent)
WEATHER_QUESTION = "北京的天气怎么样？"


def call(name: str, args: dict | None = None, id: str = "c1") -> dict:
    return {"name": name, "args": args or {}, "id": id}


class ToolTantrum(BaseException):
    """A BaseException of a tool's own, as some libraries define for control flow."""


RAISED = {
    "KeyboardInterrupt": KeyboardInterrupt,
    "SystemExit": lambda: SystemExit(3),
    "GeneratorExit": GeneratorExit,
    "ToolTantrum": lambda: ToolTantrum("no more"),
    "CancelledError": asyncio.CancelledError,
}


@pytest.fixture
def release():
    """An event the test's hanging tools wait on; set at teardown, so no thread outlives the test for long."""
    event = threading.Event()
    yield event
    event.set()


def gateway_with_echo(**options) -> ToolGateway:
    gateway = ToolGateway(**options)

    @gateway.tool
    def echo(text: str) -> str:
        """Say it back."""
        return text

    return gateway


async def echo_works(gateway: ToolGateway) -> bool:
    result = await gateway.execute(call("echo", {"text": "still here"}))
    return result.ok and result.content == "still here"


# -- whatever a tool raises becomes a result ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("raised", list(RAISED))
async def test_a_base_exception_a_tool_raises_is_an_error_result_and_the_gateway_carries_on(raised, kind):
    gateway = gateway_with_echo()
    make = RAISED[raised]

    if kind == "sync":
        @gateway.tool
        def explode() -> str:
            """Raises."""
            raise make()
    else:
        @gateway.tool
        async def explode() -> str:
            """Raises."""
            raise make()

    result = await gateway.execute(call("explode"))

    assert result.status is ToolStatus.ERROR
    assert result.detail["error_type"] == raised
    assert result.content.startswith(f"Tool explode failed: it raised {raised}")
    assert await echo_works(gateway)


async def test_a_cancelled_error_the_tool_raises_itself_is_its_error_and_does_not_cancel_the_caller():
    gateway = gateway_with_echo()

    @gateway.tool
    async def quits() -> str:
        """Gives up the way asyncio code does."""
        raise asyncio.CancelledError()

    result = await gateway.execute(call("quits"))

    assert result.status is ToolStatus.ERROR and result.detail["error_type"] == "CancelledError"
    assert asyncio.current_task().cancelling() == 0, "the caller's task was never asked to stop"
    assert await echo_works(gateway)


async def test_a_batch_in_which_tools_raise_system_exit_still_answers_every_call_in_order():
    gateway = gateway_with_echo()

    @gateway.tool
    def leave(code: int) -> str:
        """Calls sys.exit, as command-line code does."""
        sys.exit(code)

    @gateway.tool
    async def leave_async(code: int) -> str:
        """Calls sys.exit from a coroutine."""
        sys.exit(code)

    results = await gateway.execute_many([call("leave", {"code": 1}, "a"), call("echo", {"text": "hi"}, "b"),
                                          call("leave_async", {"code": 2}, "c")])

    assert [(r.call_id, r.status) for r in results] == [
        ("a", ToolStatus.ERROR), ("b", ToolStatus.OK), ("c", ToolStatus.ERROR)]
    assert results[0].content == "Tool leave failed: it raised SystemExit (1)."


async def test_a_sync_tool_raising_stop_iteration_is_an_error_not_a_hung_call():
    gateway = gateway_with_echo()

    @gateway.tool(timeout_s=30)
    def exhausted() -> str:
        """Reads past the end of an iterator."""
        return next(iter(()))

    started = time.monotonic()
    result = await gateway.execute(call("exhausted"))

    assert result.status is ToolStatus.ERROR and result.detail["error_type"] == "StopIteration"
    assert time.monotonic() - started < 10, "it came back at once, not at its 30 s timeout"


async def test_an_argument_validator_that_raises_anything_is_an_error_result():
    from pydantic import BaseModel, field_validator

    from reactgraph.tools import ToolMeta

    class Args(BaseModel):
        city: str

        @field_validator("city")
        @classmethod
        def check(cls, value: str) -> str:
            raise KeyboardInterrupt if value == "stop" else TypeError("cannot check")

    gateway = gateway_with_echo()
    gateway.register(ToolMeta(name="where", description="A place.", params_model=Args, run=lambda city: city))

    for city, raised in (("stop", "KeyboardInterrupt"), ("Oslo", "TypeError")):
        result = await gateway.execute(call("where", {"city": city}))
        assert result.status is ToolStatus.ERROR and result.detail["error_type"] == raised
    assert await echo_works(gateway)


# -- stopping from outside still stops ------------------------------------------------------------------------------


@pytest.mark.parametrize("stubborn", [False, True], ids=["plain", "tool-swallows-the-cancel"])
async def test_cancelling_the_caller_cancels_the_call_even_if_the_tool_turns_it_into_another_error(stubborn):
    gateway = gateway_with_echo()
    started = asyncio.Event()

    @gateway.tool(timeout_s=60)
    async def wait_forever() -> str:
        """Awaits a reply that never comes."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            if stubborn:
                raise SystemExit("I refuse to be cancelled") from None
            raise
        return "never"

    running = asyncio.create_task(gateway.execute(call("wait_forever")))
    await asyncio.wait_for(started.wait(), 10)
    running.cancel()

    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(running, 10)
    assert running.cancelled()
    assert await echo_works(gateway)


async def test_cancelling_a_call_of_a_hanging_sync_tool_leaves_its_thread_counted_as_stuck_until_it_returns(release):
    gateway = gateway_with_echo()
    started = threading.Event()

    @gateway.tool(timeout_s=60)
    def blocked() -> str:
        """Blocks on a lock nobody releases."""
        started.set()
        release.wait(60)
        return "late"

    running = asyncio.create_task(gateway.execute(call("blocked")))
    await until(started.is_set)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(running, 10)

    rows = {row["name"]: row for row in await gateway.status()}
    assert rows["blocked"]["stuck_threads"] == 1 and rows["echo"]["stuck_threads"] == 0
    release.set()
    await until(lambda: gateway.threads.stuck("blocked") == 0)


def run_cli_until_tool_starts(mode: str, tmp_path: Path) -> tuple[subprocess.Popen, str]:
    log = tmp_path / "tool.log"
    env = clean_env(HOSTILE_MODE=mode, HOSTILE_LOG=str(log), REACTGRAPH_TOOLS="support.hostile_tools:TOOLS",
                    PYTHONPATH=os.pathsep.join(filter(None, [TESTS, os.environ.get("PYTHONPATH")])))
    process = subprocess.Popen([REACTGRAPH, "ask", WEATHER_QUESTION, "--store", "memory", "--json"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (log.exists() and log.read_text().strip()):
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise AssertionError(f"the tool never started: {process.communicate()}")
        time.sleep(0.02)
    return process, log.read_text()


@pytest.mark.parametrize("mode", ["hang_long", "spin", "elsewhere"])
def test_a_users_ctrl_c_stops_the_cli_while_a_tool_hangs(mode, tmp_path):
    """`hang_long`: a sync tool blocked on its thread; `spin`: an async tool that never yields its thread; `elsewhere`:
    one that sleeps on its thread, the only one that takes a Ctrl-C (not the main thread, Python's handlers'). The first
    Ctrl-C asks the turn to stop after the step under way, which never ends here; the second stops the process at
    once, with the line that says how to resume, and the Ctrl-C is never taken for the tool's error."""
    process, _started = run_cli_until_tool_starts(mode, tmp_path)
    said: list[str] = []  # stderr, line by line, as it comes
    reader = threading.Thread(target=lambda: said.extend(iter(process.stderr.readline, "")), daemon=True)
    reader.start()
    try:
        process.send_signal(signal.SIGINT)
        # The second is sent once the first was handled: two pending SIGINTs would be one (on a busy machine the
        # process may take more than a second to get to it).
        deadline = time.monotonic() + 30
        while not any("stopping after the step under way" in line for line in said) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert process.poll() is None, said  # the first only asks the turn to stop after its step
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
        reader.join(10)
        out, err = process.stdout.read(), "".join(said)
    finally:
        process.kill()
    assert process.returncode == 130, (out, err)
    assert "stopping after the step under way (Ctrl-C again stops at once)" in err
    assert "interrupted: the turn is saved up to its last finished step" in err
    assert "failed: it raised KeyboardInterrupt" not in out, "the Ctrl-C was taken for the tool's error"


def test_a_hanging_sync_tool_does_not_keep_the_cli_from_exiting_after_its_answer(tmp_path):
    log = tmp_path / "tool.log"
    env = clean_env(HOSTILE_MODE="hang", HOSTILE_LOG=str(log), REACTGRAPH_TOOLS="support.hostile_tools:TOOLS",
                    PYTHONPATH=os.pathsep.join(filter(None, [TESTS, os.environ.get("PYTHONPATH")])))
    # The tool's thread sleeps for an hour; the bound here is a minute, so the process must exit without it.
    done = subprocess.run([REACTGRAPH, "ask", WEATHER_QUESTION, "--store", "memory", "--json"], env=env,
                          capture_output=True, text=True, timeout=60)

    payload = json.loads(done.stdout)
    # the weather never came, and the answer says so: `no_answer`, exit code 1 (not a hang)
    assert (done.returncode, payload["status"]) == (1, "no_answer"), done.stderr
    assert [s["status"] for s in payload["steps"] if s["action"] == "get_weather"] == ["timeout"]
    assert log.read_text().startswith("start hang reactgraph-tool-")


# -- stuck threads never starve the other tools ------------------------------------------------------------------


def hanging_tool(gateway: ToolGateway, name: str, release: threading.Event, runs: list[str]) -> None:
    def hang(n: int = 0) -> str:
        runs.append(name)
        release.wait(60)
        return "late"

    hang.__doc__ = "Waits on a backend that never answers."
    gateway.register(hang, name=name, timeout_s=0.2)


async def test_a_tool_with_too_many_stuck_threads_fails_fast_and_the_other_tools_still_run(release):
    gateway = gateway_with_echo(max_stuck_per_tool=2, breaker=BreakerConfig(failure_threshold=100))
    runs: list[str] = []
    hanging_tool(gateway, "hang", release, runs)

    statuses = [(await gateway.execute(call("hang", {"n": i}))).status for i in range(2)]
    refused = await gateway.execute(call("hang", {"n": 3}))

    assert statuses == [ToolStatus.TIMEOUT, ToolStatus.TIMEOUT]
    assert refused.status is ToolStatus.ERROR and refused.detail["reason"] == "stuck threads"
    assert "not responding: 2 earlier call(s) are still running past their 0.2s timeout" in refused.content
    assert runs == ["hang", "hang"], "the refused call never ran"
    assert all(r.ok for r in await gateway.execute_many([call("echo", {"text": "x"}, str(i)) for i in range(8)]))
    assert {row["name"]: row["stuck_threads"] for row in await gateway.status()} == {"echo": 0, "hang": 2}

    release.set()  # the backend answers at last: the threads come back and the tool may run again
    await until(lambda: gateway.threads.stuck() == 0)
    release.clear()
    assert (await gateway.execute(call("hang", {"n": 4}))).status is ToolStatus.TIMEOUT
    assert runs.count("hang") == 3


async def test_stuck_threads_never_take_the_threads_of_tools_that_return(release):
    # Two threads for awaited calls; once two threads are stuck, no tool that has a stuck thread gets another.
    gateway = gateway_with_echo(max_threads=2, max_stuck_per_tool=2, breaker=BreakerConfig(failure_threshold=100))
    runs: list[str] = []
    for name in ("hang_a", "hang_b", "hang_c"):
        hanging_tool(gateway, name, release, runs)

    results = [await gateway.execute(call(name)) for name in ("hang_a", "hang_a", "hang_b", "hang_b", "hang_a")]

    assert runs == ["hang_a", "hang_a", "hang_b"]
    assert [r.detail.get("reason") for r in results] == [None, None, None, "stuck threads", "stuck threads"]
    assert gateway.threads.stuck() == 3
    echoed = await gateway.execute_many([call("echo", {"text": "x"}, str(i)) for i in range(6)])
    assert all(r.ok for r in echoed), "the tools that return still get their two threads"
    assert (await gateway.execute(call("hang_c"))).status is ToolStatus.TIMEOUT, "a tool with none stuck may run"
    assert gateway.threads.counts()["threads"] <= 2 + gateway.threads.stuck()


async def test_sync_tools_never_run_on_more_threads_than_the_limit():
    gateway = ToolGateway(max_concurrent=20, max_threads=3)
    running, peak = [0], [0]
    lock = threading.Lock()

    @gateway.tool
    def work(n: int) -> int:
        """Takes a moment."""
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1
        return n

    results = await gateway.execute_many([call("work", {"n": i}, str(i)) for i in range(20)])

    assert [r.value for r in results] == list(range(20))
    assert peak[0] <= 3 and gateway.threads.counts()["threads"] <= 3


def test_reactgraph_tools_shows_the_stuck_threads_of_each_tool(capsys):
    assert main(["tools", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(row["stuck_threads"] == 0 for row in rows)
    assert main(["tools", "--wide"]) == 0  # the narrow table keeps what a glance needs; --wide has every column
    assert "stuck" in capsys.readouterr().out


# -- the breaker is asked again after the wait for a slot ---------------------------------------------------------


async def test_forty_calls_of_a_hanging_tool_in_one_reply_run_one_batch_then_end_circuit_open(release):
    gateway = gateway_with_echo()  # 5 calls in flight at once, the breaker opens after 2 failures
    runs: list[str] = []
    hanging_tool(gateway, "hang", release, runs)
    model = ScriptedChatModel.of(tool_reply("all at once", *[tool_call("hang", f"c{i}", n=i) for i in range(40)]),
                                 AIMessage("The backend is down."))
    graph = build_react_graph(gateway, model=model)

    result = await graph.ainvoke({"messages": [HumanMessage("check all 40")]}, context=Context(reflection="rules"),
                                 config={"configurable": {"thread_id": uuid.uuid4().hex}})

    statuses = [step["status"] for step in result["steps"] if step["action"] == "hang"]
    # The first 5 run at once. When the first of them times out, the breaker has 1 failure of the 2 that open
    # it, so the call that takes its slot may still run; once the circuit is open, no queued call runs.
    assert len(runs) in (5, 6)
    assert len(statuses) == 40
    assert statuses.count("timeout") == len(runs) and statuses.count("circuit_open") == 40 - len(runs)
    assert await echo_works(gateway), "another sync tool still gets a thread"


async def test_a_call_that_waited_becomes_the_probe_if_the_cool_down_passed_meanwhile(clock):
    gateway = gateway_with_echo(clock=clock, max_concurrent=1, breaker=BreakerConfig(failure_threshold=1,
                                                                                       cooldown_s=30))
    release_slot = asyncio.Event()

    @gateway.tool
    async def hog() -> str:
        """Holds the only concurrency slot."""
        await release_slot.wait()
        return "done"

    @gateway.tool
    async def weather() -> str:
        """Sunny."""
        return "sunny"

    hogging = asyncio.create_task(gateway.execute(call("hog")))
    await until(lambda: gateway.bulkhead.in_flight == 1)
    queued = asyncio.create_task(gateway.execute(call("weather")))  # admitted while closed, then waits
    await asyncio.sleep(0.01)
    await gateway.breakers.for_tool("weather").record(ToolStatus.ERROR)  # another worker's failure opens it
    clock.advance(30)
    release_slot.set()

    assert (await queued).ok, "admitted again after its wait, as the half-open probe"
    await hogging
    assert {row["name"]: row["breaker"]["state"] for row in await gateway.status()}["weather"] == "closed"


# -- results are bounded before they leave the gateway ---------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_huge_result_is_cut_and_says_how_much_of_how_much_was_kept(kind):
    gateway = ToolGateway()

    if kind == "sync":
        @gateway.tool
        def dump() -> str:
            """Returns everything it has."""
            return "x" * 3_000_000
    else:
        @gateway.tool
        async def dump() -> str:
            """Returns everything it has."""
            return "x" * 3_000_000

    result = await gateway.execute(call("dump"))

    assert result.ok and result.value is None, "the raw value is dropped with the cut"
    assert result.content.startswith("x" * 1_000_000) and len(result.content) < 1_000_200
    assert "the first 1,000,000 of 3,000,000 characters are shown" in result.content
    assert result.detail["cut"] == {"kept_chars": 1_000_000, "total_chars": 3_000_000}


async def test_a_tool_may_set_a_tighter_limit_and_an_error_message_is_cut_too():
    gateway = ToolGateway(max_result_chars=5_000)

    @gateway.tool(max_result_chars=100)
    def rows() -> list:
        """Lists every row."""
        return [{"id": i} for i in range(1_000)]

    @gateway.tool
    def shout() -> str:
        """Fails at length."""
        raise ToolError("!" * 50_000)

    listed, failed = await gateway.execute(call("rows")), await gateway.execute(call("shout"))

    assert listed.ok and listed.content.startswith('[{"id":0},') and listed.detail["cut"]["kept_chars"] == 100
    assert failed.status is ToolStatus.ERROR and failed.detail["cut"]["kept_chars"] == 5_000
    assert {row["name"]: row["max_result_chars"] for row in await gateway.status()} == {"rows": 100, "shout": 5_000}


def test_a_20_mb_result_through_a_graph_with_the_redis_saver_leaves_redis_small(redis_url, redis_prefix):
    gateway = ToolGateway()

    @gateway.tool
    def dump() -> str:
        """Returns a whole database export."""
        return "row;" * 5_000_000  # 20 MB

    model = ScriptedChatModel.of(tool_reply("export it", tool_call("dump")), AIMessage("It is a big export."))
    thread = uuid.uuid4().hex
    with RedisSaver.from_url(redis_url, prefix=redis_prefix) as saver:
        graph = build_react_graph(gateway, checkpointer=saver, model=model)
        result = graph.invoke({"messages": [HumanMessage("export the database")]}, context=Context(reflection="rules"),
                              config={"configurable": {"thread_id": thread}})
    assert result["final_answer"] == "It is a big export."

    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{redis_prefix}*", count=500))
        stored = sum(client.memory_usage(key, samples=0) or 0 for key in keys)
    finally:
        client.close()
    assert keys and stored < 4_000_000, f"{stored:,} bytes stored for one 20 MB result"
