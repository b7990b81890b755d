"""Telemetry: what the pipeline tells about the calls it runs, without changing them — one structured log record
per tool call, per-tool metrics for `reactgraph tools`, and an OpenTelemetry span per call while tracing is on.

Tracing is a switch this module holds and never imports opentelemetry for: `reactgraph.graph.tracing.enable_tracing`
(the `otel` extra) hands it a tracer (`set_tracer`). Until then the tracing step is one function call per tool
call and `trace_headers()` (the W3C headers for outgoing requests to hosts we trust with our trace ids) returns
`{}`, so a default install pays nothing.

Where per-tool call metrics live: in this process, or in Redis so the CLI, every worker and `reactgraph tools`
see one picture (as `RedisBreakerStore` shares breaker state).

Redis keeps, per tool, one hash (calls, failures, a count per status) and one list of the most recent latencies
(capped at `window`), both with a TTL renewed on every write: keys stay few and bounded. Writes never slow or
fail a call: `record` only queues; a daemon thread sends what is queued in one pipelined round trip, and a
failure to write is logged once (then at DEBUG) and the metrics of that batch are dropped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from reactgraph.tools.call import EventSink, Handler, ToolResult, ToolStatus
from reactgraph.tools.guards import coerce_args

# -- the tracing switch -----------------------------------------------------------------------------------------------

PROPAGATE_ENV = "REACTGRAPH_OTEL_PROPAGATE"
_FALSE = {"0", "false", "no", "off"}

_tracer: Any = None  # an opentelemetry Tracer while tracing is on
_run_context: Callable[[], Any] | None = None  # the OTel context of the graph node the caller runs in, if any


def set_tracer(tracer: Any, run_context: Callable[[], Any] | None = None) -> None:
    """Turn gateway spans on (an OpenTelemetry `Tracer`) or off (None); called by enable/disable_tracing.

    `run_context()`: the context of the node (or model call) that the calling code runs in, or None; a tool
    span is its child. Outside a graph run (or without it), the current OpenTelemetry span is the parent.
    """
    global _tracer, _run_context
    _tracer, _run_context = tracer, run_context


def tracing_on() -> bool:
    return _tracer is not None


def active_tracer() -> Any:
    """The OpenTelemetry `Tracer` while tracing is on, else None."""
    return _tracer


def parent_context() -> Any:
    """The OpenTelemetry context of the graph node the caller runs in (a tool span's parent), or None: then the
    current span is the parent."""
    return _run_context() if _run_context is not None else None


def propagation_allowed() -> bool:
    """Whether REACTGRAPH_OTEL_PROPAGATE lets trace context go out on requests (default: yes)."""
    return os.environ.get(PROPAGATE_ENV, "").strip().lower() not in _FALSE


def propagation_on() -> bool:
    """Whether trace context goes out on HTTP (and MCP) requests: tracing is on and not switched off."""
    return _tracer is not None and propagation_allowed()


def trace_headers() -> dict[str, str]:
    """W3C `traceparent` / `tracestate` headers of the current span, to add to an outgoing request.

    `{}` when tracing is off or REACTGRAPH_OTEL_PROPAGATE=false. For every client of remote services that we
    trust with our trace ids (allow-listed `http_get` hosts, MCP servers).
    """
    if not propagation_on():
        return {}
    from opentelemetry.propagate import inject

    headers: dict[str, str] = {}
    inject(headers)
    return headers


# -- metrics ----------------------------------------------------------------------------------------------------------

log = logging.getLogger("reactgraph.tools.metrics")
DEFAULT_PREFIX = "reactgraph:metrics:"
DEFAULT_TTL_S = 7 * 24 * 3600  # a tool not called for a week drops out of the picture
DEFAULT_WINDOW = 1024  # the latencies percentiles are computed over, as in ToolMetrics
LINGER_S = 0.05  # metrics reach Redis this long after a call, at most (plus the round trip)
MAX_BATCH = 2_000  # calls per pipelined write
MAX_QUEUED = 10_000  # calls waiting to be written; beyond this (Redis too slow, or gone) they are dropped


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


class MetricsStore(Protocol):
    """Records each call's outcome, and reads the per-tool metrics back (`ToolMetrics.to_dict` shape)."""

    shared: bool  # True: the metrics of every process using this store, not just this one

    def describe(self) -> str: ...

    def record(self, name: str, result: ToolResult) -> None: ...  # must not block

    async def read(self, names: Iterable[str]) -> dict[str, dict[str, Any] | None]: ...

    def flush(self, timeout_s: float = 2.0) -> bool: ...  # True once everything recorded was written


class MemoryMetricsStore:
    """The metrics of this process only, in `ToolMetrics` objects (recorded under a lock: blocking calls record
    from many threads)."""

    shared = False

    def __init__(self) -> None:
        self.metrics: dict[str, ToolMetrics] = {}
        self._lock = threading.Lock()

    def describe(self) -> str:
        return "in this process only"

    def record(self, name: str, result: ToolResult) -> None:
        with self._lock:
            metrics = self.metrics.get(name)
            if metrics is None:
                metrics = self.metrics[name] = ToolMetrics()
            metrics.observe(result)

    async def read(self, names: Iterable[str]) -> dict[str, dict[str, Any] | None]:
        with self._lock:
            return {name: (m.to_dict() if (m := self.metrics.get(name)) else None) for name in names}

    def flush(self, timeout_s: float = 2.0) -> bool:
        return True


class RedisMetricsStore:
    """Metrics in Redis, written behind the calls' backs by one daemon thread (see the module's docstring)."""

    shared = True

    def __init__(self, client: Any, url: str = "", prefix: str = DEFAULT_PREFIX, *, ttl_s: int = DEFAULT_TTL_S,
                 window: int = DEFAULT_WINDOW) -> None:
        # `client` is a synchronous `redis.Redis`: the writer thread and the readers use it off any event loop.
        self.client, self.url, self.prefix = client, url, prefix
        self.ttl_s, self.window = ttl_s, window
        self._queue: queue.SimpleQueue[tuple[str, str, bool, float]] = queue.SimpleQueue()
        self._pending = 0  # recorded and not yet written (or dropped); guarded by _lock
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)
        self._hurry = threading.Event()  # set while someone waits in `flush`
        self._writer: threading.Thread | None = None
        self._warned = False
        self.dropped = 0  # calls whose metrics were lost (queue full, or a failed write)

    @classmethod
    def from_url(cls, url: str, prefix: str = DEFAULT_PREFIX, **options: Any) -> RedisMetricsStore:
        # The savers' kind of client (bounded pool, read timeout, a bad URL refused in one line), made lazily.
        from reactgraph.memory.redis_checkpoint.pool import new_client
        from reactgraph.memory.redis_checkpoint.settings import PoolLimits, redact

        return cls(new_client(url, {}, PoolLimits.resolve(2, None), False), redact(url), prefix, **options)

    def describe(self) -> str:
        return f"Redis {self.url} (shared)" if self.url else "Redis (shared)"

    def record(self, name: str, result: ToolResult) -> None:
        with self._lock:
            if self._pending >= MAX_QUEUED:
                self.dropped += 1
                return
            self._pending += 1
            if self._writer is None or not self._writer.is_alive():
                self._writer = threading.Thread(target=self._write_forever, name="reactgraph-metrics", daemon=True)
                self._writer.start()
        self._queue.put((name, result.status.value, bool(result.status.counts_as_failure), result.latency_ms))

    def flush(self, timeout_s: float = 2.0) -> bool:
        """Wait (at most `timeout_s`) until every recorded call was written or dropped: before a process exits."""
        deadline = time.monotonic() + timeout_s
        self._hurry.set()
        try:
            with self._drained:
                while self._pending:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._drained.wait(left)
            return True
        finally:
            self._hurry.clear()

    def _write_forever(self) -> None:
        while True:
            batch = [self._queue.get()]
            # A short wait gathers the calls of a busy moment into one round trip (one GIL hand-off, not one
            # per call, which a 1 ms tool would feel); `flush` cuts it short.
            self._hurry.wait(LINGER_S)
            while len(batch) < MAX_BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                self._write(batch)
            except Exception as exc:  # noqa: BLE001 - metrics are best effort: a call never fails for them
                self._write_failed(exc, len(batch))
            with self._drained:
                self._pending -= len(batch)
                self._drained.notify_all()

    def _write(self, batch: list[tuple[str, str, bool, float]]) -> None:
        # Added up per tool first: a few commands per tool and batch, not four per call (the writer's CPU time
        # is taken from the event loop the calls run on, through the GIL).
        counts: dict[str, Counter[str]] = {}
        latencies: dict[str, list[float]] = {}
        for name, status, failed, latency_ms in batch:
            tally = counts.setdefault(name, Counter())
            tally["calls"] += 1
            tally["failures"] += failed
            tally[f"status:{status}"] += 1
            latencies.setdefault(name, []).append(round(latency_ms, 3))
        pipe = self.client.pipeline(transaction=False)
        for name, tally in counts.items():
            key = self.prefix + name
            for field_name, n in tally.items():
                if n:
                    pipe.hincrby(key, field_name, n)
            pipe.lpush(key + ":latency", *latencies[name][-self.window:])
            pipe.ltrim(key + ":latency", 0, self.window - 1)
            pipe.expire(key, self.ttl_s)
            pipe.expire(key + ":latency", self.ttl_s)
        pipe.execute()

    def _write_failed(self, exc: BaseException, calls: int) -> None:
        self.dropped += calls
        level = logging.DEBUG if self._warned else logging.WARNING
        self._warned = True
        error = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
        log.log(level, "tool metrics not written to %s (%s); calls are unaffected%s", self.url or "Redis", error,
                "" if level == logging.DEBUG else ", further failures are logged at DEBUG",
                extra={"redis": {"event": "metrics_write_failed", "url": self.url, "error": error, "calls": calls}})

    async def read(self, names: Iterable[str]) -> dict[str, dict[str, Any] | None]:
        import asyncio

        return await asyncio.to_thread(self.read_now, list(names))

    def read_now(self, names: list[str]) -> dict[str, dict[str, Any] | None]:
        """The metrics of `names` as every process wrote them; Redis content, so decoded defensively."""
        pipe = self.client.pipeline(transaction=False)
        for name in names:
            pipe.hgetall(self.prefix + name)
            pipe.lrange(self.prefix + name + ":latency", 0, self.window - 1)
        replies = pipe.execute()
        found: dict[str, dict[str, Any] | None] = {}
        for index, name in enumerate(names):
            counts, latencies = replies[2 * index], replies[2 * index + 1]
            found[name] = _decode(counts, latencies) if counts else None
        return found


