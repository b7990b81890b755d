"""`reactgraph serve` measured side by side: against `langgraph dev`, from 1 to 3 workers, under the 1,000-run load,
and the Redis bytes an idle thread keeps with keep-latest retention.

1. Runs per second and latency, scripted offline model, the ReAct graph: `reactgraph serve` (one worker in the
   API process) and `langgraph dev` (in memory: a langgraph.json without checkpointer or store) run at once on
   the same machine; rounds alternate between them. Each round, `--clients` langgraph-sdk clients each create a
   thread and `runs.wait` a calculator question on it, `--runs` runs in all; then rounds of one client, so no
   run waits behind another. The graph's own time for the same questions (`ainvoke` in this process,
   InMemorySaver) is the reference: "added" = one client's p50 latency - the graph's p50.
2. `reactgraph serve --workers 0` + 1, 2, 3 `reactgraph worker` processes (one service per count, all started
   at once, rounds alternating): runs per second, and the CPU seconds per run each kind of process used.
3. The load of tests/test_serve_load.py at `--load-runs` (1,000): 2 API processes, 3 workers, 50 clients,
   4 runs per thread enqueued over both API processes; lost, duplicated and interleaved counts, and its time.
5. Auth on vs off: two `reactgraph serve` (1 worker each) at once, one with `--config` naming the example auth
   file (tests/support/auth_owner.py: a bearer token per user, every thread action filtered to its owner), one without;
   rounds alternate. Runs per second (`--clients` clients, runs.wait on a fresh thread), and the latency of a
   plain request (GET /threads/{id}, one client) p50/p99: the time the handler adds to every call.
4. `--idle-threads` threads of 4 turns each; then a worker with `--thread-ttl 2s --ttl-strategy keep_latest
   --sweep-every 1s` sweeps them: bytes per thread (MEMORY USAGE of the keys with the thread's hash tag, and
   the saver's `usage()` for its checkpoints) before and after.

Nothing here asserts a time. Needs the serve and dev extras (langgraph-cli[inmem]) and Redis.

    python benchmarks/serve.py [--runs 120] [--clients 8] [--rounds 3] [--load-runs 1000] [--idle-threads 50] \
        [--only dev|scaling|load|idle|auth] [--redis-url redis://127.0.0.1:6379/15]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil
import redis

ROOT = Path(__file__).resolve().parents[1]
# the load and its checks are the test suite's (tests/support/serve_load.py, imported as `support.serve_load`)
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from serve_harness import (  # noqa: E402
    cpu_s,
    graph_time,
    one_round,
    pct,
    request_latencies,
    start_dev,
    start_serve,
    thread_bytes,
    workers_alive,
)

from support.serve_load import check, drive, plan, start_scaled_service  # noqa: E402
from test_serve import stop, wait_for  # noqa: E402


def versus_dev(args: argparse.Namespace, work: Path) -> None:
    serve_url, serve_process = start_serve(args.redis_url, work, workers=1)
    dev_url, dev_process = start_dev(work)
    sides = {"reactgraph serve (1 worker)": (serve_url, [serve_process]), "langgraph dev": (dev_url, [dev_process])}
    rates: dict[str, list[float]] = {name: [] for name in sides}
    latencies: dict[str, list[float]] = {name: [] for name in sides}
    cpu: dict[str, float] = dict.fromkeys(sides, 0.0)
    try:
        for url, _ in sides.values():
            asyncio.run(one_round(url, 2 * args.clients, args.clients, 10_000))  # warm up: imports, compilations
        for r in range(args.rounds):
            names = list(sides) if r % 2 == 0 else list(reversed(sides))
            for name in names:
                url, processes = sides[name]
                before = cpu_s(processes)
                rate, times = asyncio.run(one_round(url, args.runs, args.clients, r * args.runs))
                cpu[name] += cpu_s(processes) - before
                rates[name].append(rate)
                latencies[name] += times
        alone: dict[str, list[float]] = {name: [] for name in sides}  # one client: no run waits behind another
        for r in range(2 * args.rounds):
            for name in (list(sides) if r % 2 == 0 else list(reversed(sides))):
                alone[name] += asyncio.run(one_round(sides[name][0], 10, 1, 50_000 + 10 * r))[1]
    finally:
        serve_process.terminate()
        os.killpg(dev_process.pid, signal.SIGTERM)
        serve_process.wait(30)
        dev_process.wait(30)
    graph = statistics.median(graph_time(60))
    print(f"\n## 1. reactgraph serve vs langgraph dev: {args.rounds} rounds of {args.runs} runs.wait, "
          f"{args.clients} clients, fresh thread per run")
    print(f"| server | runs/s (median of rounds) | latency p50 / p99, {args.clients} clients | latency p50 / p99, "
          "one client | added over the graph (one client, p50) | CPU per run |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name in sides:
        p50, p99 = pct(latencies[name], 0.5), pct(latencies[name], 0.99)
        one50, one99 = pct(alone[name], 0.5), pct(alone[name], 0.99)
        print(f"| {name} | {statistics.median(rates[name]):.1f} | {p50 * 1000:.0f} / {p99 * 1000:.0f} ms | "
              f"{one50 * 1000:.0f} / {one99 * 1000:.0f} ms | {(one50 - graph) * 1000:.0f} ms | "
              f"{cpu[name] / (args.rounds * args.runs) * 1000:.1f} ms |")
    ours, theirs = (statistics.median(rates[name]) for name in sides)
    print(f"graph alone (ainvoke, in process): p50 {graph * 1000:.1f} ms")
    print(f"throughput ratio serve / dev: **{ours / theirs:.2f}×**; p50 latency ratio dev / serve: "
          f"{pct(latencies['langgraph dev'], 0.5) / pct(latencies['reactgraph serve (1 worker)'], 0.5):.2f}×")


def auth_overhead(args: argparse.Namespace, work: Path) -> None:
    config = work / "langgraph.json"
    config.write_text(json.dumps({"auth": {"path": str(ROOT / "tests" / "support" / "auth_owner.py") + ":auth"}}))
    options: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
        "auth off": ((), {}),
        "auth on (tests/support/auth_owner.py)": (("--config", str(config)), {"Authorization": "Bearer token-alice"})}
    rates: dict[str, list[float]] = {name: [] for name in options}
    latencies: dict[str, list[float]] = {name: [] for name in options}
    requests: dict[str, list[float]] = {name: [] for name in options}
    ratios: list[float] = []  # runs/s off / on, one per start order
    # Two servers started one after the other do not run alike on a busy machine (an A/A check of two auth-off
    # servers gave the second ~1.4× the runs/s): so the measure is taken twice, each side started first once.
    for order in (list(options), list(reversed(options))):
        sides = {name: start_serve(args.redis_url, work, 1, *options[name][0]) for name in order}
        seen = {name: len(rates[name]) for name in options}
        try:
            for name, (url, _) in sides.items():
                asyncio.run(one_round(url, 2 * args.clients, args.clients, 10_000, options[name][1]))  # warm up
            for r in range(max(1, args.rounds // 2)):
                for name in (order if r % 2 == 0 else list(reversed(order))):
                    url, headers = sides[name][0], options[name][1]
                    rate, times = asyncio.run(one_round(url, args.runs, args.clients, r * args.runs, headers))
                    rates[name].append(rate)
                    latencies[name] += times
                    requests[name] += request_latencies(url, headers, 200)
        finally:
            for _, process in sides.values():
                process.terminate()
                process.wait(30)
        off_rates, on_rates = (rates[name][seen[name]:] for name in options)
        ratios.append(statistics.median(off_rates) / statistics.median(on_rates))
    print(f"\n## 5. auth on vs off: {args.rounds} rounds of {args.runs} runs.wait, {args.clients} clients, and "
          "GET /threads/{id} ×200 per round, one client")
    print("| | runs/s (median of rounds) | run latency p50 / p99 | request latency p50 / p99 |")
    print("| --- | ---: | ---: | ---: |")
    for name in options:
        print(f"| {name} | {statistics.median(rates[name]):.1f} | {pct(latencies[name], 0.5) * 1000:.0f} / "
              f"{pct(latencies[name], 0.99) * 1000:.0f} ms | {pct(requests[name], 0.5) * 1000:.2f} / "
              f"{pct(requests[name], 0.99) * 1000:.2f} ms |")
    off, on = options
    print(f"slowdown (runs/s off / on), off started first: {ratios[0]:.3f}×, on started first: {ratios[1]:.3f}×; "
          f"geometric mean (the start order cancelled): **{(ratios[0] * ratios[1]) ** 0.5:.3f}×** (goal ≤ 1.05×)")
    print("request latency added: p50 "
          f"{(pct(requests[on], 0.5) - pct(requests[off], 0.5)) * 1000:+.2f} ms, p99 "
          f"{(pct(requests[on], 0.99) - pct(requests[off], 0.99)) * 1000:+.2f} ms")


def scaling(args: argparse.Namespace, work: Path) -> None:
    services = {}
    for workers in (1, 2, 3):
        (work / f"w{workers}").mkdir()
        service, urls = start_scaled_service(args.redis_url, work / f"w{workers}", apis=1, workers=workers,
                                             REACTGRAPH_MODEL="offline")
        services[workers] = (service, urls[0])
    rates: dict[int, list[float]] = {w: [] for w in services}
    api_cpu, worker_cpu = dict.fromkeys(services, 0.0), dict.fromkeys(services, 0.0)
    clients = max(args.clients, 12)
    try:
        wait_for(lambda: all(workers_alive(url) == w for w, (_s, url) in services.items()), 60, "the workers")
        for _s, url in services.values():
            asyncio.run(one_round(url, 2 * clients, clients, 20_000))
        for r in range(args.rounds):
            for workers in (list(services) if r % 2 == 0 else list(reversed(services))):
                service, url = services[workers]
                before = cpu_s(service.processes[:1]), cpu_s(service.processes[1:])
                rate, _ = asyncio.run(one_round(url, args.runs, clients, r * args.runs))
                api_cpu[workers] += cpu_s(service.processes[:1]) - before[0]
                worker_cpu[workers] += cpu_s(service.processes[1:]) - before[1]
                rates[workers].append(rate)
    finally:
        for service, _url in services.values():
            stop(service)
    print(f"\n## 2. 1 → 3 workers (`serve --workers 0` + M `reactgraph worker`, --concurrency 4): "
          f"{args.rounds} rounds of {args.runs} runs.wait, {clients} clients")
    print("| workers | runs/s (median) | vs 1 worker | CPU per run: API process | CPU per run: workers |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    base = statistics.median(rates[1])
    for workers in services:
        done = args.rounds * args.runs
        rate = statistics.median(rates[workers])
        print(f"| {workers} | {rate:.1f} | {rate / base:.2f}× "
              f"| {api_cpu[workers] / done * 1000:.1f} ms | {worker_cpu[workers] / done * 1000:.1f} ms |")
    print(f"cores: {psutil.cpu_count()} (load average before: {os.getloadavg()[0]:.1f})")


def load(args: argparse.Namespace, work: Path) -> None:
    service, urls = start_scaled_service(args.redis_url, work, apis=2, workers=3)
    try:
        threads = plan(args.load_runs, 4)
        result = asyncio.run(drive(urls, threads, 50, timeout_s=60 + args.load_runs))
        found = asyncio.run(check(urls, result, service.calls(), args.redis_url,
                                  service.env["REACTGRAPH_SERVICE_PREFIX"]))
    finally:
        stop(service)
    print(f"\n## 3. load: {args.load_runs} runs, 50 clients, 2 API processes, 3 workers, 4 runs per thread (enqueue)")
    print(f"time {result.wall_s:.1f} s ({args.load_runs / result.wall_s:.1f} runs/s); run created → joined: p50 "
          f"{pct(result.run_s, 0.5):.2f} s, p99 {pct(result.run_s, 0.99):.2f} s")
    print(f"lost {len(found.lost)} · duplicated tool calls {len(found.duplicated)} · "
          f"interleaved {len(found.interleaved)} · client errors {len(result.errors)} · "
          f"runs checked {found.runs_checked}")
    for line in (found.lost + found.duplicated + found.interleaved + result.errors)[:5]:
        print("  ", line)


def idle_bytes(args: argparse.Namespace, work: Path) -> None:
    from reactgraph.memory.redis_checkpoint import RedisSaver

    service, urls = start_scaled_service(args.redis_url, work, apis=1, workers=1)
    raw = redis.Redis.from_url(args.redis_url)
    saver = RedisSaver.from_url(args.redis_url)
    try:
        threads = plan(4 * args.idle_threads, 4)
        result = asyncio.run(drive(urls, threads, 10, timeout_s=600))
        ids = [t.thread_id for t in result.threads]
        before, before_cp = thread_bytes(raw, ids), [u.bytes for u in saver.usage(ids)]
        service.start_worker("--thread-ttl", "2s", "--ttl-strategy", "keep_latest", "--sweep-every", "1s")

        def all_pruned() -> bool:
            return all(u.checkpoints == 1 for u in saver.usage(ids))

        wait_for(all_pruned, 120, "every thread pruned to its latest checkpoint")
        time.sleep(1)
        after, after_cp = thread_bytes(raw, ids), [u.bytes for u in saver.usage(ids)]
    finally:
        stop(service)
        saver.close()
        raw.close()
    n = len(ids)
    print(f"\n## 4. bytes per idle thread ({n} threads × 4 turns), keep_latest sweep "
          "(--thread-ttl 2s --sweep-every 1s)")
    print("| | all keys of the thread (MEMORY USAGE) | of which checkpoints (saver usage) |")
    print("| --- | ---: | ---: |")
    print(f"| before the sweep | {sum(before) / n / 1024:.1f} KiB | {sum(before_cp) / n / 1024:.1f} KiB |")
    print(f"| after the sweep | {sum(after) / n / 1024:.1f} KiB | {sum(after_cp) / n / 1024:.1f} KiB |")
    print(f"**{sum(before) / max(1, sum(after)):.1f}× smaller** per idle thread")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=120, help="runs per round and side")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--load-runs", type=int, default=1000)
    parser.add_argument("--idle-threads", type=int, default=50)
    parser.add_argument("--only", choices=["dev", "scaling", "load", "idle", "auth"], action="append")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    args = parser.parse_args()
    os.environ.setdefault("REDIS_URL", args.redis_url)
    # The servers it starts run this checkout's code (the `reactgraph` script alone imports the installed one).
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    parts = {"dev": versus_dev, "scaling": scaling, "load": load, "idle": idle_bytes, "auth": auth_overhead}
    print(f"machine: {psutil.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, Python "
          f"{sys.version.split()[0]}, Redis {redis.Redis.from_url(args.redis_url).info()['redis_version']}")
    for name in args.only or list(parts):
        with tempfile.TemporaryDirectory(prefix=f"bench-serve-{name}-") as work:
            parts[name](args, Path(work))


if __name__ == "__main__":
    main()
