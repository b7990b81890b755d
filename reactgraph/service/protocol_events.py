"""A thread's run events as the thread-centric (v3) stream protocol's events, shaped as langgraph-api sends them
(`{"type": "event", "event_id", "seq", "method", "params": {"namespace", "timestamp", "data"}}`), and the
subscription filter a stream request carries (channels, namespaces, depth, since).

What maps: a run's start and end (`lifecycle`: running, then completed, failed or interrupted), `values` and
`updates` (with the interrupts they carry as `input.requested`), `custom`, `tasks` and `checkpoints`, each at
its subgraph's namespace. What does not: the protocol's `messages` and `tools` channels (message and tool-call
lifecycles built from chat-model chunks) — a stream may name them, and gets no events on them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from reactgraph.service.events import END
from reactgraph.service.wire import BadRequest

CHANNELS = ("values", "updates", "checkpoints", "messages", "tools", "custom", "lifecycle", "input", "tasks")
_DIRECT = ("values", "updates", "custom", "tasks", "checkpoints")
INTERRUPT = "__interrupt__"


def seq_of(entry_id: str) -> int:
    """The protocol's integer `seq` of an event id (`ms-n`): rising with the ids, within JavaScript's safe range."""
    ms, _, n = entry_id.partition("-")
    return int(ms) * 1000 + min(int(n or 0), 999)


class StreamFilter:
    """A stream request's subscription: which channels, which namespaces (and how deep), after which `seq`."""

    def __init__(self, body: Mapping[str, Any]) -> None:
        channels = body.get("channels")
        if not isinstance(channels, list) or not channels:
            raise BadRequest(422, "'channels' must be a non-empty list of channel names")
        bad = [c for c in channels if not isinstance(c, str) or (c not in CHANNELS and not c.startswith("custom:"))]
        if bad:
            raise BadRequest(422, f"'channels' holds unsupported entries: {', '.join(map(repr, bad[:5]))}; "
                                  f"allowed: {', '.join(CHANNELS)}, or custom:<name>")
        self.channels = set(channels)
        namespaces = body.get("namespaces")
        self.namespaces = [ns for ns in namespaces if isinstance(ns, list) and all(isinstance(s, str) for s in ns)
                           ] if isinstance(namespaces, list) else None
        depth, since = body.get("depth"), body.get("since")
        self.depth = depth if isinstance(depth, int) and not isinstance(depth, bool) and depth >= 0 else None
        self.since = since if isinstance(since, int) and not isinstance(since, bool) and since >= 0 else None

    def wants(self, event: Mapping[str, Any]) -> bool:
        if self.since is not None and event["seq"] <= self.since:
            return False
        method, params = event["method"], event["params"]
        channel = "input" if method == "input.requested" else method
        named = channel == "custom" and f"custom:{(params['data'] or {}).get('name')}" in self.channels
        if channel not in self.channels and not named:
            return False
        return self._namespace_ok(params["namespace"])

    def _namespace_ok(self, namespace: list[str]) -> bool:
        if not self.namespaces:
            return self.depth is None or len(namespace) <= self.depth
        return any(namespace[:len(prefix)] == prefix and (self.depth is None or len(namespace) - len(prefix)
                                                          <= self.depth) for prefix in self.namespaces)


class ProtocolEvents:
    """Turns one thread's run events (thread_streams.ThreadReader) into protocol events, run by run."""

    def __init__(self, graph_names: Mapping[str, str]) -> None:
        self.graph_names = graph_names  # run id → its graph's name, for `lifecycle`
        self._asked: dict[str, set[str]] = {}  # run id → interrupt ids already sent as `input.requested`
        self._failed: set[str] = set()

    def events(self, entry_id: str, event: str, data: str, run_id: str, status: str | None = None
               ) -> list[dict[str, Any]]:
        """The protocol events of one run event; `status`, for the run's end, is its record's final status."""
        name, _, rest = event.partition("|")
        namespace = [part for part in rest.split("|") if part] if rest else []
        try:
            value = json.loads(data) if data else None
        except ValueError:  # Redis content: an event that is not JSON carries nothing here
            value = None
        made: list[tuple[str, Any]] = []
        if name == "metadata" and not namespace:
            made.append(("lifecycle", {"event": "running", "graph_name": self.graph_names.get(run_id, "")}))
        elif name == "error":
            self._failed.add(run_id)
            message = value.get("message") if isinstance(value, dict) else None
            made.append(("lifecycle", {"event": "failed", "error": message or "the run failed"}))
        elif name == END:
            made += self._end(run_id, status)
        elif name in _DIRECT:
            made += self._with_interrupts(run_id, name, value)
        return [self._event(entry_id, run_id, n, method, namespace, data) for n, (method, data) in enumerate(made)]

    def _end(self, run_id: str, status: str | None) -> list[tuple[str, Any]]:
        if run_id in self._failed:
            return []
        if status == "success":
            phase = "interrupted" if self._asked.get(run_id) else "completed"
            return [("lifecycle", {"event": phase, "graph_name": self.graph_names.get(run_id, "")})]
        reason = "the run was cancelled" if status == "interrupted" else f"the run ended {status or 'unknown'}"
        return [("lifecycle", {"event": "failed", "error": reason})]

    def _with_interrupts(self, run_id: str, name: str, value: Any) -> list[tuple[str, Any]]:
        made: list[tuple[str, Any]] = []
        if isinstance(value, dict) and isinstance(value.get(INTERRUPT), list) and name in ("values", "updates"):
            asked = self._asked.setdefault(run_id, set())
            for interrupt in value[INTERRUPT]:
                if isinstance(interrupt, dict) and isinstance(interrupt.get("id"), str) \
                        and interrupt["id"] not in asked:
                    asked.add(interrupt["id"])
                    made.append(("input.requested", {"interrupt_id": interrupt["id"], "value": interrupt.get("value"),
                                                     "payload": interrupt.get("value")}))
            value = {k: v for k, v in value.items() if k != INTERRUPT}
            if name == "updates" and not value:
                return made
        return [(name, value), *made]

    @staticmethod
    def _event(entry_id: str, run_id: str, n: int, method: str, namespace: list[str], data: Any) -> dict[str, Any]:
        return {"type": "event", "event_id": f"{run_id}:{entry_id}:{n}", "seq": seq_of(entry_id), "method": method,
                "params": {"namespace": namespace, "timestamp": int(entry_id.partition("-")[0]), "data": data}}
