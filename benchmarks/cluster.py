"""What a Redis Cluster costs the savers per checkpoint, against one Redis, measured side by side in one run.

One step is what LangGraph does per super-step: `put`, `put_writes`, then `get_tuple` of the latest. Both
URLs run in interleaved rounds (order rotated each round) on fresh threads; the table shows medians.
Nothing here asserts a time. Start a local cluster first, e.g. with tests/support/redis_cluster.py's
`local_cluster`, or point --cluster-url at one of yours.

    python benchmarks/cluster.py --cluster-url redis+cluster://127.0.0.1:7000,127.0.0.1:7001/ \\
        [--redis-url redis://127.0.0.1:6379/15] [--rounds 7] [--steps 300]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_config, generate_metadata

from reactgraph.memory import RedisSaver


def per_step_us(url: str, steps: int) -> float:
    prefix = f"bench-cluster-{uuid.uuid4().hex[:8]}:"
    with RedisSaver.from_url(url, prefix=prefix) as saver:
        thread = uuid.uuid4().hex[:8]
        config = generate_config(thread)
        started = time.perf_counter()
        for i in range(steps):
            saved = saver.put(config, generate_checkpoint(channel_values={"n": i}), generate_metadata(), {"n": i + 1})
            saver.put_writes(saved, [("n", i)], "task")
            saver.get_tuple(config)
        elapsed = time.perf_counter() - started
        saver.delete_thread(thread)
    return elapsed / steps * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    parser.add_argument("--cluster-url", required=True)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    urls = [args.redis_url, args.cluster_url]
    samples: dict[str, list[float]] = {url: [] for url in urls}
    for round_no in range(args.rounds):
        for url in urls[round_no % 2:] + urls[:round_no % 2]:
            samples[url].append(per_step_us(url, args.steps))
    one = statistics.median(samples[args.redis_url])
    print(f"put + put_writes + get_tuple, {args.rounds} interleaved rounds x {args.steps} steps, medians")
    for label, url in (("one Redis", args.redis_url), ("Redis Cluster", args.cluster_url)):
        median = statistics.median(samples[url])
        print(f"{label:14} {median:8.0f} µs/step  {median / one:5.2f}x")


if __name__ == "__main__":
    main()