def _decode(counts: dict[Any, Any], latencies: list[Any]) -> dict[str, Any]:
    def number(raw: Any) -> float:
        try:
            value = float(raw)
        except (TypeError, ValueError):
            return 0.0
        return value if value == value and abs(value) != float("inf") else 0.0

    fields = {(k.decode(errors="replace") if isinstance(k, bytes) else str(k)): v for k, v in counts.items()}
    metrics = ToolMetrics(calls=int(number(fields.get("calls"))), failures=int(number(fields.get("failures"))))
    for key, value in fields.items():
        if key.startswith("status:") and len(key) <= 64:
            metrics.by_status[key.removeprefix("status:")] = int(number(value))
    metrics.latencies_ms.extend(number(v) for v in latencies)
    return metrics.to_dict()


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
    """The telemetry step: stamps latency, logs the call once, and updates the tool's metrics."""

    def __init__(self, store: MetricsStore | None = None) -> None:
        self.store: MetricsStore = store or MemoryMetricsStore()

    @property
    def metrics(self) -> dict[str, ToolMetrics]:
        """This process's metrics when they are kept in process ({} when a shared store holds them)."""
        return self.store.metrics if isinstance(self.store, MemoryMetricsStore) else {}

    async def __call__(self, call: ToolResult, proceed: Handler) -> ToolResult:
        started = time.perf_counter()
        result = await proceed(call)
        result.latency_ms = (time.perf_counter() - started) * 1000
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


