"""`get_weather`: current weather for a city, from offline sample data or a configured live service."""

from __future__ import annotations

import json
import os
import re
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from reactgraph._tls import shared_ssl_context
from reactgraph.tools.builtin.http_get import read_capped
from reactgraph.tools.call import ToolError, ToolInputError, ToolRegistrationError, TransientToolError
from reactgraph.tools.meta import ToolMeta

WEATHER_URL_ENV = "REACTGRAPH_WEATHER_URL"
OFFLINE_SOURCE = "offline sample data"
LIVE_TIMEOUT_S = 8.0
MAX_CITY_CHARS = 100
_MAX_RESPONSE_BYTES = 1_000_000
_DATA = Path(__file__).with_name("data") / "weather.json"
_CJK = re.compile(r"[\u3400-\u9fff]")
# Stripped repeatedly, so "北京市天气" and "Beijing city weather" both come down to the city.
_SUFFIXES = ("的天气", "天气", "weather", "市", "city")


def _key(name: str) -> str:
    """Matching key: case, width, spacing and punctuation removed ("Xi'an" == "xian", "北京市" == "北京")."""
    text = unicodedata.normalize("NFKC", name).casefold().split(",")[0].strip()
    stripped = True
    while stripped:
        stripped = False
        for suffix in _SUFFIXES:
            if text.endswith(suffix) and len(text) > len(suffix):
                text, stripped = text[: -len(suffix)].strip(), True
    return "".join(char for char in text if char.isalnum())


@lru_cache(maxsize=1)
def _cities() -> tuple[dict[str, dict[str, Any]], tuple[dict[str, Any], ...]]:
    entries = tuple(json.loads(_DATA.read_text(encoding="utf-8"))["cities"])
    index = {_key(name): entry for entry in entries
             for name in (entry["zh"], entry["en"], *entry["aliases"])}
    return index, entries


def _language(text: str) -> str:
    return "zh" if _CJK.search(text) else "en"


def offline_weather(city: str) -> dict[str, Any]:
    """Look `city` up in the bundled sample data; answer in the language of the question."""
    lang = _language(city)
    index, entries = _cities()
    entry = index.get(_key(city))
    if entry is None:
        return {"found": False, "city": city,
                "message": f"no weather data for {city} (the offline sample data has only the known_cities)",
                "known_cities": [e[lang] for e in entries]}
    return {"found": True, "city": entry[lang], "condition": entry["condition"][lang],
            "temperature_c": entry["temperature_c"], "humidity": entry["humidity"],
            "wind": entry["wind"][lang], "source": OFFLINE_SOURCE}


async def live_weather(url_template: str, city: str, *, timeout_s: float = LIVE_TIMEOUT_S,
                       transport: httpx.AsyncBaseTransport | None = None) -> dict[str, Any]:
    """Ask a wttr.in-style JSON service (`?format=j1`); `{city}` in the template is the URL-quoted city."""
    url = url_template.replace("{city}", quote(city, safe=""))
    host = httpx.URL(url).host
    try:
        client = httpx.AsyncClient(timeout=timeout_s, transport=transport, verify=shared_ssl_context(httpx))
        async with client, client.stream("GET", url, headers={"Accept": "application/json"}) as response:
            if response.status_code >= 500:
                raise TransientToolError(f"weather service {host} answered HTTP {response.status_code}")
            if response.status_code == 404:
                return {"found": False, "city": city, "message": f"no weather data for {city} ({host} "
                        "does not know this place)", "known_cities": []}
            if response.status_code >= 400:
                raise ToolError(f"weather service {host} answered HTTP {response.status_code}")
            body, truncated = await read_capped(response, _MAX_RESPONSE_BYTES)
    except httpx.TransportError as exc:
        raise TransientToolError(f"weather service {host} unreachable: {exc!r}") from exc
    if truncated:
        raise ToolError(f"weather service {host} sent an oversized response")
    return _parse_wttr(body, city, host)


def _parse_wttr(body: bytes, city: str, host: str) -> dict[str, Any]:
    try:
        current = json.loads(body)["current_condition"][0]
        descriptions = (_language(city) == "zh" and current.get("lang_zh")) or current["weatherDesc"]
        return {"found": True, "city": city, "condition": descriptions[0]["value"],
                "temperature_c": int(current["temp_C"]), "humidity": int(current["humidity"]),
                "wind": f"{current['winddir16Point']} {current['windspeedKmph']} km/h", "source": host}
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ToolError(f"weather service {host} sent an unexpected response ({exc!r})") from exc


def get_weather_tool(url: str | None = None, *, timeout_s: float = LIVE_TIMEOUT_S,
                     transport: httpx.AsyncBaseTransport | None = None) -> ToolMeta:
    """The `get_weather` tool: offline sample data unless a live service URL is configured.

    `url` is a template such as "https://wttr.in/{city}?format=j1&lang=zh"; None reads
    REACTGRAPH_WEATHER_URL, and "" forces the offline data even when that variable is set.
    """
    template = os.environ.get(WEATHER_URL_ENV, "") if url is None else url
    if template and "{city}" not in template:
        raise ToolRegistrationError(f"weather URL {template!r} needs a {{city}} placeholder")

    async def get_weather(city: str) -> dict[str, Any]:
        """Get the current weather (condition, temperature in °C, humidity, wind) for one city.

        Call it once per city to compare cities. "source" says where the data comes from ("offline
        sample data" is not a live observation: mention that). "found": false means there is no data
        for that place: say so rather than guessing.

        Args:
            city: One city name in Chinese or English, e.g. "北京", "上海", "Shanghai", "New York".
                Just the city: no dates, no "weather" and no country.
        """
        city = " ".join(city.split())
        if not city:
            raise ToolInputError("city is empty; name one city, e.g. 北京 or London")
        if len(city) > MAX_CITY_CHARS:
            raise ToolInputError(f"city name is too long (limit {MAX_CITY_CHARS} characters)")
        if template:
            return await live_weather(template, city, timeout_s=timeout_s, transport=transport)
        return offline_weather(city)

    live = bool(template)
    return ToolMeta.from_function(
        get_weather, timeout_s=timeout_s + 2 if live else 2.0,
        tags=("weather", "network") if live else ("weather",), max_attempts=3 if live else 1,
        extra={"source": httpx.URL(template).host if live else OFFLINE_SOURCE})
