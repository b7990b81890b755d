"""Where per-tool call metrics live: in this process, or in Redis so the CLI, every worker and `reactgraph tools`
see one picture (as `RedisBreakerStore` shares breaker state).

Redis keeps, per tool, one hash (calls, failures, a count per status) and one list of the most recent latencies
(capped at `window`), both with a TTL renewed on every write: keys stay few and bounded. Writes never slow or
fail a call: `record` only queues; a daemon thread sends what is queued in one pipelined round trip, and a
failure to write is logged once (then at DEBUG) and the metrics of that batch are dropped.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from reactgraph.tools.result import ToolResult

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
    """The metrics of this process only, in `ToolMetrics` objects."""

    shared = False

    def __init__(self) -> None:
        self.metrics: dict[str, ToolMetrics] = {}

    def describe(self) -> str:
        return "in this process only"

    def record(self, name: str, result: ToolResult) -> None:
        metrics = self.metrics.get(name)
        if metrics is None:
            metrics = self.metrics[name] = ToolMetrics()
        metrics.observe(result)

    async def read(self, names: Iterable[str]) -> dict[str, dict[str, Any] | None]:
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
        from reactgraph.memory.redis_checkpoint.errors import redact
        from reactgraph.memory.redis_checkpoint.limits import PoolLimits
        from reactgraph.memory.redis_checkpoint.pool import new_client

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
