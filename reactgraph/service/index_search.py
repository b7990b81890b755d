"""A search or count served from a RecordIndex (reactgraph/service/record_index.py): ids in the order asked, a
page of them read and checked, a count from the index alone when its terms are the whole filter.

A filter whose every condition is a term (metadata equality on short scalars, status, graph, the auth handler's
equality filter) is *exact*: the page is the index's, the count one ZCARD or ZINTERCARD, and no record is read
but those returned. Any other condition ($or, $contains, a nested or long value, a name to match) is checked
on the records of the narrowest indexed set — the terms that are indexed, at least the owner's — read BATCH at
a time: such a search reads as many records as that set holds until its page is full, a count all of them.
Records are decoded off the event loop when there are more than a few.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from reactgraph.service.record_index import RecordIndex

Record = dict[str, Any]
SCORED = {"updated_at": "u", "created_at": "c"}  # sort keys the index keeps scores for
BATCH = 100  # records read (and decoded) at once when a filter is checked on records


@dataclass
class Query:
    """What a search asks: the terms every hit has, the whole filter as a check on a record, and the order."""

    terms: list[str]
    check: Callable[[Record], bool]
    exact: bool  # the terms are the whole filter
    terms_of: Callable[[Record], list[str]]  # what a record is indexed under (to repair an entry left behind)
    sort: str = "updated_at"
    newest_first: bool = True
    ids: list[str] | None = None  # only these
    # a condition no index holds, checked on each record the rest keeps (the filter is then not exact)
    check_async: Callable[[Record], Awaitable[bool]] | None = None


@dataclass
class Source:
    """Where records come from: `load(ids)` (None for an absent or damaged one) and `repair(id, record)`, which
    rewrites (or, for None, removes) the index entry of a record that does not match it."""

    index: RecordIndex
    load: Callable[[list[str]], Awaitable[list[Record | None]]]
    repair: Callable[[str, Record | None], Awaitable[None]]


class _Ordered:
    """The query's ids in its order, a slice at a time: from the index's scores, else sorted once on the
    entries' sort fields (ids only: no record is read)."""

    def __init__(self, index: RecordIndex, query: Query) -> None:
        self.index, self.query = index, query
        self.listed: list[str] | None = None

    async def slice(self, start: int, stop: int) -> tuple[list[str], int]:
        """(ids start..stop, -1: to the end), how many the query has in all)."""
        q = self.query
        if q.ids is None and q.sort in SCORED:
            return await self.index.page(q.terms, SCORED[q.sort], start, stop, q.newest_first)
        if self.listed is None:
            self.listed = await self._listed()
        return self.listed[start:None if stop == -1 else stop + 1], len(self.listed)

    async def _listed(self) -> list[str]:
        q = self.query
        if q.ids is not None:
            scored = await self.index.having(q.ids, q.terms, SCORED.get(q.sort, "c"))
            if q.sort in SCORED:
                return [i for i, _s in sorted(scored, key=lambda p: (p[1], p[0]), reverse=q.newest_first)]
            ids = [i for i, _s in scored]
        else:
            ids, _total = await self.index.page(q.terms, "c", 0, -1, False)
        fields = await self.index.sort_fields(ids)
        return sorted((i for i in ids if i in fields), key=lambda i: (str(fields[i].get(q.sort, "")), i),
                      reverse=q.newest_first)


async def _kept(source: Source, query: Query, ids: list[str]) -> list[Record]:
    found = []
    for record_id, record in zip(ids, await source.load(ids), strict=True):
        if record is None or not set(query.terms) <= {"all", *query.terms_of(record)}:
            await source.repair(record_id, record)  # the index was behind the record: set it right
        elif query.check(record) and (query.check_async is None or await query.check_async(record)):
            found.append(record)
    return found


async def search(source: Source, query: Query, offset: int, limit: int) -> list[Record]:
    """The page `offset`..`offset + limit` of the records the query finds."""
    ordered = _Ordered(source.index, query)
    if query.exact:
        return await _kept(source, query, (await ordered.slice(offset, offset + limit - 1))[0])
    return (await _scan(source, query, ordered, offset + limit))[0][offset:]


async def count(source: Source, query: Query) -> int:
    """How many records the query finds: from the index when it is exact, else by reading them."""
    if query.exact and query.ids is None:
        return await source.index.count(query.terms)
    ordered = _Ordered(source.index, query)
    if query.exact:
        return (await ordered.slice(0, -1))[1]
    return (await _scan(source, query, ordered, None))[1]


async def _scan(source: Source, query: Query, ordered: _Ordered, want: int | None) -> tuple[list[Record], int]:
    """(the first `want` records the query keeps (None: none kept, only counted), how many it keeps in all or
    until `want`), reading BATCH records at a time in the query's order."""
    kept: list[Record] = []
    matched, start = 0, 0
    while True:
        ids, total = await ordered.slice(start, start + BATCH - 1)
        found = await _kept(source, query, ids)
        matched += len(found)
        if want is not None:
            kept.extend(found[:want - len(kept)])
            if len(kept) >= want:
                return kept, matched
        start += BATCH
        if start >= total or not ids:
            return kept, matched


def filter_terms(found: dict[str, Any] | None) -> tuple[list[str], bool]:
    """(the terms an auth handler's filter implies, whether they are the whole filter): its plain and `$eq`
    fields, and those of each `$and` group; `$or`, `$contains` and values that are not short scalars are
    checked on records instead."""
    from reactgraph.service.record_index import term_of

    terms: list[str] = []
    exact = True
    for name, wanted in (found or {}).items():
        if name == "$and":
            for group in wanted:
                inner, whole = filter_terms(group)
                terms, exact = terms + inner, exact and whole
            continue
        if isinstance(wanted, dict):
            operator, operand = next(iter(wanted.items()))
            term = term_of(name, operand) if operator == "$eq" and name != "$or" else None
        else:
            term = None if name == "$or" else term_of(name, wanted)
        if term is None:
            exact = False
        else:
            terms.append(term)
    return terms, exact
