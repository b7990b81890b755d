"""`GET /metrics`: Prometheus text for the whole service, read from Redis at each scrape, so every API process
answers with the same figures whichever one the scraper reaches.

Runs: created, started and finished (by status) are counters the API and the workers increment; queued and
running are derived from them. Run latency (created → ended) is a histogram with fixed buckets. Workers alive
are the ones whose heartbeat is recent. Tool calls come from the gateway's shared metrics (per tool and
status), the same figures `reactgraph tools` shows.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from reactgraph.service.records import FINAL_RUN_STATUSES, LATENCY_BUCKETS_S, ServiceRecords
from reactgraph.service.worker import HEARTBEAT_S

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
ALIVE_WITHIN_S = 3 * HEARTBEAT_S


class _Snapshot(Collector):
    """One scrape's figures, already read from Redis (prometheus_client collects synchronously)."""

    def __init__(self, counters: dict[str, float], workers: int, tools: dict[str, dict[str, Any] | None]) -> None:
        self.counters, self.workers, self.tools = counters, workers, tools

    def collect(self) -> Iterator[Metric]:
        c = self.counters
        finished = {status: c.get(f"finished_{status}", 0.0) for status in FINAL_RUN_STATUSES}
        created, started = c.get("created", 0.0), c.get("started", 0.0)
        queued = GaugeMetricFamily("reactgraph_runs_queued", "Runs created and not started yet.")
        queued.add_metric([], max(0.0, created - started - c.get("cancelled_before_start", 0.0)))
        running = GaugeMetricFamily("reactgraph_runs_running", "Runs started and not ended yet.")
        running.add_metric([], max(0.0, started - sum(finished.values())))
        total = CounterMetricFamily("reactgraph_runs_created", "Runs created.")
        total.add_metric([], created)
        ended = CounterMetricFamily("reactgraph_runs_finished", "Started runs that ended, by status.",
                                    labels=["status"])
        for status, count in finished.items():
            ended.add_metric([status], count)
        yield from (queued, running, total, ended, self._latency())
        alive = GaugeMetricFamily("reactgraph_workers_alive",
                                  f"Workers with a heartbeat in the last {ALIVE_WITHIN_S:g} s.")
        alive.add_metric([], self.workers)
        yield alive
        calls = CounterMetricFamily("reactgraph_tool_calls", "Tool calls through the gateway, by tool and status.",
                                    labels=["tool", "status"])
        for tool, metrics in sorted(self.tools.items()):
            for status, count in sorted(((metrics or {}).get("by_status") or {}).items()):
                calls.add_metric([tool, status], count)
        yield calls

    def _latency(self) -> HistogramMetricFamily:
        c, cumulative, buckets = self.counters, 0.0, []
        for bound in (*(f"{b:g}" for b in LATENCY_BUCKETS_S), "+Inf"):
            cumulative += c.get(f"latency_le_{bound}", 0.0)
            buckets.append((bound, cumulative))
        return HistogramMetricFamily("reactgraph_run_latency_seconds", "Run latency from creation to its end.",
                                     buckets=buckets, sum_value=c.get("latency_sum", 0.0))


async def read_counters(records: ServiceRecords) -> dict[str, float]:
    """The service's run counters (see ServiceRecords.count), as numbers: a field that is not one is not shown."""
    raw: Any = await records.client.hgetall(records.keys.counters)
    found: dict[str, float] = {}
    for key, value in raw.items():
        name = key.decode(errors="replace") if isinstance(key, bytes) else str(key)
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue  # Redis content
        if len(name) <= 64 and number == number and abs(number) != float("inf"):
            found[name] = number
    return found


async def render(records: ServiceRecords, gateway: Any) -> bytes:
    counters = await read_counters(records)
    workers = await records.client.zcount(records.keys.workers, (time.time() - ALIVE_WITHIN_S) * 1000, "+inf")
    names = [meta.name for meta in gateway.tools()]
    tools = await gateway.telemetry.store.read(names)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(counters, int(workers), tools))
    return generate_latest(registry)
