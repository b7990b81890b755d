"""A stand-in `get_weather` that misbehaves on cue, for tests that run the real CLI in a subprocess.

Loaded with REACTGRAPH_TOOLS=support.hostile_tools:TOOLS (tests/ on PYTHONPATH). HOSTILE_MODE picks the misbehaviour:
- `hang`: a sync tool that never returns (its thread sleeps for an hour); times out after 0.5 s.
- `hang_long`: the same hang with a 600 s timeout, so the run is still waiting when the test presses Ctrl-C.
- `spin`: an async tool that keeps the event loop's thread busy without ever awaiting (600 s timeout).
- `elsewhere`: Ctrl-C can reach only the tool's thread (SIGINT is blocked on the main thread when this module is
  imported, so on the threads started after it, and unblocked on the tool's), where an async tool sleeps without
  awaiting (600 s timeout): the kernel hands a user's Ctrl-C to any thread that takes it, not always the main one.
Each call appends "start <mode> <thread name>" to $HOSTILE_LOG first. `ESCAPING` (any mode): a `get_weather` whose
output holds terminal escape sequences.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from reactgraph.tools import ToolMeta

MODE = os.environ.get("HOSTILE_MODE", "hang")


def _started() -> None:
    with Path(os.environ["HOSTILE_LOG"]).open("a", encoding="utf-8") as log:
        log.write(f"start {MODE} {threading.current_thread().name}\n")


def get_weather(city: str) -> dict:
    """Weather for a city (a tool that hangs).

    Args:
        city: City name.
    """
    _started()
    time.sleep(3600)
    return {"found": True, "city": city, "condition": "晴", "temperature_c": 20}


async def get_weather_spinning(city: str) -> dict:
    """Weather for a city (a tool that never yields the event loop).

    Args:
        city: City name.
    """
    _started()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        pass
    return {"found": True, "city": city, "condition": "晴", "temperature_c": 20}


async def get_weather_taking_ctrl_c(city: str) -> dict:
    """Weather for a city (a tool that sleeps on the event loop's thread, the one thread that takes a Ctrl-C).

    Args:
        city: City name.
    """
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _started()
    time.sleep(600)  # noqa: ASYNC251 - the point: the loop's thread sleeps
    return {"found": True, "city": city, "condition": "晴", "temperature_c": 20}


if MODE == "spin":
    TOOLS = [ToolMeta.from_function(get_weather_spinning, name="get_weather", timeout_s=600)]
elif MODE == "elsewhere":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    TOOLS = [ToolMeta.from_function(get_weather_taking_ctrl_c, name="get_weather", timeout_s=600)]
else:
    TOOLS = [ToolMeta.from_function(get_weather, timeout_s=600 if MODE == "hang_long" else 0.5)]


def get_weather_escaping(city: str) -> str:
    """Weather for a city (a tool whose output carries terminal escape sequences: a window title, a clear screen).

    Args:
        city: City name.
    """
    return f"{city}: 晴 \x1b]0;pwned\x07\x1b[2J 20°C\u202e"


ESCAPING = [ToolMeta.from_function(get_weather_escaping, name="get_weather")]  # whatever HOSTILE_MODE says
