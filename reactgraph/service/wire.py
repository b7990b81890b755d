"""JSON on the wire: graph values and stream events out, request bodies in (bounded, decoded as plain JSON).

What goes out is what langgraph-sdk expects from the Agent Server: messages as their `model_dump()` dicts,
interrupts as `{"value", "id", "response_schema"}`, dataclasses and pydantic models
as dicts. Anything else is written as its `str()`: a value the graph holds is never refused at the end of a run
because it cannot be encoded.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
import math
import re
import uuid
from collections.abc import Mapping
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
