"""A stand-in `get_weather` for durability tests: it logs each call and can hang or stop Redis on cue.

Loaded into the real CLI with REACTGRAPH_TOOLS=support.durable_tools:TOOLS (tests/ on PYTHONPATH).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import redis

from reactgraph.tools import ToolMeta


def _log(line: str) -> None:
    with Path(os.environ["DURABLE_LOG"]).open("a", encoding="utf-8") as log:
        log.write(line + "\n")


def get_weather(city: str) -> dict:
    """Weather for a city (test double).

    Args:
        city: City name.
    """
    _log(f"start {city}")
    if city == os.environ.get("HANG_CITY"):
        time.sleep(300)
    if city == os.environ.get("STOP_REDIS_CITY"):
        marker = Path(os.environ["DURABLE_LOG"] + ".stopped")
        if not marker.exists():
            marker.touch()
            redis.Redis.from_url(os.environ["REDIS_URL"]).shutdown(save=True)
    _log(f"done {city}")
    return {"found": True, "city": city, "condition": "晴", "temperature_c": 20 if city == "上海" else 10,
            "humidity": 50, "wind": "-", "source": "durability test"}


TOOLS = [ToolMeta.from_function(get_weather, timeout_s=600)]
