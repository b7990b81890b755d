"""Records the service keeps in Redis as JSON (threads, runs, assistants): written with a size bound, read back
as input from outside — a record must be a JSON object with the fields its writer put there, or it is treated as
absent (and logged), never decoded into objects.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from reactgraph.service.wire import MAX_BODY_BYTES, BadRequest

log = logging.getLogger("reactgraph.service")
# A record holds what one request sent (a run: its input) and a little more: the bound is above the body limit,
# so an accepted body always fits, and a record is also checked before it is written (413 rather than a record
# that would be read back as absent).
MAX_RECORD_BYTES = MAX_BODY_BYTES + 1024 * 1024


def decode_record(raw: str | bytes | None, key: str, required: Sequence[str], strict: bool = False,
                  objects: Sequence[str] = ()) -> dict[str, Any] | None:
    """The record stored at `key`, or None: absent, or (logged) not one we wrote — `required` names its string
    fields, `objects` those that are JSON objects when present (a thread's metadata). `strict`: a record that is
    there but unreadable is an UnreadableRecord instead, for an answer that names it."""
    if raw is None:
        return None
    if len(raw) > MAX_RECORD_BYTES:
        report_unreadable(key, f"{len(raw)} bytes, over the {MAX_RECORD_BYTES}-byte limit", strict)
        return None
    try:
        record = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        record = None
    if not isinstance(record, dict) or any(not isinstance(record.get(name), str) for name in required):
        report_unreadable(key, "not a record this service wrote", strict)
        return None
    for name in objects:
        if record.get(name) is not None and not isinstance(record[name], dict):
            report_unreadable(key, f"its {name} is {type(record[name]).__name__}, not an object", strict)
            return None
    return record


def decode_thread(raw: str | bytes | None, key: str, strict: bool = False) -> dict[str, Any] | None:
    """A thread record as its readers take it (`decode_record`): its ids, dates and status strings, and its
    metadata an object, which filters and searches read into (a list there would fail every search)."""
    return decode_record(raw, key, ("thread_id", "created_at", "status"), strict, objects=("metadata",))


class UnreadableRecord(BadRequest):
    """A thread or run record in Redis that cannot be read back (500, one line naming its key)."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(500, f"service record {key!r} is unreadable: {reason}")


def report_unreadable(key: str, reason: str, strict: bool) -> None:
    """Log that the record at `key` cannot be read back (it is then treated as absent); `strict`: raise
    UnreadableRecord instead of going on."""
    log.warning("service record %s is unreadable (%s): ignored", key, reason)
    if strict:
        raise UnreadableRecord(key, reason)


def encoded(record: dict[str, Any], what: str) -> str:
    """`record` as the JSON stored for it, or a 413 naming the limit when it would be too large to read back."""
    text = json.dumps(record, ensure_ascii=False)
    size = len(text.encode())
    if size > MAX_RECORD_BYTES:
        raise BadRequest(413, f"the {what} would be {size} bytes, over the limit of {MAX_RECORD_BYTES} bytes "
                              "for a stored record")
    return text
