"""Assistant search and count through the assistant index (reactgraph/service/index.py): graph, metadata
(`@>`: a short scalar field is a term, anything else is checked on records) and name (checked on records),
inside the `assistants.search` handler's filter. The graphs' own assistants are in the index too (owner
`system`, put there at start), read from memory rather than Redis.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reactgraph.service.assistant_records import AssistantRecords, assistant_entry, assistant_terms
from reactgraph.service.assistants import Assistants
from reactgraph.service.auth import matches
from reactgraph.service.index import LEGACY_OWNER, Query, Source, filter_terms, term_of

SYSTEM_OWNER = "system"


def contains(held: Any, wanted: Any) -> bool:
    """Postgres' `@>` on JSON, as the Agent Server's metadata filter applies it."""
    if isinstance(wanted, Mapping):
        return isinstance(held, Mapping) and all(k in held and contains(held[k], v) for k, v in wanted.items())
    if isinstance(wanted, list):
        return isinstance(held, list) and all(any(contains(h, w) for h in held) for w in wanted)
    return held == wanted


def assistant_query(allowed: dict[str, Any] | None, graph_id: str | None, name: str | None,
                    metadata: dict[str, Any], sort: str, newest_first: bool) -> Query:
    terms, exact = filter_terms(allowed)
    for key, value in metadata.items():
        term = term_of(key, value)
        exact = exact and term is not None
        terms += [term] if term else []
    if graph_id is not None:
        terms.append(f"g={graph_id}")
    exact = exact and not name

    def check(record: dict[str, Any]) -> bool:
        return (graph_id in (None, record["graph_id"]) and (not name or name.lower() in str(record.get("name") or
                                                                                          "").lower())
                and contains(record["metadata"], metadata) and matches(record["metadata"], allowed))

    return Query(sorted(set(terms)) or ["all"], check, exact, assistant_terms, sort, newest_first)


def assistant_source(created: AssistantRecords, assistants: Assistants) -> Source:
    async def load(ids: list[str]) -> list[dict[str, Any] | None]:
        own = {i: a.record() for i in ids if (a := assistants.find(i)) is not None and a.stored is None}
        stored = iter(await created.load([i for i in ids if i not in own]))
        return [own[i] if i in own else next(stored) for i in ids]

    async def repair(assistant_id: str, record: dict[str, Any] | None) -> None:
        await created.index.apply(assistant_id, "" if record is None else assistant_entry(record))

    return Source(created.index, load, repair)


async def index_own_and_backfill(created: AssistantRecords, assistants: Assistants) -> None:
    """At start: the graphs' own assistants into the index, and (once) the assistants created before it."""
    for assistant in assistants.all():
        await created.index.apply(assistant.assistant_id, assistant_entry(assistant.record(), SYSTEM_OWNER))
    marker = f"{created.index.base}backfilled"
    if await created.client.exists(marker):
        return
    done = 0
    while raw := await created.client.zrange(created.keys.assistants, done, done + 499):
        batch = [i.decode() if isinstance(i, bytes) else str(i) for i in raw]
        pipe = created.client.pipeline(transaction=False)
        for assistant_id, record in zip(batch, await created.load(batch), strict=True):
            if record is not None:
                await created.index.backfill_in(pipe, assistant_id, assistant_entry(record, LEGACY_OWNER))
        await pipe.execute()
        done += len(batch)
    await created.client.set(marker, "1")
