"""Output of a user tool that replaced a built-in (same name, another output shape), passed through as it is.

The scripted model knows the built-ins' shapes; a replacement's text or JSON is not misread as "nothing found"
but shown as the observation, bounded and on one line per field.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .conversation import Observation

_LIMIT = 600
# Parts whose answer is the tool's output itself (not the parts that need a number or a date from it).
KINDS = frozenset({"weather", "time", "calc", "fact", "http"})
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# The keys that say an output has the built-in's shape (then the built-in's rules read it).
_SHAPES: dict[str, tuple[str, ...]] = {
    "calculator": ("result", "error"), "get_time": ("time", "iso", "date"),
    "get_weather": ("found", "temperature_c", "condition"), "search": ("results", "found", "message"),
    "http_get": ("status_code", "body", "url"),
}


def foreign(observation: Observation) -> bool:
    """An ok result of a built-in's name whose output has none of the built-in's keys."""
    keys = _SHAPES.get(observation.call.name)
    if keys is None or not observation.ok or not observation.content.strip():
        return False
    data = observation.data
    return not (isinstance(data, dict) and any(k in data for k in keys))


def value(observation: Observation) -> dict[str, Any]:
    """The observation as a pass-through value: the tool's name and its output as bounded text."""
    data = observation.data
    if isinstance(data, dict):
        text = "; ".join(f"{k}: {json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v}"
                         for k, v in data.items())
    elif data is not None and not isinstance(data, str):
        text = json.dumps(data, ensure_ascii=False)
    else:
        text = observation.content
    text = _CONTROL.sub(" ", " ".join(text.split()))
    if len(text) > _LIMIT:
        text = text[:_LIMIT].rstrip() + "…"
    return {"passthrough": text, "tool": observation.call.name}


def line(data: dict[str, Any], lang: str) -> str:
    tool, text = data["tool"], data["passthrough"]
    return f"{tool} 返回：{text}" if lang == "zh" else f"{tool} returned: {text}"


def is_value(data: Any) -> bool:
    return isinstance(data, dict) and "passthrough" in data
