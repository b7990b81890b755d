"""What the store keeps per chunk (`ChunkRecord`), a search result (`Hit`), and the checks that keep a chunk's
metadata and text JSON-only and bounded, both when they are added and when they are read back from disk (where
they are untrusted: anyone who can write the index directory wrote them)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# One entry added whole (a LangChain Document) holds at most this much text; chunked documents hold ~400.
MAX_ENTRY_CHARS = 1_000_000
# A chunk's metadata, as JSON.
MAX_METADATA_CHARS = 65_536
# A line of chunks-N.jsonl: the text and metadata above even if JSON escaped every character (\u0000 is 6).
MAX_RECORD_CHARS = 6 * (MAX_ENTRY_CHARS + MAX_METADATA_CHARS) + 4_096


@dataclass(frozen=True)
class ChunkRecord:
    """A stored chunk: its id in the FAISS index, where it came from, its text and its metadata.

    `metadata` defaults to {} so that indexes saved before it existed still load.
    """

    id: int
    source: str
    section: str
    ordinal: int
    text: str
    metadata: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Hit:
    """A search result: the chunk and its cosine similarity to the query."""

    chunk: ChunkRecord
    score: float


def _encoded(metadata: Any, owner: str) -> str:
    if not isinstance(metadata, Mapping):
        raise ValueError(f"metadata of {owner} is a {type(metadata).__name__}, not a mapping")
    try:
        encoded = json.dumps(dict(metadata), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"metadata of {owner} cannot be stored as JSON: {exc}") from exc
    if len(encoded) > MAX_METADATA_CHARS:
        raise ValueError(f"metadata of {owner} is {len(encoded)} characters as JSON, over {MAX_METADATA_CHARS}")
    return encoded


def checked_metadata(metadata: Mapping[str, Any] | None, owner: str) -> dict[str, Any]:
    """`metadata` as JSON keeps it (a copy: keys as strings, tuples as lists); ValueError when it is not JSON or
    over MAX_METADATA_CHARS, so what is kept in memory is exactly what a save writes and a load reads."""
    result: dict[str, Any] = json.loads(_encoded(metadata or {}, owner))
    return result


def checked_entry(text: str, owner: str) -> str:
    """The text of an entry added whole; ValueError when it is not a string or is over MAX_ENTRY_CHARS."""
    if not isinstance(text, str):
        raise ValueError(f"the text of {owner} is a {type(text).__name__}, not a string")
    if len(text) > MAX_ENTRY_CHARS:
        raise ValueError(f"the text of {owner} is {len(text)} characters, over {MAX_ENTRY_CHARS}")
    return text


def record_from_line(line: str) -> ChunkRecord:
    """One line of chunks-N.jsonl as a `ChunkRecord`; ValueError naming what is wrong with it."""
    if len(line) > MAX_RECORD_CHARS:
        raise ValueError(f"a chunk record is over {MAX_RECORD_CHARS} characters")
    fields = json.loads(line)
    if not isinstance(fields, dict):
        raise ValueError(f"a chunk record is a JSON {type(fields).__name__}, not an object")
    try:
        record = ChunkRecord(**fields)
    except TypeError as exc:
        raise ValueError(f"a chunk record has other fields than a chunk's: {exc}") from exc
    owner = f"chunk {record.id!r}"
    if type(record.id) is not int or not all(isinstance(v, str) for v in (record.source, record.section, record.text)):
        raise ValueError(f"{owner}: its id, source, section or text has the wrong type")
    checked_entry(record.text, owner)
    _encoded(record.metadata, owner)
    return record
