"""A backlog of 1,000,000 work-queue notifications built with the workers down, then drained: lost and twice-run runs.

`reactgraph serve --workers 0` takes `--runs` runs (a calculator question each, on a thread of its own, created with
langgraph-sdk while no worker runs); then spare notifications for the same threads — what hand-backs, retries and
duplicate enqueues leave — are added until the queue holds `--notifications` entries, the runs' own tokens being
the oldest. Beside it, in one run, the same notifications go to a second stream with the trim the queue used to
have (`XADD MAXLEN ~ 100000`), and the script counts how many of the runs' tokens that stream still holds: the runs
it would have lost. Then `--workers` `reactgraph worker` processes start, and the script waits until every run has
ended and the queue is empty: each run must end `success` exactly once (the service's `started` and
`finished_success` counters, and one run id in each thread's checkpoints).

Nothing here asserts a time. Needs the serve extra and Redis.

    python benchmarks/service_backlog.py [--runs 2000] [--notifications 1000000] [--workers 2] \
        [--redis-url redis://127.0.0.1:6379/15]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from serve_harness import REACTGRAPH, question, start_serve  # noqa: E402

from reactgraph.service.keys import ServiceKeys  # noqa: E402
from support.serve_load import human, sdk_client  # noqa: E402
from test_serve import forget  # noqa: E402

OLD_TRIM = 100_000  # the queue's former `MAXLEN ~`


async def create_runs(url: str, runs: int, clients: int = 16) -> list[tuple[str, str]]:
    """(thread id, run id) of `runs` runs created with no worker running, oldest first."""
    made: list[tuple[int, str, str]] = []
    todo = list(range(runs))

    async def client() -> None:
        sdk = sdk_client(url, None)
        while todo:
            n = todo.pop(0)
            thread = await sdk.threads.create()
            run = await sdk.runs.create(thread["thread_id"], "react", input=human(question(n)))
            made.append((n, thread["thread_id"], run["run_id"]))

    await asyncio.gather(*(client() for _ in range(clients)))
    return [(thread, run) for _n, thread, run in sorted(made)]


def add_spares(raw: redis.Redis, keys: ServiceKeys, threads: list[str], total: int) -> int:
    """Spare notifications for the runs' threads until the queue holds `total` entries; beside them, the same
    entries in a stream trimmed as the queue used to be. How many of the runs' tokens that one still holds."""
    old = f"{keys.prefix}old-trimmed-queue"
    first = raw.xrange(keys.queue, count=len(threads))  # the runs' own tokens: the oldest
    pipe = raw.pipeline(transaction=False)
    for _entry, fields in first:
        pipe.xadd(old, fields, maxlen=OLD_TRIM, approximate=True)
    run_tokens = set(pipe.execute())
    spare = total - raw.xlen(keys.queue)
    for start in range(0, spare, 10_000):
        pipe = raw.pipeline(transaction=False)
        for index in range(start, min(spare, start + 10_000)):
            fields = {"t": threads[index % len(threads)]}
            pipe.xadd(keys.queue, fields)
            pipe.xadd(old, fields, maxlen=OLD_TRIM, approximate=True)
        pipe.execute()
    kept = sum(1 for entry, _fields in raw.xrange(old, count=len(threads)) if entry in run_tokens)
    raw.delete(old)
    return kept


def drain(raw: redis.Redis, keys: ServiceKeys, env: dict[str, str], workers: int, runs: int, work: Path,
          verbose: bool = False) -> tuple[float, dict[str, float]]:
    """Start the workers; (seconds until every run ended and the queue is empty, the service's counters)."""
    started = time.perf_counter()
    processes = [subprocess.Popen([REACTGRAPH, "worker", "--concurrency", "16"], env=env,
                                  stdout=(work / f"worker-{i}.log").open("w"), stderr=subprocess.STDOUT)
                 for i in range(workers)]
    try:
        while True:
            counters = {k.decode(): float(v) for k, v in raw.hgetall(keys.counters).items()}
            ended = sum(v for k, v in counters.items() if k.startswith("finished_"))
            if ended >= runs and raw.xlen(keys.queue) == 0:
                return time.perf_counter() - started, counters
            if verbose:
                print(f"  {time.perf_counter() - started:6.1f} s: {ended:.0f} runs ended, "
                      f"{raw.xlen(keys.queue):,} tokens left", flush=True)
            if time.perf_counter() - started > 3600:
                raise SystemExit(f"not drained in an hour: {ended:.0f} of {runs} runs ended, "
                                 f"{raw.xlen(keys.queue)} tokens left")
            time.sleep(5 if verbose else 1)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=60)


async def run_twice(url: str, runs: list[tuple[str, str]]) -> tuple[int, int]:
    """(runs not ended `success`, threads whose checkpoints carry other than exactly one run id), read through the
    API as a client would."""
    sdk, failed, twice = sdk_client(url, None), 0, 0
    for thread_id, run_id in runs:
        failed += (await sdk.runs.get(thread_id, run_id))["status"] != "success"
        history = await sdk.threads.get_history(thread_id, limit=100)
        twice += len({h["metadata"].get("run_id") for h in history} - {None}) != 1
    return failed, twice


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--notifications", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--progress", action="store_true", help="print the drain's progress every 5 s")
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15"))
    args = parser.parse_args()
    raw = redis.Redis.from_url(args.redis_url)
    prefix = f"bench-backlog-{os.getpid()}"
    env = {**os.environ, "REDIS_URL": args.redis_url, "REACTGRAPH_MODEL": "offline",
           "REACTGRAPH_SERVICE_PREFIX": prefix}
    keys = ServiceKeys(prefix)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        url, api = start_serve(args.redis_url, work, 0, prefix=prefix)
        try:
            made = time.perf_counter()
            runs = asyncio.run(create_runs(url, args.runs))
            made = time.perf_counter() - made
            kept_by_old_trim = add_spares(raw, keys, [thread for thread, _run in runs], args.notifications)
            queued = raw.xlen(keys.queue)
            seconds, counters = drain(raw, keys, env, args.workers, len(runs), work, args.progress)
            failed, twice = asyncio.run(run_twice(url, runs))
        finally:
            api.terminate()
            api.wait(timeout=60)
            forget(args.redis_url, prefix)
    print(f"runs created with the workers down: {len(runs)} in {made:.1f} s")
    print(f"queue entries before the workers started: {queued:,} (the runs' {len(runs)} tokens the oldest)")
    print(f"the same notifications in a stream trimmed at MAXLEN ~ {OLD_TRIM:,} (the former queue): "
          f"{kept_by_old_trim} of the {len(runs)} runs' tokens kept, {len(runs) - kept_by_old_trim} runs lost")
    print(f"this queue: {failed} runs not ended `success` (lost), {twice} run twice; counters: started "
          f"{counters.get('started', 0):.0f}, finished_success {counters.get('finished_success', 0):.0f}")
    print(f"drained by {args.workers} workers in {seconds:.1f} s: {queued / seconds:,.0f} tokens/s")


if __name__ == "__main__":
    main()
