"""The gateway's happy paths and its pipeline, told as what a developer registering tools would see."""

from __future__ import annotations

import asyncio
import json
import logging
import threading

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from pydantic import BaseModel, Field

from reactgraph.tools import (
    BreakerConfig,
    ToolGateway,
    ToolMeta,
    ToolRegistrationError,
    ToolResult,
    ToolSession,
    ToolStatus,
)
from support.waits import until


class WeatherParams(BaseModel):
    city: str = Field(description="City name, e.g. Paris")
    days: int = Field(default=1, ge=1, le=7)


async def forecast(city: str, days: int = 1) -> dict:
    return {"city": city, "days": days, "sky": "clear"}


def call(name: str, args=None, id: str = "c1") -> dict:
    return {"name": name, "args": {} if args is None else args, "id": id}


class InFlight:
    """Counts how many calls of a tool are running at once, measured inside the tool."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0

    async def hold(self, seconds: float) -> None:
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            await asyncio.sleep(seconds)
        finally:
            self.now -= 1


# -- registering tools ------------------------------------------------------------------------------------------


async def test_a_typed_function_becomes_a_tool_whose_schema_comes_from_its_hints_and_docstring():
    gateway = ToolGateway()

    @gateway.tool
    def convert(amount: float, currency: str = "EUR") -> str:
        """Convert an amount of US dollars to another currency.

        Args:
            amount: How many US dollars.
            currency: ISO code of the target currency.
        """
        return f"{amount * 2:g} {currency}"

    [schema] = gateway.schemas()
    assert schema["type"] == "function"
    function = schema["function"]
    assert function["name"] == "convert"
    assert function["description"].startswith("Convert an amount of US dollars")
    assert function["parameters"]["required"] == ["amount"]
    assert function["parameters"]["properties"]["amount"]["type"] == "number"
    assert function["parameters"]["properties"]["amount"]["description"] == "How many US dollars."
    assert function["parameters"]["properties"]["currency"]["default"] == "EUR"

    result = await gateway.execute(call("convert", {"amount": 21}))
    assert result.ok and result.content == "42 EUR"
    assert convert(1) == "2 EUR", "the decorator leaves the function callable as before"


def test_tools_a_factory_makes_again_keep_each_its_own_defaults_docstring_and_name():
    """A function's contract is derived once and reused (a default gateway is made often); closures of one
    factory are told apart by what the contract is made of, not by their shared code."""

    def make_lookup(default_city: str, doc: str, name: str | None = None) -> ToolMeta:
        def lookup(city: str = default_city) -> str:
            return city

        lookup.__doc__ = doc
        return ToolMeta.from_function(lookup, name=name)

    first, again = make_lookup("Paris", "Look a city up."), make_lookup("Paris", "Look a city up.")
    other_default = make_lookup("Rome", "Look a city up.")
    other_doc, other_name = make_lookup("Paris", "Find a city."), make_lookup("Paris", "Look a city up.", "find")

    def contract(meta: ToolMeta) -> tuple[str, str, object]:
        return meta.name, meta.description, meta.openai_schema()["function"]["parameters"]["properties"]["city"]

    assert again.params_model is first.params_model, "the same contract is derived once"
    assert contract(first) == ("lookup", "Look a city up.", {"default": "Paris", "type": "string"})
    assert contract(other_default)[2]["default"] == "Rome"
    assert contract(other_doc)[1] == "Find a city."
    assert contract(other_name)[0] == "find"
    assert first.run("Oslo") == "Oslo" and again.run is not first.run, "each keeps its own function to run"

    def make_flag(default: bool | int) -> ToolMeta:
        def flag(on: bool | int = default) -> str:
            """Set a flag."""
            return str(on)

        return ToolMeta.from_function(flag)

    defaults = [make_flag(value).openai_schema()["function"]["parameters"]["properties"]["on"]["default"]
                for value in (1, True)]
    assert [type(value) for value in defaults] == [int, bool], "equal defaults of other types are other schemas"


async def test_the_decorator_takes_the_tools_limits():
    gateway = ToolGateway()

    @gateway.tool(timeout_s=2, tags=("math",), max_concurrency=1)
    async def double(x: int) -> int:
        """Double a number."""
        return 2 * x

    [meta] = gateway.tools()
    assert (meta.timeout_s, meta.tags, meta.max_concurrency, meta.is_async) == (2, ("math",), 1, True)
    assert (await gateway.execute(call("double", {"x": 21}))).value == 42


async def test_a_tool_meta_with_its_own_params_model_is_registered_as_given():
    gateway = ToolGateway([ToolMeta("weather", "Forecast for a city.", WeatherParams, forecast, tags=("web",))])

    schema = gateway.schemas()[0]["function"]["parameters"]
    assert schema["properties"]["city"]["description"] == "City name, e.g. Paris"
    result = await gateway.execute(call("weather", {"city": "Paris", "days": 3}))
    assert result.ok
    assert result.value == {"city": "Paris", "days": 3, "sky": "clear"}
    assert json.loads(result.content) == result.value, "non-string values reach the model as JSON"


async def test_langchain_tools_are_registered_and_run_through_the_pipeline():
    @tool
    def shout(text: str) -> str:
        """Say it louder."""
        return text.upper()

    class Whisper(BaseTool):
        name: str = "whisper"
        description: str = "Say it softer."

        def _run(self, text: str) -> str:
            return text.lower()

    gateway = ToolGateway([shout])
    gateway.register(Whisper())

    assert [s["function"]["name"] for s in gateway.schemas()] == ["shout", "whisper"]
    assert (await gateway.execute(call("shout", {"text": "hi"}))).content == "HI"
    assert (await gateway.execute(call("whisper", {"text": "HI"}))).content == "hi"
    invalid = await gateway.execute(call("shout", {"txt": "hi"}))
    assert invalid.status is ToolStatus.INVALID_ARGS, "the gateway validates LangChain tools like any other"
    status = {row["name"]: row for row in await gateway.status()}
    assert status["shout"]["metrics"]["calls"] == 2


def test_a_second_tool_with_the_same_name_is_refused_at_registration():
    gateway = ToolGateway([ToolMeta("weather", "Forecast.", WeatherParams, forecast)])

    with pytest.raises(ToolRegistrationError, match="already registered"):
        gateway.register(ToolMeta("weather", "Another forecast.", WeatherParams, forecast))

    with pytest.raises(ToolRegistrationError):
        @gateway.tool
        def weather(city: str) -> str:
            """A third forecast."""
            return city

    @tool("weather")
    def lc_weather(city: str) -> str:
        """A fourth forecast."""
        return city

    with pytest.raises(ToolRegistrationError):
        gateway.register(lc_weather)
    assert len(gateway.tools()) == 1


def test_a_tool_name_providers_would_reject_is_refused():
    with pytest.raises(ToolRegistrationError):
        ToolMeta("get weather!", "Forecast.", WeatherParams, forecast)


def test_the_model_is_shown_only_enabled_tools_its_session_may_use():
    gateway = ToolGateway([
        ToolMeta("weather", "Forecast.", WeatherParams, forecast, tags=("web",)),
        ToolMeta("archive", "Old forecasts.", WeatherParams, forecast, enabled=False),
        ToolMeta("almanac", "Sunrise times.", WeatherParams, forecast, tags=("offline",)),
    ])

    def names(session=None):
        return [s["function"]["name"] for s in gateway.schemas(session)]

    assert names() == ["weather", "almanac"]
    assert names(ToolSession.of(deny={"web"})) == ["almanac"]
    assert names(ToolSession.of(allow={"weather", "archive"})) == ["weather"]
    assert names(ToolSession.of(allow=())) == []
    assert [t.name for t in gateway.as_langchain_tools(ToolSession.of(deny={"almanac"}))] == ["weather"]


# -- running calls ----------------------------------------------------------------------------------------------


async def test_a_successful_call_reports_its_value_latency_and_attempts():
    gateway = ToolGateway([ToolMeta("weather", "Forecast.", WeatherParams, forecast)])

    result = await gateway.execute({"name": "weather", "args": {"city": "Oslo"}, "id": "call_7"})

    assert isinstance(result, ToolResult)
    assert (result.name, result.call_id, result.status, result.attempts) == ("weather", "call_7", ToolStatus.OK, 1)
    assert result.value["city"] == "Oslo" and result.value["days"] == 1, "defaults are filled in by validation"
    assert result.latency_ms > 0
    assert result.to_dict()["status"] == "ok" and "value" not in result.to_dict()


async def test_a_sync_tool_runs_on_a_worker_thread_not_on_the_event_loop():
    gateway = ToolGateway()

    @gateway.tool
    def where() -> str:
        """Name the thread this runs on."""
        return threading.current_thread().name

    result = await gateway.execute(call("where"))
    assert result.ok
    assert result.content != threading.current_thread().name


async def test_execute_many_runs_calls_together_and_answers_in_call_order():
    gateway = ToolGateway()
    inflight = InFlight()

    @gateway.tool
    async def nap(seconds: float) -> float:
        """Sleep a while."""
        await inflight.hold(seconds)
        return seconds

    naps = [0.4, 0.3, 0.2, 0.1, 0.0]
    results = await gateway.execute_many([call("nap", {"seconds": s}, id=f"c{i}") for i, s in enumerate(naps)])

    assert [r.value for r in results] == naps  # they finished in reverse order…
    assert [r.call_id for r in results] == ["c0", "c1", "c2", "c3", "c4"]  # …and answer in call order
    assert inflight.peak == len(naps), "the calls overlapped"
    assert await gateway.execute_many([]) == []


async def test_no_more_than_the_global_limit_of_calls_run_at_once():
    gateway = ToolGateway(max_concurrent=3)
    inflight = InFlight()

    @gateway.tool
    async def work() -> str:
        """Do a little work."""
        await inflight.hold(0.02)
        return "done"

    results = await gateway.execute_many([call("work", id=str(i)) for i in range(12)])

    assert all(r.ok for r in results)
    assert inflight.peak == 3
    assert gateway.bulkhead.peak_in_flight == 3
    assert gateway.bulkhead.in_flight == 0


async def test_the_global_limit_is_five_by_default():
    gateway = ToolGateway()
    inflight = InFlight()

    @gateway.tool
    async def work() -> str:
        """Do a little work."""
        await inflight.hold(0.02)
        return "done"

    await gateway.execute_many([call("work", id=str(i)) for i in range(12)])
    assert inflight.peak == gateway.bulkhead.peak_in_flight == 5


async def test_a_tool_can_have_a_tighter_limit_of_its_own():
    gateway = ToolGateway(max_concurrent=5)
    scraper, other = InFlight(), InFlight()

    @gateway.tool(max_concurrency=2)
    async def scrape() -> str:
        """Fetch a page from a fragile site."""
        await scraper.hold(0.03)
        return "page"

    @gateway.tool
    async def compute() -> str:
        """Something cheap."""
        await other.hold(0.03)
        return "ok"

    calls = [call("scrape", id=f"s{i}") for i in range(6)] + [call("compute", id=f"c{i}") for i in range(6)]
    results = await gateway.execute_many(calls)

    assert all(r.ok for r in results)
    assert scraper.peak == 2
    assert gateway.bulkhead.peak_in_flight <= 5


async def test_a_call_that_waits_too_long_for_a_slot_is_rate_limited_and_does_not_count_against_the_tool():
    gateway = ToolGateway(max_concurrent=1, max_wait_s=0.05)
    release = asyncio.Event()

    @gateway.tool
    async def slow() -> str:
        """Hold the only slot until released."""
        await release.wait()
        return "finally"

    holder = asyncio.create_task(gateway.execute(call("slow", id="holder")))
    await until(lambda: gateway.bulkhead.in_flight == 1)  # the holder has the only slot
    refused = [await gateway.execute(call("slow", id=f"r{i}")) for i in range(3)]
    release.set()

    assert [r.status for r in refused] == [ToolStatus.RATE_LIMITED] * 3
    assert "busy" in refused[0].content
    assert (await holder).ok
    [row] = await gateway.status()
    assert row["breaker"]["state"] == "closed"


# -- the order of the pipeline ----------------------------------------------------------------------------------


async def test_the_pipeline_checks_existence_then_permission_then_arguments_then_the_breaker(clock):
    gateway = ToolGateway([ToolMeta("weather", "Forecast.", WeatherParams, forecast, tags=("web",))],
                          clock=clock, breaker=BreakerConfig(failure_threshold=1, cooldown_s=30))
    no_web = ToolSession.of(deny={"web"})

    assert (await gateway.execute(call("nope", {"junk": True}), no_web)).status is ToolStatus.UNKNOWN_TOOL
    assert (await gateway.execute(call("weather", {"junk": True}), no_web)).status is ToolStatus.DENIED

    await gateway.breakers.for_tool("weather").record(ToolStatus.ERROR)  # the circuit is now open
    assert (await gateway.execute(call("weather", {"junk": True}))).status is ToolStatus.INVALID_ARGS
    assert (await gateway.execute(call("weather", {"city": "Rome"}))).status is ToolStatus.CIRCUIT_OPEN


# -- telemetry --------------------------------------------------------------------------------------------------


async def test_each_call_leaves_one_structured_log_record_with_secrets_and_long_values_redacted(caplog):
    gateway = ToolGateway()

    @gateway.tool
    def login(user: str, password: str, api_key: str = "", token: str = "", note: str = "") -> str:
        """Log in to a service."""
        return f"welcome {user}"

    caplog.set_level(logging.INFO, logger="reactgraph.tools")
    args = {"user": "ada", "password": "hunter2", "api_key": "sk-123", "token": "t0k", "note": "x" * 500}
    await gateway.execute(call("login", args, id="c1"), ToolSession(id="alice"))
    await gateway.execute(call("login", json.dumps(args), id="c2"), ToolSession(id="alice"))

    records = [r for r in caplog.records if r.name == "reactgraph.tools"]
    assert len(records) == 2
    first, second = (r.tool_call for r in records)
    assert {"tool", "session", "args_digest", "status", "latency_ms", "attempts"} <= first.keys()
    assert (first["tool"], first["session"], first["status"], first["attempts"]) == ("login", "alice", "ok", 1)
    assert first["args"]["password"] == first["args"]["api_key"] == first["args"]["token"] == "***"
    assert first["args"]["user"] == "ada"
    assert len(first["args"]["note"]) < 120
    assert second["args"] == first["args"], "arguments sent as a JSON string are redacted just the same"
    assert second["args_digest"] == first["args_digest"]
    logged = " ".join(f"{r.getMessage()} {r.tool_call}" for r in records)
    assert "hunter2" not in logged and "sk-123" not in logged and "x" * 100 not in logged


async def test_failures_are_logged_as_warnings(caplog):
    gateway = ToolGateway()

    @gateway.tool
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    caplog.set_level(logging.INFO, logger="reactgraph.tools")
    await gateway.execute(call("broken"))
    await gateway.execute(call("missing"))

    assert [(r.levelno, r.tool_call["status"]) for r in caplog.records] == [
        (logging.WARNING, "error"), (logging.WARNING, "unknown_tool")]


async def test_status_reports_per_tool_calls_failures_latency_percentiles_and_breaker_state():
    gateway = ToolGateway()

    @gateway.tool(tags=("demo",))
    async def flaky(fail: bool = False) -> str:
        """Succeeds unless told to fail."""
        if fail:
            raise RuntimeError("asked to fail")
        await asyncio.sleep(0.001)
        return "fine"

    for _ in range(8):
        await gateway.execute(call("flaky"))
    await gateway.execute(call("flaky", {"fail": True}))
    await gateway.execute(call("unknown"))

    [row] = await gateway.status()
    assert (row["name"], row["tags"], row["enabled"]) == ("flaky", ["demo"], True)
    metrics = row["metrics"]
    assert (metrics["calls"], metrics["failures"]) == (9, 1)
    assert metrics["by_status"] == {"ok": 8, "error": 1}
    assert 0 < metrics["p50_ms"] <= metrics["p95_ms"]
    assert row["breaker"] == {"state": "closed", "consecutive_failures": 1, "retry_in_s": None}
    assert row["schema"]["properties"]["fail"]["type"] == "boolean"


# -- LangChain ----------------------------------------------------------------------------------------------------


def langchain_gateway() -> ToolGateway:
    gateway = ToolGateway()

    @gateway.tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @gateway.tool
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    return gateway


async def test_wrapped_langchain_tools_still_go_through_the_gateway_and_never_raise():
    gateway = langchain_gateway()
    add, broken = gateway.as_langchain_tools()

    assert await add.ainvoke({"a": 2, "b": 3}) == "5"
    assert await broken.ainvoke({}) == "Tool broken failed: disk on fire"
    invalid = await add.ainvoke({"a": 2})
    assert invalid.startswith("Invalid arguments for add: b: Field required")
    message = await add.ainvoke({"name": "add", "args": {"a": 1, "b": 1}, "id": "t1", "type": "tool_call"})
    assert isinstance(message, ToolMessage) and (message.content, message.tool_call_id) == ("2", "t1")

    metrics = {row["name"]: row["metrics"] for row in await gateway.status()}
    assert metrics["add"]["by_status"] == {"ok": 2, "invalid_args": 1}
    assert metrics["broken"]["failures"] == 1


def test_wrapped_tools_also_work_when_invoked_synchronously():
    gateway = langchain_gateway()
    add, broken = gateway.as_langchain_tools()

    assert add.invoke({"a": 40, "b": 2}) == "42"
    assert broken.invoke({}) == "Tool broken failed: disk on fire"


class ScriptedModel(GenericFakeChatModel):
    """A chat model that replays fixed replies; binding tools changes nothing."""

    def bind_tools(self, tools, **kwargs):
        return self


async def test_a_langchain_agent_uses_gateway_tools_and_reads_failures_as_text():
    gateway = langchain_gateway()
    model = ScriptedModel(messages=iter([
        AIMessage(content="", tool_calls=[{"name": "add", "args": {"a": 2, "b": 3}, "id": "c1"},
                                          {"name": "broken", "args": {}, "id": "c2"}]),
        AIMessage(content="2 + 3 = 5; the other tool is broken."),
    ]))
    agent = create_agent(model, gateway.as_langchain_tools())

    state = await agent.ainvoke({"messages": [("user", "What is 2 + 3?")]})

    tool_messages = {m.tool_call_id: m.content for m in state["messages"] if isinstance(m, ToolMessage)}
    assert tool_messages == {"c1": "5", "c2": "Tool broken failed: disk on fire"}
    assert state["messages"][-1].content.startswith("2 + 3 = 5")
    metrics = {row["name"]: row["metrics"] for row in await gateway.status()}
    assert metrics["add"]["calls"] == 1 and metrics["broken"]["failures"] == 1
