"""One structured log record per tool call, and per-tool metrics for `reactgraph tools`."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from reactgraph.tools.policies.base import CallContext, Handler
from reactgraph.tools.policies.validation import _coerce_args
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


@dataclass
class ToolMetrics:
    """Counters and a latency window for one tool."""

    calls: int = 0
    failures: int = 0
    by_status: Counter = field(default_factory=Counter)
    # The most recent latencies only: percentiles describe current behaviour, and memory stays bounded.
    latencies_ms: deque = field(default_factory=lambda: deque(maxlen=1024))

    def observe(self, result: ToolResult) -> None:
        self.calls += 1
        self.failures += result.status.counts_as_failure
        self.by_status[result.status] += 1  # StrEnum keys: equal to, and serialised as, their string values
        self.latencies_ms.append(result.latency_ms)

    def percentile(self, q: float) -> float:
        if not self.latencies_ms:
            return 0.0
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "failures": self.failures,
                "by_status": {str(k): v for k, v in self.by_status.items()},
                "p50_ms": round(self.percentile(0.50), 3), "p95_ms": round(self.percentile(0.95), 3)}


class Telemetry:
    """Outermost policy: stamps latency, logs the call once, and updates the tool's metrics."""

    def __init__(self) -> None:
        self.metrics: dict[str, ToolMetrics] = {}

    async def __call__(self, call: CallContext, proceed: Handler) -> ToolResult:
        started = time.perf_counter()
        result = await proceed(call)
        result.latency_ms = (time.perf_counter() - started) * 1000
        result.attempts = call.attempts
        if call.meta is not None:  # unknown names stay out of the metrics, or junk calls would grow them forever
            metrics = self.metrics.get(call.name)
            if metrics is None:
                metrics = self.metrics[call.name] = ToolMetrics()
            metrics.observe(result)
        level = logging.INFO if result.status is ToolStatus.OK else logging.WARNING
        if logger.isEnabledFor(level):
            args = _coerce_args(call.args)  # JSON-string arguments are logged parsed, so their secrets are masked
            logger.log(level, "tool call %s %s", call.name, result.status.value, extra={"tool_call": {
                           "tool": call.name, "session": call.session.id, "call_id": call.call_id,
                           "args_digest": args_digest(args), "args": redact(args),
                           "status": result.status.value, "latency_ms": round(result.latency_ms, 3),
                           "attempts": result.attempts}})
        return result
