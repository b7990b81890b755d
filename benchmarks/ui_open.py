"""How long the debugger page takes to open a session of 100 turns, against one of a single turn, side by side.

Two sessions are made with the ReAct graph on the scripted offline model (no network, no key): one of one turn
and one of `--turns` turns (100: about 900 checkpoints), asked in this process through `RedisSaver` as the
command line asks them, so the page lists them as the CLI's sessions. Then `reactgraph ui` serves them from
that Redis under a service prefix of its own, and headless Chromium (Debian's, with tests/js's playwright-core)
opens each by clicking it in the sessions list, in alternating order, `--rounds` times: the time is taken in the
page, from the click until the session's turns and its newest turn's timeline are on the page and the next
frame has been drawn. The page reads a session's history a page at a time (reactgraph/ui/static/turns.js), so
this is the time of one page of history whatever the session's length; for scale, the whole history of the long
session is read once through the same API. Nothing here asserts a time.

Then the sessions list searched on the server, as the page asks for it (50 a page, titles selected), with
`--sessions` more sessions of one turn in the store: the newest 50, a text in one session's question (every
session read), in none, in many; and the first text search, which reads each session's first question from its
checkpoints once and keeps it.

    python benchmarks/ui_open.py [--turns 100] [--rounds 9] [--sessions 1000] [--redis-url redis://127.0.0.1:6379/15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import redis
from langchain_core.messages import HumanMessage

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from session_growth import question_for  # noqa: E402 - the sibling script: benchmarks/ is on sys.path[0]

from reactgraph.graph import Context, build_react_graph  # noqa: E402
from reactgraph.memory import RedisSaver  # noqa: E402
from support.debugger_browser import run_page_script  # noqa: E402
from support.local_servers import free_port  # noqa: E402

REACTGRAPH = str(Path(sys.executable).parent / "reactgraph")  # the console script beside this interpreter
STARTUP_S = 60


def make_session(saver: RedisSaver, turns: int) -> tuple[str, float]:
    """(a new session of `turns` turns, the seconds it took to ask them)."""
    graph = build_react_graph(checkpointer=saver)
    thread_id, started = f"bench-ui-{turns}-{uuid.uuid4().hex[:8]}", time.perf_counter()
    for turn in range(turns):
        graph.invoke({"messages": [HumanMessage(question_for(turn))]},
                     config={"configurable": {"thread_id": thread_id}}, context=Context())
    return thread_id, time.perf_counter() - started


def serve(redis_url: str, prefix: str, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "REDIS_URL": redis_url, "REACTGRAPH_SERVICE_PREFIX": prefix}
    process = subprocess.Popen([REACTGRAPH, "ui", "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
                               stderr=log.open("w"))
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"reactgraph ui exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit(f"reactgraph ui did not answer in {STARTUP_S} s")


def whole_history(url: str, thread_id: str) -> tuple[int, float, int]:
    """(checkpoints, seconds, bytes) of reading the session's whole history in one request."""
    started = time.perf_counter()
    answer = httpx.post(f"{url}/threads/{thread_id}/history", json={"limit": 1000}, timeout=120)
    answer.raise_for_status()
    return len(answer.json()), time.perf_counter() - started, len(answer.content)


def report(opens: dict[str, list[dict[str, Any]]], short: str, long: str, turns: int) -> None:
    print(f"\n{'session':<10} {'median ms':>9} {'min':>6} {'max':>6} {'in DOM ms':>9} {'requests':>8} "
          f"{'KB':>6} {'turns shown':>11}")
    medians = {}
    for name, thread_id in (("1 turn", short), (f"{turns} turns", long)):
        runs = opens[thread_id]
        drawn = [r["drawn"] for r in runs]
        medians[name] = statistics.median(drawn)
        requests = {len(r["requests"]) for r in runs}
        print(f"{name:<10} {medians[name]:>9.0f} {min(drawn):>6.0f} {max(drawn):>6.0f} "
              f"{statistics.median(r['inDom'] for r in runs):>9.0f} {'/'.join(map(str, sorted(requests))):>8} "
              f"{statistics.median(r['bytes'] for r in runs) / 1024:>6.0f} {runs[0]['turns']:>11}")
    for r in opens[long] + opens[short]:
        if len(r["requests"]) > 2:
            print(f"an open that made more requests: {r['requests']}")
    print(f"\n{turns} turns / 1 turn: {medians[f'{turns} turns'] / medians['1 turn']:.2f}x "
          f"(medians of {len(opens[short])} opens each); requests of one open: {opens[long][0]['requests']}")


