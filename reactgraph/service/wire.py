"""JSON at the service's edges: request bodies in, answers and stream events out, records to and from Redis —
each bounded.

Bodies are read as plain JSON, and what could be stored but never read back (too large or deep, NaN, a lone
surrogate) is refused with a 422 at the door. What goes out is shaped as langgraph-sdk expects from the Agent
Server (messages as their `model_dump()`, interrupts as `{"value", "id", "response_schema"}`), anything else as
its `str()`, so a run never fails at its end over a value it cannot encode. A record read back from Redis is
input from outside: `decode_record` allow-lists its fields and never builds objects from it (the typed records
are reactgraph/service/records.py's).
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
import logging
import math
import re
import uuid
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any

from langgraph.types import Interrupt, Overwrite
from pydantic import BaseModel

from reactgraph.errors import ReactGraphError

MAX_BODY_BYTES = 4 * 1024 * 1024  # a request body larger than this is refused with 413
# Deeper JSON is refused (422): LangGraph state is a few levels deep, and each level costs the C decoder and
# encoder a frame of the interpreter's stack (a run input 900 deep could be stored but not read back).
MAX_JSON_DEPTH = 64
# A lone surrogate (`"\ud800"`, half of a pair) is valid JSON but no text: UTF-8 cannot encode it, so a value holding
# one could be stored but never answered. Only a \uD800-\uDFFF escape can make one: bodies without are not walked.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class BadRequest(ReactGraphError, ValueError):
    """A request the API refuses: `status` and one line that names the cause."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.headers = status, headers


def plain(value: Any) -> Any:
    """`value` as JSON-ready Python (dicts, lists, strings, numbers, booleans, None)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    if isinstance(value, Interrupt):  # with the schema of the answer it waits for (null: the graph gave none)
        return {"value": plain(value.value), "id": value.id,
                "response_schema": plain(getattr(value, "response_schema", None))}
    if isinstance(value, Overwrite):  # a node's instruction to its channel (replace, not add): clients see the value
        return plain(value.value)
    if isinstance(value, BaseModel):  # messages included: the same dict langgraph-api sends
        return plain(value.model_dump())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return plain(value.value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return str(value)


def redis_text(value: Any) -> str:
    """A Redis reply as text: bytes decoded (what is not UTF-8 replaced, as Redis content is untrusted), None empty."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return "" if value is None else str(value)


def dumps(value: Any) -> str:
    return json.dumps(plain(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def read_body(raw: bytes) -> dict[str, Any]:
    """A request body: empty means `{}`; otherwise a JSON object of at most MAX_BODY_BYTES (see `strict_json`)."""
    if len(raw) > MAX_BODY_BYTES:
        raise BadRequest(413, f"request body of {len(raw)} bytes is over the limit of {MAX_BODY_BYTES}")
    if not raw.strip():
        return {}
    body = strict_json(raw, "request body")
    if not isinstance(body, dict):
        raise BadRequest(422, f"request body must be a JSON object, not {type(body).__name__}")
    return body


def strict_json(raw: str | bytes, what: str) -> Any:
    """`raw` as plain JSON, or a 422 naming what is wrong: not JSON, NaN/Infinity or a number out of a float's
    range (which JSON has not, and which would poison every later read of what they are stored in), or deeper
    than MAX_JSON_DEPTH."""
    try:
        value = json.loads(raw, parse_constant=_no_constant, parse_float=_finite_float)
    except _NotFinite as exc:
        raise BadRequest(422, f"{what}: {exc}") from None
    except RecursionError:
        raise BadRequest(422, f"{what} is nested deeper than {MAX_JSON_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(422, f"{what} is not JSON: {exc}") from None
    if depth_over(value, MAX_JSON_DEPTH):
        raise BadRequest(422, f"{what} is nested deeper than {MAX_JSON_DEPTH} levels")
    if _may_hold_surrogate(raw) and _holds_surrogate(value):
        raise BadRequest(422, f"{what} holds a lone surrogate (a \\ud800-\\udfff escape without its pair), "
                              "which is no text")
    return value


def _may_hold_surrogate(raw: str | bytes) -> bool:
    if isinstance(raw, bytes):
        return _SURROGATE_ESCAPE.search(raw) is not None
    return _SURROGATE.search(raw) is not None or _SURROGATE_ESCAPE.search(raw.encode(errors="replace")) is not None


def _holds_surrogate(value: Any) -> bool:
    """Whether a string (or a key) anywhere in `value` (plain JSON) holds a lone surrogate; iterative."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            pending.extend((*item.keys(), *item.values()))
        elif isinstance(item, list):
            pending.extend(item)
    return False


class _NotFinite(ReactGraphError, ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _NotFinite(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise _NotFinite(f"{text[:40]} is out of the range of a number")
    return number


def depth_over(value: Any, limit: int) -> bool:
    """Whether `value` (plain JSON) nests more than `limit` containers deep; iterative, so any depth is safe."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            pending.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def field(body: Mapping[str, Any], name: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
    """`body[name]` if it is of `kind` (or absent/null: `default`); else a 422 naming the field."""
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
        wanted = " or ".join(k.__name__ for k in _kinds(kind))
        raise BadRequest(422, f"{name!r} must be {wanted}, not {type(value).__name__}")
    return value


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


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


def encoded(record: Mapping[str, Any], what: str) -> str:
    """`record` as the JSON stored for it, or a 413 naming the limit when it would be too large to read back."""
    text = json.dumps(record, ensure_ascii=False)
    size = len(text.encode())
    if size > MAX_RECORD_BYTES:
        raise BadRequest(413, f"the {what} would be {size} bytes, over the limit of {MAX_RECORD_BYTES} bytes "
                              "for a stored record")
    return text
