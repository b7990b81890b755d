"""The texts a model reads when a call does not simply succeed: short, factual, and actionable."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

log = logging.getLogger("reactgraph.tools.observations")


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


def needs_approval(name: str, reason: str) -> str:
    return (f"Tool {name} was not run: {reason}, and this call was not approved. "
            "Answer from what you have, or ask the user to approve it.")


def rejected(name: str, reason: str) -> str:
    said = f": {reason}" if reason else " (no reason given)"
    return (f"Tool {name} was not run: the call was rejected at the approval step{said}. Do not call it again "
            "with the same arguments; answer from what you have or try another way.")


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


def stuck(name: str, stuck_threads: int, timeout_s: float) -> str:
    return (f"Tool {name} is not responding: {stuck_threads} earlier call(s) are still running past their "
            f"{timeout_s:g}s timeout, so it was not called again. Try another tool or answer from what you have.")


def failed(name: str, error: BaseException) -> str:
    try:
        message = str(error).strip()
    except Exception as exc:  # noqa: BLE001 - an exception whose __str__ fails is still reported, by its type
        log.debug("tool %s: its exception's message cannot be read (%s)", name, type(exc).__name__,
                  extra={"swallowed": {"tool": name, "where": "exception message", "error_type": type(exc).__name__}})
        message = ""
    kind = type(error).__name__
    if not isinstance(error, Exception):  # SystemExit, KeyboardInterrupt, GeneratorExit, …: say what it was
        return f"Tool {name} failed: it raised {kind}{f' ({message})' if message else ''}."
    return f"Tool {name} failed: {message or kind}"


def cut_note(kept_chars: int, total_chars: int) -> str:
    return (f"\n[cut by the tool gateway: the first {kept_chars:,} of {total_chars:,} characters are shown; "
            "ask for less (a narrower query, a page, a summary) to see the rest]")


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
