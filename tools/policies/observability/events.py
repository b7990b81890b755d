"""Gateway events: small JSON-ready dicts about retries, breaker changes, timeouts and waits, sent to a sink."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

# Where a call's events go: inside our graphs, LangGraph's stream writer (the `custom` stream mode).
EventSink = Callable[[dict[str, Any]], None]


def emit(sink: EventSink, name: str, call_id: str, event: str, **fields: Any) -> None:
    """Send one event; a sink that fails must never fail the tool call (events are information, not control)."""
    with contextlib.suppress(Exception):  # e.g. a consumer that stopped reading: the call goes on
        sink({"type": "gateway", "event": event, "tool": name, "call_id": call_id, **fields})
