"""A user's thread and assistant search and count with another user's 100,000 threads and 10,000 assistants in
Redis: through the service's indexes, and (threads) the way search worked before them — the 10,000 most recently
updated threads of the whole server read and filtered — side by side. Nothing here asserts a time.

Records are written through the service's own writers (the scripts that store a record with its index entries),
pipelined; searches call the same search and count the API routes call (no HTTP in between), with the filter the
documented owner handler returns ({"owner": identity}); then the same requests over HTTP to a `reactgraph serve`
on those records, as alice, under the owner handler of tests/support/auth_assistant_owner.py (`--no-http` skips it).

    python benchmarks/service_search.py [--threads 100000] [--assistants 10000] [--mine 50] [--rounds 50]
                                        [--redis-url redis://127.0.0.1:6379/15]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path

import redis.asyncio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reactgraph.service.assistants.catalogue import BUILDERS
from reactgraph.service.assistants.records import (
    AssistantRecords,
    assistant_entry,
    assistant_query,
    assistant_source,
    version_of,
)
from reactgraph.service.index import count, search
from reactgraph.service.keys import ServiceKeys
from reactgraph.service.records import ServiceRecords, now_iso, thread_entry
from reactgraph.service.threads import thread_query, thread_source
from reactgraph.service.wire import decode_record, encoded

ROOT = Path(__file__).resolve().parents[1]
OLD_WINDOW = 10_000  # what search and count read before the index


class _NoGraphs:
    """Assistant search asks for the graphs' own assistants by id; none here."""

    def find(self, _key: str) -> None:
        return None


async def write_threads(records: ServiceRecords, owner: str, n: int) -> list[str]:
    ids = []
    for start in range(0, n, 1000):
        pipe = records.client.pipeline(transaction=False)
        for _ in range(min(1000, n - start)):
            thread_id, stamp = str(uuid.uuid4()), now_iso()
            record = {"thread_id": thread_id, "created_at": stamp, "updated_at": stamp, "state_updated_at": stamp,
                      "metadata": {"owner": owner}, "status": "idle", "config": {}, "interrupts": {}, "error": None}
            index = records.indexed.index
            await records.indexed._put(keys=[records.keys.thread(thread_id), index.entries], client=pipe,
                                       args=[encoded(record, "thread"), index.base, thread_id,
                                             thread_entry(record, f"u:{owner}"), ""])
            pipe.zadd(records.keys.threads, {thread_id: time.time() * 1000})
            ids.append(thread_id)
        await pipe.execute()
    return ids


async def write_assistants(created: AssistantRecords, owner: str, n: int) -> None:
    import json

    for start in range(0, n, 1000):
        pipe = created.client.pipeline(transaction=False)
        for i in range(min(1000, n - start)):
            assistant_id, stamp = str(uuid.uuid4()), now_iso()
            record = {"assistant_id": assistant_id, "graph_id": "react", "config": {}, "context": {},
                      "metadata": {"owner": owner}, "name": f"{owner}-{start + i}", "description": None,
                      "created_at": stamp, "updated_at": stamp, "version": 1}
            keys = [created.keys.assistant(assistant_id), created.keys.assistant_versions(assistant_id),
                    created.index.entries]
            await created._create(keys=keys, client=pipe, args=[
                encoded(record, "assistant"), json.dumps(version_of(record)), created.index.base, assistant_id,
                assistant_entry(record, f"u:{owner}"), ""])
        await pipe.execute()


async def old_window_count(records: ServiceRecords, owner: str) -> int:
    """Search and count before the index: the newest OLD_WINDOW threads of all, read one by one, filtered."""
    found = 0
    for thread_id in await records.thread_ids(limit=OLD_WINDOW):
        key = records.keys.thread(thread_id)
        record = decode_record(await records.client.get(key), key, ("thread_id", "created_at", "status"))
        if record is not None and (record.get("metadata") or {}).get("owner") == owner:
            found += 1
    return found


async def timed(rounds: int, call) -> tuple[float, float, object]:
    times, result = [], None
    for _ in range(rounds):
        started = time.perf_counter()
        result = await call()
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[max(0, int(len(times) * 0.95) - 1)], result


