"""Thread search and count through the thread index (reactgraph/service/index.py): the body's
metadata, status and ids, inside the `threads.search` handler's filter, in the order asked.

Without an auth filter every thread is the caller's, including sessions the CLI started on the same Redis that
the service has no record of yet: such a search first gives those a record (BATCH at a time, by a SCAN of the
checkpoints' keys). Threads written before the index existed are indexed when the service starts (`backfill`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from reactgraph.service.auth import matches
from reactgraph.service.index import BATCH, LEGACY_OWNER, Query, Source, filter_terms, term_of
from reactgraph.service.records import ServiceRecords, thread_entry, thread_terms
from reactgraph.service.wire import decode_thread

DECODE_ON_LOOP = 16  # more records than this are decoded on a worker thread


def thread_query(allowed: dict[str, Any] | None, metadata: dict[str, Any], status: str | None,
                 ids: list[str] | None, sort: str, newest_first: bool) -> Query:
    terms, exact = filter_terms(allowed)
    for name, value in metadata.items():
        term = term_of(name, value)
        exact = exact and term is not None
        terms += [term] if term else []
    if status:
        terms.append(f"st={status}")

    def check(record: dict[str, Any]) -> bool:
        held: Any = record.get("metadata")
        held = held if isinstance(held, dict) else {}
        return ((not status or record.get("status") == status)
                and all(held.get(k) == v for k, v in metadata.items()) and matches(held, allowed))

    return Query(sorted(set(terms)) or ["all"], check, exact, thread_terms, sort, newest_first, ids)


def thread_source(records: ServiceRecords) -> Source:
    read: dict[str, Any] = {}  # each id's record as last read, for a repair to check it is still the same

    async def load(ids: list[str]) -> list[dict[str, Any] | None]:
        pipe = records.client.pipeline(transaction=False)
        for thread_id in ids:
            pipe.get(records.keys.thread(thread_id))
        raws = await pipe.execute()
        read.update(zip(ids, raws, strict=True))

        def decoded() -> list[dict[str, Any] | None]:
            # as a GET reads it: a damaged one (metadata no object, say) is passed over with a log line
            found = [decode_thread(raw, records.keys.thread(i)) for i, raw in zip(ids, raws, strict=True)]
            return [r if r is not None and r["thread_id"] == i else None for i, r in zip(ids, found, strict=True)]

        return await asyncio.to_thread(decoded) if len(ids) > DECODE_ON_LOOP else decoded()

    async def repair(thread_id: str, record: dict[str, Any] | None) -> None:
        await records.indexed.repair(thread_id, read.get(thread_id), record)

    return Source(records.indexed.index, load, repair)


async def cli_sessions(records: ServiceRecords, saver: Any, record_of: Any) -> None:
    """Give a record (`record_of(thread_id)`) to up to BATCH sessions that have checkpoints and none yet."""
    ids = list(await saver.athread_ids())
    index = records.indexed.index
    for start in range(0, len(ids), 1000):
        batch = ids[start:start + 1000]
        known = await records.client.zmscore(f"{index.base}u:all", batch)
        missing = [i for i, score in zip(batch, known, strict=True) if score is None][:BATCH]
        for thread_id in missing:
            await record_of(thread_id)


async def backfill(records: ServiceRecords) -> int:
    """Index the threads written before the index (once per service: a marker says it is done), 500 at a time,
    each unless it has an entry already (a newer write's). How many were read."""
    index = records.indexed.index
    marker = f"{index.base}backfilled"
    if await records.client.exists(marker):
        return 0
    done, source = 0, thread_source(records)
    while raw := await records.client.zrange(records.keys.threads, done, done + 499):
        batch = [i.decode() if isinstance(i, bytes) else str(i) for i in raw]
        pipe = records.client.pipeline(transaction=False)
        for thread_id, record in zip(batch, await source.load(batch), strict=True):
            if record is not None:
                await index.backfill_in(pipe, thread_id, thread_entry(record, LEGACY_OWNER))
        await pipe.execute()
        done += len(batch)
    await records.client.set(marker, "1")
    return done
