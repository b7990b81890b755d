"""A stand-in `get_weather` for service tests: async (so cancelling a run stops it), logs each call, and is
slow for the cities in $SLOW_CITIES ($SLOW_S seconds, default 60), and for the cities in $BLOCK_CITIES holds its
event loop's thread for $BLOCK_S seconds (a synchronous sleep: nothing else on that loop runs meanwhile), and for
the cities in $CRASH_CITIES ends its whole process at once (a worker that crashes mid-run, every time).

Loaded into `reactgraph serve` / `reactgraph worker` with REACTGRAPH_TOOLS=support.service_tools:TOOLS (tests/ on
PYTHONPATH); the log is $SERVICE_LOG, one line per start and end of a call, with the process id.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from reactgraph.tools import ToolMeta


def _log(line: str) -> None:
    with Path(os.environ["SERVICE_LOG"]).open("a", encoding="utf-8") as log:
        log.write(f"{line} pid={os.getpid()}\n")


async def get_weather(city: str) -> dict:
    """Weather for a city (test double).

    Args:
        city: City name.
    """
    _log(f"start {city}")
    if city in [c for c in os.environ.get("CRASH_CITIES", "").split(",") if c]:
        os._exit(70)  # no cleanup, no lease released: as a process killed mid-call
    slow = [c for c in os.environ.get("SLOW_CITIES", "").split(",") if c]
    if city in slow:
        await asyncio.sleep(float(os.environ.get("SLOW_S", "60")))
    if city in [c for c in os.environ.get("BLOCK_CITIES", "").split(",") if c]:
        time.sleep(float(os.environ.get("BLOCK_S", "10")))  # noqa: ASYNC251 - blocking the loop is the point
    _log(f"done {city}")
    return {"found": True, "city": city, "condition": "晴", "temperature_c": 20, "humidity": 50, "wind": "-",
            "source": "service test"}


TOOLS = [ToolMeta.from_function(get_weather, timeout_s=600, max_attempts=1)]
