"""What sharing tool metrics in Redis costs a call: a 1 ms async tool through two gateways side by side, one
with the in-process metrics store (the default) and one with `RedisMetricsStore`, in alternating batches so
machine noise hits both alike. Also: how long the writer thread takes to get every call into Redis after the
last one (flush), and how many round trips it needed (batching). Goal: ratio <= 1.05.

Only ratios and counts are judged, never absolute times (the machine is shared).

    REDIS_URL=redis://127.0.0.1:6379/15 python benchmarks/metrics.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid

import redis

from reactgraph.tools import ToolGateway
from reactgraph.tools.telemetry import RedisMetricsStore


async def ping() -> str:
    """Answer after 1 ms."""
    await asyncio.sleep(0.001)
    return "pong"


async def timed(gateway: ToolGateway) -> float:
    started = time.perf_counter()
    result = await gateway.execute({"name": "ping", "args": {}, "id": "bench"})
    elapsed = time.perf_counter() - started
    assert result.ok, result.content
    return elapsed


async def main(url: str, rounds: int, batch: int) -> None:
    prefix = f"reactgraph-bench:{uuid.uuid4().hex[:8]}:"
    shared = RedisMetricsStore.from_url(url, prefix)
    writes = 0
    original = shared._write

    def counted(calls: list) -> None:
        nonlocal writes
        writes += 1
        original(calls)

    shared._write = counted  # type: ignore[method-assign]
    local, remote = ToolGateway([ping]), ToolGateway([ping], metrics_store=shared)
    for _ in range(batch // 5 or 1):  # warm-up: the writer thread and the connection are made here
        await timed(local)
        await timed(remote)
    shared.flush(5.0)
    writes = 0
    plain: list[float] = []
    piped: list[float] = []
    for round_no in range(rounds):
        order = [(local, plain), (remote, piped)]
        for gateway, samples in order if round_no % 2 == 0 else reversed(order):
            for _ in range(batch):
                samples.append(await timed(gateway))
    started = time.perf_counter()
    assert shared.flush(10.0)
    flush_ms = (time.perf_counter() - started) * 1000
    metrics = shared.read_now(["ping"])["ping"]
    n = rounds * batch
    median = statistics.median(piped) / statistics.median(plain)
    mean = statistics.fmean(piped) / statistics.fmean(plain)
    print(f"1 ms tool, n={n} per side: in-process metrics {statistics.median(plain) * 1000:.3f} ms, "
          f"Redis metrics {statistics.median(piped) * 1000:.3f} ms per call (median)")
    print(f"ratio: median {median:.3f}, mean {mean:.3f} (goal <= 1.05: {'met' if median <= 1.05 else 'NOT met'})")
    print(f"written: {metrics['calls']} calls in Redis in {writes} round trips; flush after the last call "
          f"{flush_ms:.1f} ms; dropped {shared.dropped}")
    client = redis.Redis.from_url(url)
    client.delete(*client.keys(prefix + "*"))
    client.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a fast smoke run (fewer rounds)")
    quick = parser.parse_args().quick
    asyncio.run(main(os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/15", 4 if quick else 20,
                     50 if quick else 100))
