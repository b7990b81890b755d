"""What benchmarks/serve.py's parts share: the servers it starts (`reactgraph serve`, `langgraph dev`), a round of
runs from langgraph-sdk clients, the graph's own time, and what it reads off processes and Redis (CPU, workers
alive, a thread's bytes). Imported by serve.py once it has put the repository and tests/ on sys.path."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import redis

from reactgraph.studio import launcher as studio
from support.serve_load import answers_ok, human, sdk_client
from test_serve import free_port, wait_for

ROOT = Path(__file__).resolve().parents[1]
REACTGRAPH = str(Path(sys.executable).parent / "reactgraph")  # the console script beside this interpreter


def question(n: int) -> str:
    return f"计算 {n % 97} + {n % 89} 等于多少"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def one_round(url: str, runs: int, clients: int, offset: int, headers: dict[str, str] | None = None
                    ) -> tuple[float, list[float]]:
    """(runs per second, latency of each run in s): `clients` clients, each a fresh thread per run, `headers` on
    every request."""
    todo, latencies = list(range(offset, offset + runs)), []

    async def client() -> None:
        sdk = sdk_client(url, headers)
        while todo:
            n = todo.pop()
            thread = await sdk.threads.create()
            started = time.perf_counter()
            final = await sdk.runs.wait(thread["thread_id"], "react", input=human(question(n)))
            latencies.append(time.perf_counter() - started)
            if str(n % 97 + n % 89) not in str(final.get("final_answer")):
                raise AssertionError(f"{url}: wrong answer to {question(n)!r}: {final.get('final_answer')!r}")

    started = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(client() for _ in range(clients))), 600)
    return runs / (time.perf_counter() - started), latencies


def graph_time(runs: int) -> list[float]:
    """The same questions through the graph in this process: what neither server can go below."""
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from reactgraph.graph import Context, build_react_graph

    graph, times = build_react_graph(checkpointer=InMemorySaver()), []

    async def go() -> None:
        for n in range(runs):
            started = time.perf_counter()
            await graph.ainvoke({"messages": [HumanMessage(question(n))]}, {"configurable": {"thread_id": str(n)}},
                                context=Context(model="offline"))
            times.append(time.perf_counter() - started)

    asyncio.run(go())
    return times[5:]


def start_dev(work: Path) -> tuple[str, subprocess.Popen]:
    """`langgraph dev` on the same graphs, persistence in memory (no checkpointer, no store in its config)."""
    config = work / "langgraph.json"
    config.write_text(json.dumps({"dependencies": [str(ROOT)], "graphs": {"react": f"{ROOT}/graph/studio.py:react"},
                                  "python_version": "3.11"}))
    port = free_port()
    env = studio.studio_env({**os.environ, "REACTGRAPH_MODEL": "offline"})
    env.pop("REDIS_URL", None)
    with (work / "dev.log").open("w") as log:
        process = subprocess.Popen(studio.studio_command("127.0.0.1", port, reload=False, config=config), cwd=work,
                                   env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: answers_ok(url), 120, "langgraph dev answering /ok")
    return url, process


def start_serve(redis_url: str, work: Path, workers: int, *options: str, prefix: str | None = None
                ) -> tuple[str, subprocess.Popen]:
    port = free_port()
    env = {**os.environ, "REDIS_URL": redis_url, "REACTGRAPH_MODEL": "offline",
           "REACTGRAPH_SERVICE_PREFIX": prefix or f"bench-serve-{os.getpid()}-{port}"}
    with (work / f"serve-{port}.log").open("w") as log:
        process = subprocess.Popen([REACTGRAPH, "serve", "--port", str(port), "--workers", str(workers), *options],
                                   env=env,
                                   stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: answers_ok(url), 120, "reactgraph serve answering /ok")
    return url, process


def cpu_s(processes: list[Any]) -> float:
    total = 0.0
    for process in processes:
        try:
            for p in [psutil.Process(process.pid), *psutil.Process(process.pid).children(recursive=True)]:
                times = p.cpu_times()
                total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def request_latencies(url: str, headers: dict[str, str], n: int) -> list[float]:
    """GET /threads/{id} of one thread, one client, n times: one request's time with and without auth."""
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        thread = client.post("/threads", json={}).json()["thread_id"]
        for _ in range(20):  # warm: connection, imports
            client.get(f"/threads/{thread}").raise_for_status()
        times = []
        for _ in range(n):
            started = time.perf_counter()
            client.get(f"/threads/{thread}").raise_for_status()
            times.append(time.perf_counter() - started)
    return times


def workers_alive(url: str) -> int:
    try:
        text = httpx.get(f"{url}/metrics", timeout=5).text
    except httpx.HTTPError:
        return -1
    line = next((li for li in text.splitlines() if li.startswith("reactgraph_workers_alive ")), "x -1")
    return int(float(line.split()[1]))


def thread_bytes(raw: redis.Redis, thread_ids: list[str]) -> list[int]:
    """MEMORY USAGE summed over every key carrying each thread's hash tag (checkpoints, writes, records, events)."""
    wanted = {f"{{{t}}}": i for i, t in enumerate(thread_ids)}
    totals = [0] * len(thread_ids)
    for key in raw.scan_iter(match="*{*}*", count=2000):
        text = key.decode(errors="replace")
        tag = text[text.find("{"):text.find("}") + 1]
        if tag in wanted:
            totals[wanted[tag]] += raw.memory_usage(key, samples=0) or 0
    return totals
