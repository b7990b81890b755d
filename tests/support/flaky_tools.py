"""A `get_weather` that fails on cue, loaded by CLI tests with `--tools support.flaky_tools:FLAKY` (or `:DOWN`)."""

from __future__ import annotations

from reactgraph.tools import ToolMeta
from reactgraph.tools.call import TransientToolError

_calls: dict[str, int] = {}


def reset() -> None:
    _calls.clear()


async def get_weather(city: str) -> dict:
    """Weather for a city (fails twice per city, then answers).

    Args:
        city: City name.
    """
    _calls[city] = _calls.get(city, 0) + 1
    if _calls[city] <= 2:
        raise TransientToolError("weather service hiccup")
    return {"found": True, "city": city, "condition": "晴", "temperature_c": 20}


async def get_weather_down(city: str) -> dict:
    """Weather for a city (always fails).

    Args:
        city: City name.
    """
    raise RuntimeError("weather service down")


FLAKY = [ToolMeta.from_function(get_weather, max_attempts=3)]
DOWN = [ToolMeta.from_function(get_weather_down, name="get_weather", max_attempts=1)]
