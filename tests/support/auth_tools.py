"""A `get_weather` for the auth tests that records who the graph ran for: the `langgraph_auth_user_id` its
config carries (LangGraph's `get_config()` inside the tool, as any tool of a user would read it).

Loaded with REACTGRAPH_TOOLS=support.auth_tools:TOOLS; one line per call in $SERVICE_LOG: `weather CITY user=ID`.
"""

from __future__ import annotations

import os
from pathlib import Path

from langgraph.config import get_config

from reactgraph.tools import ToolMeta


async def get_weather(city: str) -> dict:
    """Weather for a city (test double).

    Args:
        city: City name.
    """
    configurable = get_config().get("configurable") or {}
    user = configurable.get("langgraph_auth_user")
    with Path(os.environ["SERVICE_LOG"]).open("a", encoding="utf-8") as log:  # noqa: ASYNC230 (one short line)
        log.write(f"weather {city} user={configurable.get('langgraph_auth_user_id')} "
                  f"identity={getattr(user, 'identity', None)}\n")
    return {"found": True, "city": city, "condition": "晴", "temperature_c": 20, "humidity": 50, "wind": "-",
            "source": "auth test"}


TOOLS = [ToolMeta.from_function(get_weather, timeout_s=60, max_attempts=1)]
