"""JSON on the wire: graph values and stream events out, request bodies in (bounded, decoded as plain JSON).

What goes out is what langgraph-sdk expects from the Agent Server: messages as their `model_dump()` dicts,
interrupts as `{"value", "id"}`, dataclasses and pydantic models as dicts. Anything else is written as its
`str()`: a value the graph holds is never refused at the end of a run because it cannot be encoded.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
import uuid
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from langgraph.types import Interrupt
from pydantic import BaseModel

MAX_BODY_BYTES = 4 * 1024 * 1024  # a request body larger than this is refused with 413


class BadRequest(ValueError):
    """A request the API refuses: `status` and one line that names the cause."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def plain(value: Any) -> Any:
    """`value` as JSON-ready Python (dicts, lists, strings, numbers, booleans, None)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    if isinstance(value, Interrupt):
        return {"value": plain(value.value), "id": value.id}
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


def dumps(value: Any) -> str:
    return json.dumps(plain(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def read_body(raw: bytes) -> dict[str, Any]:
    """A request body: empty means `{}`; otherwise a JSON object of at most MAX_BODY_BYTES."""
    if len(raw) > MAX_BODY_BYTES:
        raise BadRequest(413, f"request body of {len(raw)} bytes is over the limit of {MAX_BODY_BYTES}")
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(422, f"request body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest(422, f"request body must be a JSON object, not {type(body).__name__}")
    return body


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
