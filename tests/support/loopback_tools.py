"""The service tests' tools plus an `http_get` that may fetch 127.0.0.1 — what an operator's tools module would
give for an intranet — so that a client's approved, edited or rejected `http_get` can be seen reaching (or not)
a page the test serves on loopback. Still approval-gated (http_get's default), and nothing off loopback.

Loaded with REACTGRAPH_TOOLS=support.loopback_tools:TOOLS (tests/ on PYTHONPATH; $SERVICE_LOG as for
support.service_tools).
"""

from __future__ import annotations

from reactgraph.tools.builtin.http_get import http_get_tool
from support.service_tools import TOOLS as SERVICE_TOOLS

TOOLS = [*SERVICE_TOOLS, http_get_tool(["127.0.0.1"], allow_private=True)]
