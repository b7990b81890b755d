"""Tools described by JSON schema: sent to the model unchanged, enforced with jsonschema, in-band errors honest."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import StructuredTool, ToolException

from reactgraph.tools import BreakerConfig, ToolGateway, ToolMeta, ToolRegistrationError, ToolStatus

FORECAST = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1, "description": "Where."},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
        "units": {"enum": ["metric", "imperial"]},
        "where": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]},
    },
    "required": ["city"],
    "additionalProperties": False,
}
_calls: list[dict[str, Any]] = []


def forecast(**kwargs: Any) -> str:
    _calls.append(kwargs)
    return f"{kwargs['city']}: sunny for {kwargs.get('days', 1)} day(s)"


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": "c1"}


@pytest.fixture(autouse=True)
def _reset_calls():
    _calls.clear()


async def test_a_json_schema_tool_reaches_the_model_unchanged_and_runs_with_valid_arguments():
    gateway = ToolGateway([ToolMeta.from_json_schema("forecast", "Forecast for a city.", FORECAST, forecast)])

    assert gateway.schemas()[0]["function"]["parameters"] == FORECAST
    result = await gateway.execute(call("forecast", city="Oslo", days=2, where={"lat": 59.9}))

    assert (result.status, result.content) == (ToolStatus.OK, "Oslo: sunny for 2 day(s)")
    assert _calls == [{"city": "Oslo", "days": 2, "where": {"lat": 59.9}}]


async def test_arguments_against_the_schema_are_invalid_args_with_each_field_error_and_the_tool_never_runs():
    gateway = ToolGateway([ToolMeta.from_json_schema("forecast", "Forecast.", FORECAST, forecast)])

    result = await gateway.execute(call("forecast", days=0, units="kelvin", where={}, extra=1))

    assert result.status is ToolStatus.INVALID_ARGS and _calls == []
    locs = {tuple(e["loc"]): e["msg"] for e in result.detail["field_errors"]}
    assert set(locs) >= {(), ("days",), ("units",), ("where",)}
    assert "'city' is a required property" in result.content
    assert "days: 0 is less than the minimum of 1" in result.content
    assert result.content.startswith("Invalid arguments for forecast: ")
    assert "Expected arguments: city: string (required), days: integer" in result.content
    assert result.content.endswith("Fix the arguments and call again.")
    metrics = {row["name"]: row["metrics"] for row in await gateway.status()}
    assert metrics["forecast"]["failures"] == 0  # the model's mistake never counts against the tool


async def test_field_errors_for_huge_or_many_bad_values_stay_short():
    gateway = ToolGateway([ToolMeta.from_json_schema("forecast", "Forecast.", FORECAST, forecast)])

    result = await gateway.execute(call("forecast", city=["x" * 100_000], days="y" * 100_000, units=[1] * 10_000))

    assert result.status is ToolStatus.INVALID_ARGS
    assert len(result.content) < 2_000 and len(result.detail["field_errors"]) <= 5


@pytest.mark.parametrize(("schema", "said"), [
    ({"type": "object", "properties": {"city": {"type": "strin"}}}, "properties/city/type"),
    ({"type": "object", "required": "city"}, "required"),
    ({"type": "array"}, "must describe an object"),
    ("not a schema", "must be an object"),
])
def test_an_invalid_schema_is_refused_at_registration_in_one_line(schema: Any, said: str):
    with pytest.raises(ToolRegistrationError) as raised:
        ToolGateway().register(ToolMeta.from_json_schema("forecast", "Forecast.", schema, forecast))

    message = str(raised.value)
    assert "\n" not in message and said in message and message.startswith("tool 'forecast'")


def test_a_tool_needs_exactly_one_argument_contract():
    with pytest.raises(ToolRegistrationError, match="exactly one of params_model and json_schema"):
        ToolMeta(name="forecast", description="Forecast.", params_model=None, run=forecast)


async def test_a_langchain_tool_with_a_dict_schema_registers_with_its_real_parameters():
    tool = StructuredTool.from_function(func=forecast, name="forecast", description="Forecast.", args_schema=FORECAST)
    gateway = ToolGateway([tool])

    assert gateway.schemas()[0]["function"]["parameters"] == FORECAST  # not a root model's {"anyOf": ...}
    ok = await gateway.execute(call("forecast", city="Oslo"))
    bad = await gateway.execute(call("forecast", city=""))

    assert (ok.status, ok.content) == (ToolStatus.OK, "Oslo: sunny for 1 day(s)")
    assert _calls == [{"city": "Oslo"}]  # never wrapped as {"root": ...}
    assert bad.status is ToolStatus.INVALID_ARGS and bad.detail["field_errors"][0]["loc"] == ["city"]


async def test_the_projects_own_langchain_tools_re_register_into_another_gateway():
    inner = ToolGateway()

    @inner.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @inner.tool
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    outer = ToolGateway(inner.as_langchain_tools())

    assert outer.schemas() == inner.schemas()
    assert (await outer.execute(call("add", a=2, b=3))).content == "5"
    invalid = await outer.execute(call("add", a=2))
    assert invalid.status is ToolStatus.INVALID_ARGS and "'b' is a required property" in invalid.content
    assert invalid.detail["field_errors"] == [{"loc": [], "msg": "'b' is a required property"}]
    failed = await outer.execute(call("broken"))
    assert (failed.status, failed.content) == (ToolStatus.ERROR, "Tool broken failed: disk on fire")


def _raises_unhandled(city: str) -> str:
    raise ToolException(f"no station in {city}")


def _returns_error_message(city: str) -> ToolMessage:
    return ToolMessage(f"upstream 503 for {city}", tool_call_id="x", status="error")


def _error_looking_content(city: str) -> tuple[str, dict]:
    return f"error: none, {city} is fine", {"raw": city}


IN_BAND = {
    "unhandled ToolException": StructuredTool.from_function(func=_raises_unhandled, name="station",
                                                            description="A station."),
    "handled ToolException": StructuredTool.from_function(func=_raises_unhandled, name="station",
                                                          description="A station.", handle_tool_error=True),
    "ToolMessage status error": StructuredTool.from_function(func=_returns_error_message, name="station",
                                                              description="A station."),
}


@pytest.mark.parametrize("kind", IN_BAND)
async def test_errors_a_langchain_tool_signals_in_band_are_error_results_and_open_the_breaker(kind: str):
    gateway = ToolGateway([IN_BAND[kind]], breaker=BreakerConfig(failure_threshold=3, cooldown_s=600))

    results = [await gateway.execute(call("station", city="Oslo")) for _ in range(4)]

    assert [r.status for r in results] == [ToolStatus.ERROR] * 3 + [ToolStatus.CIRCUIT_OPEN]
    assert results[0].content.startswith("Tool station failed: ") and "Oslo" in results[0].content
    snap = await gateway.breakers.for_tool("station").snapshot()
    assert snap.state == "open"


async def test_content_that_merely_reads_like_an_error_is_the_tools_answer():
    tool = StructuredTool.from_function(func=_error_looking_content, name="station", description="A station.",
                                        response_format="content_and_artifact")
    gateway = ToolGateway([tool])

    result = await gateway.execute(call("station", city="Oslo"))

    assert (result.status, result.content) == (ToolStatus.OK, "error: none, Oslo is fine")