def _breaker_state(call: ToolResult, result: ToolResult) -> str:
    """The circuit as the call was admitted (closed, or half_open for the probe) or refused (open), from what
    the pipeline already knows (no second read of a Redis breaker store); a call that moved it reports where."""
    if result.status is ToolStatus.CIRCUIT_OPEN:
        return "open"
    return "half_open" if call.breaker_probe else "closed"


def _event_attributes(event: dict[str, Any]) -> dict[str, Any]:
    # Gateway events hold numbers and short strings (names, states, error class names), never arguments.
    return {f"reactgraph.{k}": v for k, v in event.items()
            if k not in ("type", "event", "tool", "call_id") and isinstance(v, (str, bool, int, float))}


class ToolTracing:
    """The tracing step: one `execute_tool` span per call, a child of the node span that made it, and
    the current span while the call runs (so `trace_headers()` inside it, and the tool's own spans, follow it).

    The gateway's events (retry, breaker, timeout, waiting) become span events through the call's sink, at
    the points where they are emitted already. Attributes follow the OTel GenAI conventions (`gen_ai.*`) and
    `reactgraph.tool.*` otherwise; arguments appear only as their digest, never as values.
    """

    async def __call__(self, call: ToolResult, proceed: Handler) -> ToolResult:
        tracer = active_tracer()
        if tracer is None:
            return await proceed(call)
        parent = parent_context()
        with tracer.start_as_current_span(f"execute_tool {call.name}", context=parent, record_exception=False,
                                          set_status_on_exception=False) as span:
            span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name,
                                 "gen_ai.tool.call.id": call.call_id,
                                 "reactgraph.tool.args_digest": args_digest(call.args)})
            breaker_moved: list[str] = []
            call.sink = _tee(span, call.sink, breaker_moved)
            result = await proceed(call)
            span.set_attributes({"reactgraph.tool.status": result.status.value,
                                 "reactgraph.tool.attempts": result.attempts,
                                 "reactgraph.tool.latency_ms": round(result.latency_ms, 3),
                                 "reactgraph.tool.breaker_state": (breaker_moved[-1] if breaker_moved
                                                                   else _breaker_state(call, result))})
            if not result.ok:
                from opentelemetry.trace import Status, StatusCode

                span.set_attribute("error.type", result.status.value)
                span.set_status(Status(StatusCode.ERROR, result.status.value))
            return result


def _tee(span: Any, sink: EventSink | None, breaker_moved: list[str]) -> EventSink:
    """A sink that records each gateway event on the span, then hands it to the caller's sink (if any)."""

    def record(event: dict[str, Any]) -> None:
        span.add_event(f"reactgraph.{event.get('event', 'gateway')}", _event_attributes(event))
        if event.get("event") == "breaker" and isinstance(event.get("state"), str):
            breaker_moved.append(event["state"])
        if sink is not None:
            sink(event)

    return record
