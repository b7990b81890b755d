"""A load on `reactgraph serve`: many langgraph-sdk clients enqueue several runs per thread, spread over the API
processes, then everything is checked for lost runs, duplicated tool calls and interleaved turns.

Used by tests/test_serve_load.py (a few hundred runs) and benchmarks/serve.py (the issue's 1,000). Each thread
gets its questions from one client, created one after another, each on the next API process in turn, so the
order in which the runs were created is known and several runs wait on the thread at once (the enqueue
strategy's order is what the answers are checked against). Weather questions name a town of their own, so
the tool log (tests/support/service_tools.py) must hold each call exactly once.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import redis.asyncio
from langgraph_sdk.client import LangGraphClient

from reactgraph._tls import shared_ssl_context
from reactgraph.service.keys import ServiceKeys
from support.forked_commands import ForkedCommand
from test_serve import Service, free_port, start_service, wait_for

_STEMS = "甲乙丙丁戊己庚辛壬癸"  # digits as characters: the offline model reads a short run of hanzi as a place
# The window of messages kept verbatim covers the whole thread, so the check sees every turn (older turns
# would otherwise be folded into the summary and their messages removed from the state).
WHOLE_THREAD = {"memory_window": 100}
CALL_TIMEOUT = httpx.Timeout(connect=5, read=120, write=30, pool=60)


def sdk_client(url: str, headers: dict[str, str] | None = None) -> LangGraphClient:
    """langgraph-sdk's async client as `get_client` builds it (httpx keeps idle connections 5 s; the server keeps
    them 65 s, so a reused connection is never one the server is closing), with the load's longer timeouts and
    `headers` on every request (credentials)."""
    transport = httpx.AsyncHTTPTransport(retries=5, verify=shared_ssl_context(httpx))  # one TLS context for all
    return LangGraphClient(httpx.AsyncClient(
        base_url=url, timeout=CALL_TIMEOUT, headers=headers, transport=transport,
        limits=httpx.Limits(max_connections=100, max_keepalive_connections=20)))


def town(n: int) -> str:
    return "镇" + "".join(_STEMS[int(d)] for d in f"{n:04d}")


def question(n: int) -> str:
    """The n-th question of the load: every other one calls get_weather (logged), the rest the calculator."""
    return f"{town(n)}的天气怎么样？" if n % 2 == 0 else f"计算 {n} + {n * 7 % 1000} 等于多少"


def expected_answer_part(n: int) -> str:
    return town(n) if n % 2 == 0 else str(n + n * 7 % 1000)


@dataclass
class ThreadLoad:
    """One thread's share of the load: question numbers, and the run ids in the order they were created."""

    numbers: list[int]
    thread_id: str = ""
    run_ids: list[str] = field(default_factory=list)


@dataclass
class LoadResult:
    threads: list[ThreadLoad]
    wall_s: float = 0.0
    run_s: list[float] = field(default_factory=list)  # per run: created → its join returned
    errors: list[str] = field(default_factory=list)


def start_scaled_service(redis_url: str, tmp: Any, *, apis: int, workers: int, concurrency: int = 4,
                         **extra: str) -> tuple[Service, list[str]]:
    """`apis` × `reactgraph serve --workers 0` and `workers` × `reactgraph worker` on one Redis and one service
    prefix: (the service, for its env, tool log and processes to stop; the API processes' URLs)."""
    service = start_service(redis_url, tmp, workers=0, **extra)
    urls = [service.url]

    def spawn(*args: str) -> None:  # stderr to a file: a pipe nobody reads would stall a chatty process
        err = Path(tmp) / f"{args[0]}-{len(service.processes)}.err"
        service.processes.append(ForkedCommand(list(args), service.env, stderr=err))

    for _ in range(apis - 1):
        port = free_port()
        spawn("serve", "--port", str(port), "--workers", "0")
        urls.append(f"http://127.0.0.1:{port}")
        wait_for(lambda url=urls[-1]: answers_ok(url), 60, f"the API process at {urls[-1]}")
    for _ in range(workers):
        spawn("worker", "--concurrency", str(concurrency))
    return service, urls


def answers_ok(url: str) -> bool:
    """Whether a server at `url` answers GET /ok with 200 (within a second)."""
    try:
        return httpx.get(f"{url}/ok", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def plan(runs: int, per_thread: int) -> list[ThreadLoad]:
    return [ThreadLoad(list(range(start, min(start + per_thread, runs)))) for start in range(0, runs, per_thread)]


def human(text: str) -> dict:
    return {"messages": [{"role": "human", "content": text}]}


async def drive(urls: list[str], threads: list[ThreadLoad], clients: int, *, timeout_s: float) -> LoadResult:
    """`clients` concurrent clients share out `threads`; each creates its thread's runs (enqueue), then joins
    them in order. Fails after `timeout_s` in all."""
    result, todo = LoadResult(threads), list(reversed(threads))

    async def one_client(number: int) -> None:
        sdks = [sdk_client(url) for url in urls]
        turn = number  # which API process the next request goes to: spread over all of them
        while todo:
            load = todo.pop()
            try:
                load.thread_id = (await sdks[turn % len(sdks)].threads.create())["thread_id"]
                created = []
                for n in load.numbers:
                    turn += 1
                    run = await sdks[turn % len(sdks)].runs.create(load.thread_id, "react", input=human(question(n)),
                                                                   multitask_strategy="enqueue", context=WHOLE_THREAD)
                    load.run_ids.append(run["run_id"])
                    created.append(time.perf_counter())
                for run_id, started in zip(load.run_ids, created, strict=True):
                    turn += 1
                    await sdks[turn % len(sdks)].runs.join(load.thread_id, run_id)
                    result.run_s.append(time.perf_counter() - started)
            except (httpx.HTTPError, OSError) as exc:  # counted as lost by the checks; the load goes on
                result.errors.append(f"thread {load.thread_id or '?'}: {type(exc).__name__}: {exc}"[:300])

    started = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(one_client(i) for i in range(clients))), timeout_s)
    result.wall_s = time.perf_counter() - started
    return result


