"""What the tool gateway costs and whether its limits hold, measured side by side in one run.

1. Overhead: an async tool that sleeps 1 ms, called through `gateway.execute` vs awaited directly.
   Batches of both alternate (direct first in even rounds, gateway first in odd ones) so machine noise
   hits both alike; per-call medians and means are compared. Goal: ratio <= 1.05.
2. Parallelism: 5 calls of a 200 ms tool through `execute_many` vs one call. Goal: ratio <= 1.2.
3. Concurrency limit: 50 calls with the global limit at 5; the peak in flight, counted inside the tool
   and by `gateway.bulkhead`, must be exactly 5.

Only ratios and counts are judged, never absolute times (the machine is shared).

    python benchmarks/gateway.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from dataclasses import dataclass

from reactgraph.tools import ToolGateway


async def ping() -> str:
    """Answer after 1 ms."""
    await asyncio.sleep(0.001)
    return "pong"


@dataclass
class Row:
    measure: str
    baseline: str
    gateway: str
    ratio: str
    goal: str
    met: bool


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


async def overhead(rounds: int, batch: int) -> list[Row]:
    gateway = ToolGateway([ping])
    call = {"name": "ping", "args": {}, "id": "bench"}

    async def direct() -> float:
        started = time.perf_counter()
        await ping()
        return time.perf_counter() - started

    async def through_gateway() -> float:
        started = time.perf_counter()
        result = await gateway.execute(call)
        elapsed = time.perf_counter() - started
        assert result.ok, result.content  # a broken pipeline would make the timing meaningless
        return elapsed

    for _ in range(batch // 5 or 1):  # warm-up: first-call costs (imports, semaphores) are not overhead
        await direct()
        await through_gateway()

    plain: list[float] = []
    piped: list[float] = []
    for round_no in range(rounds):
        order = [(direct, plain), (through_gateway, piped)]
        for measure, samples in order if round_no % 2 == 0 else reversed(order):
            for _ in range(batch):
                samples.append(await measure())

    median_ratio = statistics.median(piped) / statistics.median(plain)
    mean_ratio = statistics.fmean(piped) / statistics.fmean(plain)
    n = rounds * batch
    return [
        Row(f"1 ms tool, median per call (n={n})", ms(statistics.median(plain)), ms(statistics.median(piped)),
            f"{median_ratio:.3f}", "<= 1.05", median_ratio <= 1.05),
        Row(f"1 ms tool, mean per call (n={n})", ms(statistics.fmean(plain)), ms(statistics.fmean(piped)),
            f"{mean_ratio:.3f}", "<= 1.05", mean_ratio <= 1.05),
    ]


async def parallelism(repeats: int) -> list[Row]:
    gateway = ToolGateway()

    @gateway.tool
    async def slow_lookup(key: str) -> str:
        """Answer after 200 ms."""
        await asyncio.sleep(0.2)
        return key

    async def wall(calls: list[dict]) -> float:
        started = time.perf_counter()
        results = await gateway.execute_many(calls)
        elapsed = time.perf_counter() - started
        assert all(r.ok for r in results), [r.content for r in results]
        return elapsed

    five = [{"name": "slow_lookup", "args": {"key": str(i)}, "id": str(i)} for i in range(5)]
    singles, batches = [], []
    for repeat in range(repeats):
        if repeat % 2 == 0:
            singles.append(await wall(five[:1]))
            batches.append(await wall(five))
        else:
            batches.append(await wall(five))
            singles.append(await wall(five[:1]))
    ratio = statistics.median(batches) / statistics.median(singles)
    return [Row(f"execute_many: 5 x 200 ms tool vs 1 call (median of {repeats})",
                ms(statistics.median(singles)), ms(statistics.median(batches)), f"{ratio:.3f}", "<= 1.2",
                ratio <= 1.2)]


async def concurrency_limit() -> list[Row]:
    gateway = ToolGateway(max_concurrent=5)
    in_flight = peak = 0

    @gateway.tool
    async def work(n: int) -> int:
        """Hold a slot for 10 ms."""
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            await asyncio.sleep(0.01)
            return n
        finally:
            in_flight -= 1

    results = await gateway.execute_many([{"name": "work", "args": {"n": i}, "id": str(i)} for i in range(50)])
    assert [r.value for r in results] == list(range(50))
    bulkhead_peak = gateway.bulkhead.peak_in_flight
    return [Row("50 calls, global limit 5: peak in flight", f"in tool: {peak}", f"bulkhead: {bulkhead_peak}",
                "-", "exactly 5", peak == bulkhead_peak == 5)]


def print_table(rows: list[Row]) -> None:
    headers = ("measure", "baseline", "gateway", "ratio", "goal", "met")
    cells = [headers] + [(r.measure, r.baseline, r.gateway, r.ratio, r.goal, "yes" if r.met else "NO")
                         for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for index, row in enumerate(cells):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
        if index == 0:
            print("  ".join("-" * width for width in widths))


async def main(quick: bool) -> None:
    rows = await overhead(rounds=4 if quick else 20, batch=50 if quick else 100)
    rows += await parallelism(repeats=3 if quick else 9)
    rows += await concurrency_limit()
    print_table(rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a fast smoke run (fewer rounds)")
    asyncio.run(main(parser.parse_args().quick))