def make_sessions(saver: RedisSaver, count: int) -> tuple[list[str], str]:
    """(`count` sessions of one turn each, asked as the CLI asks them, the word only the last one's question holds)."""
    graph, marker = build_react_graph(checkpointer=saver), f"备注{uuid.uuid4().hex[:8]}"
    ids = [f"bench-ui-s{n}-{uuid.uuid4().hex[:8]}" for n in range(count)]
    for n, thread_id in enumerate(ids):
        question = question_for(n) + (f"（{marker}）" if n == count - 1 else "")
        graph.invoke({"messages": [HumanMessage(question)]}, config={"configurable": {"thread_id": thread_id}},
                     context=Context())
    return ids, marker


def timed_search(url: str, body: dict[str, Any]) -> tuple[float, int]:
    """(ms, sessions found) of one search as the page asks for its list: 50 a page, titles selected."""
    started = time.perf_counter()
    answer = httpx.post(f"{url}/threads/search", timeout=120, json={
        "limit": 50, "select": ["thread_id", "title", "status", "metadata", "updated_at"], **body})
    answer.raise_for_status()
    return (time.perf_counter() - started) * 1000, len(answer.json())


def first_search(url: str, made: int, marker: str) -> None:
    """Once every session has a record: the first text search, which reads each one's first question."""
    while (counted := httpx.post(f"{url}/threads/count", json={}, timeout=120).json()) < made:
        pass  # each search or count gives the CLI's sessions records, 100 at a time
    first_ms, hits = timed_search(url, {"text": marker})
    print(f"{counted} sessions in the store; the first text search, reading each session's first question from "
          f"its checkpoints once: {first_ms:.0f} ms ({hits} found)")


def searched(url: str, rounds: int, marker: str) -> None:
    """The sessions list searched on the server, its titles kept: ms per request."""
    print(f"\n{'search (50 a page, titles)':<34} {'p50 ms':>7} {'p95 ms':>7} {'found':>6}")
    for name, body in (("the newest 50, no text", {}), (f"text in one session ({marker})", {"text": marker}),
                       ("text in none", {"text": "不在任何问题里"}), ("text in many (天气)", {"text": "天气"})):
        runs = [timed_search(url, body) for _ in range(rounds)]
        ms = sorted(r[0] for r in runs)
        print(f"{name:<34} {statistics.median(ms):>7.1f} {ms[int(0.95 * (len(ms) - 1))]:>7.1f} {runs[0][1]:>6}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--sessions", type=int, default=1000, help="sessions to search (0: no search)")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    args = parser.parse_args()
    prefix = f"bench-ui-{uuid.uuid4().hex[:8]}"
    log = Path(f"/tmp/{prefix}.log")
    saver = RedisSaver.from_url(args.redis_url)
    threads: list[str] = []
    process = None
    try:
        for turns in (1, args.turns):
            thread_id, seconds = make_session(saver, turns)
            threads.append(thread_id)
            print(f"made a session of {turns} turn(s) in {seconds:.1f} s: {thread_id} "
                  f"({len(saver.checkpoint_ids({'configurable': {'thread_id': thread_id}}, 10_000))} checkpoints)")
        if args.sessions:
            started = time.perf_counter()
            made, marker = make_sessions(saver, args.sessions)
            threads += made
            print(f"made {args.sessions} sessions of one turn in {time.perf_counter() - started:.1f} s")
        process, url = serve(args.redis_url, prefix, log)
        if args.sessions:
            first_search(url, len(threads), marker)
        result = run_page_script(ROOT / "benchmarks" / "ui_open.mjs",
                                 [f"{url}/ui/", str(args.rounds), *threads[:2]], timeout=600)
        assert not result["offLoopback"] and not result["console"], result
        report(result["opens"], threads[0], threads[1], args.turns)
        count, seconds, size = whole_history(url, threads[1])
        print(f"for scale, the {args.turns}-turn session's whole history in one request: {count} checkpoints, "
              f"{seconds * 1000:.0f} ms, {size / 1024:.0f} KB")
        if args.sessions:
            searched(url, args.rounds * 3, marker)
    finally:
        if process is not None:
            process.terminate()
            process.wait(timeout=30)
        for thread_id in threads:
            saver.delete_thread(thread_id)
        saver.close()
        client = redis.Redis.from_url(args.redis_url)
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()


if __name__ == "__main__":
    main()
