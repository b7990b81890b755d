"""The built-in tools: calculator, get_time, get_weather, search, rag_search and http_get, one module each."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from reactgraph.tools.builtin.calculator import calculator_tool
from reactgraph.tools.builtin.clock import get_time_tool
from reactgraph.tools.builtin.http_get import http_get_tool
from reactgraph.tools.builtin.rag import rag_search_tool
from reactgraph.tools.builtin.search import search_tool
from reactgraph.tools.builtin.weather import get_weather_tool
from reactgraph.tools.meta import ToolMeta

__all__ = ["builtin_tools", "calculator_tool", "get_time_tool", "get_weather_tool", "http_get_tool",
           "rag_search_tool", "search_tool"]


def builtin_tools(*, http_allow_hosts: Iterable[str] | None = None, http_allow_private: bool = False,
                  weather_url: str | None = None, rag_index: str | Path | None = None,
                  http_approval: str | None = None) -> list[ToolMeta]:
    """The six built-in tools, in a fixed order: calculator, get_time, get_weather, search, rag_search, http_get.

    Network access is off unless configured; None means "not given" and reads the environment:
    - `http_allow_hosts`: hosts http_get may fetch (subdomains included). None reads the comma-separated
      REACTGRAPH_HTTP_ALLOW; an empty list (or neither) makes http_get refuse every URL.
    - `weather_url`: a wttr.in-style template ("https://wttr.in/{city}?format=j1"). None reads
      REACTGRAPH_WEATHER_URL; "" (or neither) makes get_weather answer from offline sample data.
    - `http_allow_private`: let http_get reach loopback and private networks (tests, intranets).
    - `http_approval`: "always" (a person approves each http_get call; the default) or "never". None reads
      REACTGRAPH_HTTP_APPROVAL.
    - `rag_index`: the directory of the FAISS index rag_search reads. None reads REACTGRAPH_INDEX; neither
      means the bundled knowledge base, built on first use into $REACTGRAPH_HOME/index-default.
    """
    return [
        calculator_tool(),
        get_time_tool(),
        get_weather_tool(weather_url),
        search_tool(),
        rag_search_tool(rag_index),
        http_get_tool(http_allow_hosts, allow_private=http_allow_private, approval=http_approval),
    ]
