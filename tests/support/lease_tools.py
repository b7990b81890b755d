"""A stand-in `get_weather` for session-lease tests: it notes each call and holds its turn until a gate opens.

Loaded into the real CLI with REACTGRAPH_TOOLS=support.lease_tools:TOOLS (tests/ on PYTHONPATH). With LEASE_GATE set,
a call waits (at most 60 s) until that file exists, so a test decides how long the first turn lasts.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from reactgraph.tools import ToolMeta


def get_weather(city: str) -> dict:
    """Weather for a city (test double).

    Args:
        city: City name.
    """
    with Path(os.environ["LEASE_LOG"]).open("a", encoding="utf-8") as log:
        log.write(f"start {city} {os.getpid()}\n")
    gate = os.environ.get("LEASE_GATE")
    deadline = time.monotonic() + 60
    while gate and not Path(gate).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return {"found": True, "city": city, "condition": "晴", "temperature_c": 20, "humidity": 50, "wind": "-",
            "source": "lease test"}


TOOLS = [ToolMeta.from_function(get_weather, timeout_s=120)]
