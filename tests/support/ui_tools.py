"""Tools for the debugger page's test: a `get_weather` whose output is hostile HTML (an `<img onerror>` and a
`<script>`: the page must show it as text), and an `http_get` that may fetch 127.0.0.1 and asks a person first
(http_get's default), for an approval given from the page.

Loaded with REACTGRAPH_TOOLS=support.ui_tools:TOOLS (tests/ on PYTHONPATH).
"""

from __future__ import annotations

from reactgraph.tools import ToolMeta
from reactgraph.tools.builtin.http_get import http_get_tool

HOSTILE = ('<img src=x onerror="window.__pwned = 1"><script>window.__pwned = 2</script>'
           '<b onmouseover="window.__pwned = 3">晴</b> 20°C')


def get_weather(city: str) -> str:
    """Weather for a city (its report carries markup and script).

    Args:
        city: City name.
    """
    return f"{city}: {HOSTILE}"


TOOLS = [ToolMeta.from_function(get_weather, name="get_weather"), http_get_tool(["127.0.0.1"], allow_private=True)]