def over_http(args: argparse.Namespace, prefix: str) -> None:
    """The same searches and counts as alice's HTTP requests to a `reactgraph serve` on the same records."""
    import json
    import tempfile

    import httpx

    sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests")]
    from serve_harness import start_serve

    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "langgraph.json"
        config.write_text(json.dumps({"auth": {"path": f"{ROOT}/tests/support/auth_assistant_owner.py:auth"}}))
        url, api = start_serve(args.redis_url, Path(tmp), 0, "--config", str(config), prefix=prefix)
        try:
            with httpx.Client(base_url=url, headers={"Authorization": "Bearer token-alice"}, timeout=60) as http:
                for name, path, body in (("thread search (limit 10)", "/threads/search", {"limit": 10}),
                                         ("thread count", "/threads/count", {}),
                                         ("assistant search (limit 10)", "/assistants/search", {"limit": 10}),
                                         ("assistant count", "/assistants/count", {})):
                    times, answer = [], None
                    for _ in range(args.rounds):
                        started = time.perf_counter()
                        answer = http.post(path, json=body).json()
                        times.append((time.perf_counter() - started) * 1000)
                    times.sort()
                    shown = answer if isinstance(answer, int) else f"{len(answer)} records"
                    print(f"{'HTTP ' + name:<34}{statistics.median(times):>9.2f}"
                          f"{times[max(0, int(len(times) * 0.95) - 1)]:>9.2f}  {shown}")
        finally:
            api.terminate()
            api.wait(timeout=60)


async def main(args: argparse.Namespace) -> None:
    client = redis.asyncio.Redis.from_url(args.redis_url)
    keys = ServiceKeys(f"bench-search-{uuid.uuid4().hex[:8]}")
    records = ServiceRecords(client, keys)
    created = AssistantRecords(client, keys, tuple(BUILDERS))
    try:
        started = time.perf_counter()
        mine = await write_threads(records, "alice", args.mine)
        await write_threads(records, "bob", args.threads)  # bob's are the newest: alice's fall out of a window
        await write_assistants(created, "alice", args.mine)
        await write_assistants(created, "bob", args.assistants)
        print(f"wrote {args.threads} + {args.mine} threads, {args.assistants} + {args.mine} assistants in "
              f"{time.perf_counter() - started:.1f} s")
        allowed = {"owner": "alice"}
        source = thread_source(records)

        def query():
            return thread_query(allowed, {}, None, None, "updated_at", True)

        rows = [("thread search (limit 10)", lambda: search(source, query(), 0, 10)),
                ("thread search (limit 100)", lambda: search(source, query(), 0, 100)),
                ("thread count", lambda: count(source, query())),
                ("assistant search (limit 10)", lambda: search(assistant_source(created, _NoGraphs()), assistant_query(
                    allowed, None, None, {}, "created_at", True), 0, 10)),
                ("assistant count", lambda: count(assistant_source(created, _NoGraphs()), assistant_query(
                    allowed, None, None, {}, "created_at", True)))]
        print(f"{'alice, beside bob':<34}{'p50 ms':>9}{'p95 ms':>9}  answer")
        for name, call in rows:
            p50, p95, result = await timed(args.rounds, call)
            shown = result if isinstance(result, int) else f"{len(result)} records"
            print(f"{name:<34}{p50:>9.2f}{p95:>9.2f}  {shown}")
        p50, p95, result = await timed(max(3, args.rounds // 10), lambda: old_window_count(records, "alice"))
        print(f"{'before: count over 10,000 newest':<34}{p50:>9.2f}{p95:>9.2f}  {result} (alice has {len(mine)})")
        if not args.no_http:
            await asyncio.to_thread(over_http, args, keys.prefix.rstrip(":"))
    finally:
        found = [k async for k in client.scan_iter(match=f"{keys.prefix}*", count=5000)]
        for start in range(0, len(found), 1000):
            await client.delete(*found[start:start + 1000])
        await client.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=100_000)
    parser.add_argument("--assistants", type=int, default=10_000)
    parser.add_argument("--mine", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--no-http", action="store_true", help="only the in-process searches")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    asyncio.run(main(parser.parse_args()))
