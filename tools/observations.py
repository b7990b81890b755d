"""The texts a model reads when a call does not simply succeed: short, factual, and actionable."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError


def _names(tools: Iterable[str]) -> str:
    listed = ", ".join(sorted(tools))
    return listed or "none"


def unknown_tool(name: str, available: Iterable[str]) -> str:
    return f"Unknown tool {name!r}. Available tools: {_names(available)}."


def disabled_tool(name: str, available: Iterable[str]) -> str:
    return f"Tool {name!r} is disabled. Available tools: {_names(available)}."


def denied(name: str, available: Iterable[str]) -> str:
    return f"Tool {name!r} is not permitted in this session. Permitted tools: {_names(available)}."


def invalid_args(name: str, error: ValidationError | str, schema_hint: str = "") -> str:
    if isinstance(error, ValidationError):
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in error.errors())
    else:
        problems = str(error)
    hint = f" Expected arguments: {schema_hint}." if schema_hint else ""
    return f"Invalid arguments for {name}: {problems}.{hint} Fix the arguments and call again."


def circuit_open(name: str, retry_in_s: float, failures: int, available: Iterable[str]) -> str:
    return (f"Tool {name} is temporarily unavailable (circuit open after {failures} consecutive "
            f"failures); it will be tried again in {max(retry_in_s, 0):.0f}s. "
            f"Other tools available: {_names(available)}.")


def rate_limited(name: str, waited_s: float) -> str:
    return (f"Tool {name} is busy: no free slot after waiting {waited_s:.1f}s (concurrency limit). "
            "Try again later or use another tool.")


def timeout(name: str, timeout_s: float) -> str:
    return (f"Tool {name} timed out after {timeout_s:g}s and is unavailable right now; "
            "try another tool or answer from what you have.")


def failed(name: str, error: BaseException) -> str:
    message = str(error).strip() or type(error).__name__
    return f"Tool {name} failed: {message}"


def render_value(value: Any) -> str:
    """A tool's return value as the text the model reads: strings as-is, the rest as compact JSON."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return str(value)
