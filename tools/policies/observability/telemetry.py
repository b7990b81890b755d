"""One structured log record per tool call, and per-tool metrics for `reactgraph tools` (kept in a
`MetricsStore`: this process's, or Redis shared by every process)."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from typing import Any

from reactgraph.tools.policies.base import CallContext, Handler
from reactgraph.tools.policies.guards.validation import coerce_args
from reactgraph.tools.policies.observability.metrics_store import MemoryMetricsStore, MetricsStore, ToolMetrics
from reactgraph.tools.result import ToolResult, ToolStatus

logger = logging.getLogger("reactgraph.tools")  # a child of "reactgraph", which has a NullHandler

_SECRET_KEY = re.compile(r"pass(word)?|secret|token|api[_-]?key|auth|credential|cookie|session[_-]?key", re.I)
MAX_LOGGED_VALUE = 80
MAX_LOGGED_DEPTH = 8


def redact(value: Any, key: str = "", depth: int = 0) -> Any:
    """Arguments as they may appear in logs: secrets masked, long values cut."""
    if key and _SECRET_KEY.search(key):
        return "***"
    if isinstance(value, (dict, list, tuple)) and depth >= MAX_LOGGED_DEPTH:
        return "…"
    if isinstance(value, dict):
        return {str(k): redact(v, str(k), depth + 1) for k, v in list(value.items())[:50]}
    if isinstance(value, (list, tuple)):
        return [redact(v, "", depth + 1) for v in value[:20]]
    if isinstance(value, str) and len(value) > MAX_LOGGED_VALUE:
        return f"{value[:MAX_LOGGED_VALUE]}…({len(value)} chars)"
    return value


def args_digest(args: Any) -> str:
    """A short stable fingerprint of the arguments: lets logs correlate calls without storing them."""
    try:
        canonical = json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        try:
            canonical = repr(args)
        except (ValueError, RecursionError):  # ints past Python's digit limit, absurd nesting
            canonical = type(args).__name__
    return hashlib.sha256(canonical.encode("utf-8", "replace")).hexdigest()[:12]


class Telemetry:
    """The telemetry step: stamps latency and attempts, logs the call once, and updates the tool's metrics."""

    def __init__(self, store: MetricsStore | None = None) -> None:
        self.store: MetricsStore = store or MemoryMetricsStore()

    @property
    def metrics(self) -> dict[str, ToolMetrics]:
        """This process's metrics when they are kept in process ({} when a shared store holds them)."""
        return self.store.metrics if isinstance(self.store, MemoryMetricsStore) else {}

    async def __call__(self, call: CallContext, proceed: Handler) -> ToolResult:
        started = time.perf_counter()
        result = await proceed(call)
        result.latency_ms = (time.perf_counter() - started) * 1000
        result.attempts = call.attempts
        if call.meta is not None:  # unknown names stay out of the metrics, or junk calls would grow them forever
            self.store.record(call.name, result)
        level = logging.INFO if result.status is ToolStatus.OK else logging.WARNING
        if logger.isEnabledFor(level):
            args = coerce_args(call.args)  # JSON-string arguments are logged parsed, so their secrets are masked
            logger.log(level, "tool call %s %s", call.name, result.status.value, extra={"tool_call": {
                           "tool": call.name, "session": call.session.id, "call_id": call.call_id,
                           "args_digest": args_digest(args), "args": redact(args),
                           "status": result.status.value, "latency_ms": round(result.latency_ms, 3),
                           "attempts": result.attempts}})
        return result