@dataclass
class Findings:
    """What the checks found: each list names the threads or calls at fault, and should be empty."""

    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    interleaved: list[str] = field(default_factory=list)
    runs_checked: int = 0


def _turn_problem(messages: list[dict], numbers: list[int]) -> str | None:
    """Why the thread's messages are not its questions' turns one after another, each whole, or None."""
    turns: list[list[dict]] = []
    for message in messages:
        if message["type"] == "human":
            turns.append([message])
        elif not turns:
            return f"a {message['type']} message before the first question: {str(message.get('content'))[:80]!r}"
        else:
            turns[-1].append(message)
    if [t[0]["content"] for t in turns] != [question(n) for n in numbers]:
        return "the questions are not the runs' questions in the order the runs were created"
    for turn, n in zip(turns, numbers, strict=True):
        *middle, last = turn[1:] or [{"type": "none"}]
        if last["type"] != "ai" or last.get("tool_calls") or expected_answer_part(n) not in last["content"]:
            return f"turn {question(n)!r} does not end with its own answer"
        asked: set[str] = set()
        for message in middle:  # the turn's own tool round: calls, then their results, for its own question
            if message["type"] == "ai" and message.get("tool_calls"):
                asked |= {call["id"] for call in message["tool_calls"]}
            elif message["type"] != "tool" or message["tool_call_id"] not in asked \
                    or expected_answer_part(n) not in message["content"]:
                return f"turn {question(n)!r} holds a message of another turn"
    return None


def _ms(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp).timestamp() * 1000)


async def _run_times(client: redis.asyncio.Redis, keys: ServiceKeys, thread_id: str, run_id: str) -> tuple[int, int]:
    """(started, ended) of a run in ms: its first event's entry id (Redis time, written right after it starts)
    and the end its record gives (updated_at of a finished run)."""
    first: Any = await client.xrange(keys.events(thread_id, run_id), count=1)
    record = json.loads(await client.get(keys.run(thread_id, run_id)))
    started = int((first[0][0].decode() if first else "0-0").split("-")[0])
    return started, _ms(record["updated_at"])


async def check(urls: list[str], result: LoadResult, tool_log: list[str], redis_url: str, prefix: str) -> Findings:
    """Every run succeeded and every thread holds its questions' whole turns in creation order; each weather
    call ran once; no two runs of one thread overlapped in time."""
    found, sdk = Findings(), sdk_client(urls[-1])
    keys, client = ServiceKeys(prefix), redis.asyncio.Redis.from_url(redis_url)
    gate = asyncio.Semaphore(16)

    async def check_thread(load: ThreadLoad) -> None:
        if not load.thread_id or len(load.run_ids) != len(load.numbers):
            found.lost.append(f"thread {load.thread_id or '?'}: {len(load.run_ids)} of {len(load.numbers)} created")
            return
        async with gate:
            runs = {r["run_id"]: r["status"] for r in await sdk.runs.list(load.thread_id, limit=len(load.run_ids) + 5)}
            messages = (await sdk.threads.get_state(load.thread_id))["values"].get("messages", [])
            times = [await _run_times(client, keys, load.thread_id, run_id) for run_id in load.run_ids]
        found.runs_checked += len(runs)
        if [runs.get(run_id) for run_id in load.run_ids] != ["success"] * len(load.run_ids):
            found.lost.append(f"thread {load.thread_id}: run statuses {sorted(runs.values())}")
        if (problem := _turn_problem(messages, load.numbers)) is not None:
            found.interleaved.append(f"thread {load.thread_id}: {problem}")
        for (start, end), (next_start, _) in itertools.pairwise(times):
            if not start <= end <= next_start:
                found.interleaved.append(f"thread {load.thread_id}: runs overlap ({start}..{end}, then {next_start})")

    try:
        await asyncio.gather(*(check_thread(load) for load in result.threads))
    finally:
        await client.aclose()
    starts = [line for line in tool_log if line.startswith("start ")]
    wanted = [f"start {town(n)}" for load in result.threads for n in load.numbers if n % 2 == 0]
    found.duplicated = sorted(line for line, times in Counter(starts).items() if times > 1) + \
        sorted(set(starts) - set(wanted))
    found.lost += [f"tool call {line!r} never ran" for line in sorted(set(wanted) - set(starts))]
    return found
