"""The thread options langgraph-sdk sends that are more than a record's fields, each honoured as langgraph-api
does or refused naming it: `threads.create(supersteps=…)` (the updates applied to the new thread as
`bulk_update_state` applies them), `threads.search(extract=…)` (named paths of a thread picked into
`extracted`), `threads.search/count(values=…)`, and `ttl` (refused: expiry is the operator's `--retention`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, cast

from langgraph.types import Command, Send, StateUpdate

from reactgraph.service.connections import REDIS_DOWN
from reactgraph.service.wire import BadRequest, field

MAX_SUPERSTEPS = 100
MAX_UPDATES = 100  # per superstep
MAX_EXTRACT_PATHS = 10  # as langgraph-api
EXTRACTABLE = ("values", "metadata", "config", "interrupts")
_ALIAS = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]{0,63}")
_STEP = re.compile(r"\.|\[")
# A thread's own fields: an extract alias may not shadow one (langgraph-api refuses them too).
THREAD_FIELDS = frozenset({"thread_id", "created_at", "updated_at", "state_updated_at", "metadata", "config",
                           "status", "values", "interrupts", "error", "extracted", "ttl"})


def refuse_ttl(body: Mapping[str, Any]) -> None:
    if body.get("ttl") is not None:
        raise BadRequest(422, "'ttl' is refused: threads expire by the operator's retention setting "
                              "(reactgraph serve --retention), not per thread")


def supersteps(body: Mapping[str, Any]) -> list[list[StateUpdate]] | None:
    """`supersteps` as LangGraph's bulk update takes them (None: none given), or a 422 naming what is wrong."""
    steps = field(body, "supersteps", list)
    if not steps:
        return None
    if len(steps) > MAX_SUPERSTEPS:
        raise BadRequest(422, f"'supersteps' may hold at most {MAX_SUPERSTEPS} supersteps, got {len(steps)}")
    found = []
    for n, step in enumerate(steps):
        updates = field(step, "updates", list) if isinstance(step, dict) else None
        if not updates or len(updates) > MAX_UPDATES:
            raise BadRequest(422, f"'supersteps[{n}]' must be {{\"updates\": [...]}} with 1 to {MAX_UPDATES} "
                                  "updates")
        found.append([_update(update, f"supersteps[{n}].updates[{i}]") for i, update in enumerate(updates)])
    return found


def _update(update: Any, where: str) -> StateUpdate:
    if not isinstance(update, dict):
        raise BadRequest(422, f"'{where}' must be an object with values (or command) and as_node")
    as_node = field(update, "as_node", str)
    command = field(update, "command", dict)
    if command is not None:
        if not set(command) <= {"update", "resume", "goto"}:
            raise BadRequest(422, f"'{where}.command' takes update, resume, goto")
        goto = command.get("goto")
        goto = [goto] if goto is not None and not isinstance(goto, list) else goto
        return StateUpdate(Command(update=command.get("update"), resume=command.get("resume"),  # type: ignore[arg-type]
                                   goto=[g if isinstance(g, str) else Send(g["node"], g.get("input")) for g in goto]
                                   if goto else ()), as_node)
    values = update.get("values")
    if values is not None and not isinstance(values, dict | list):
        raise BadRequest(422, f"'{where}.values' must be an object (or a list of them), not {type(values).__name__}")
    return StateUpdate(cast(Any, values), as_node)  # a list of updates too, as LangGraph's update_state takes


async def apply_supersteps(graph: Any, thread_id: str, steps: list[list[StateUpdate]]) -> None:
    """Write `steps` to the thread's checkpoints; what LangGraph refuses is a 422 naming it."""
    try:
        await graph.abulk_update_state({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}, steps)
    except REDIS_DOWN:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever LangGraph refuses in the updates (InvalidUpdateError, …)
        reason = (str(exc).splitlines() or [type(exc).__name__])[0][:300]
        raise BadRequest(422, f"'supersteps' could not be applied: {reason}") from None


def extract_paths(body: Mapping[str, Any]) -> dict[str, str] | None:
    """`extract` ({alias: path}) checked as langgraph-api checks it, or None when not given."""
    extract = field(body, "extract", dict)
    if not extract:
        return None
    if len(extract) > MAX_EXTRACT_PATHS:
        raise BadRequest(422, f"'extract' takes at most {MAX_EXTRACT_PATHS} paths, got {len(extract)}")
    for alias, path in extract.items():
        if not _ALIAS.fullmatch(alias) or alias in THREAD_FIELDS:
            raise BadRequest(422, f"'extract' key {alias[:80]!r} must be an identifier that is no thread field")
        if not isinstance(path, str) or _STEP.split(path)[0] not in EXTRACTABLE:
            raise BadRequest(422, f"'extract' path for {alias!r} must start with one of {', '.join(EXTRACTABLE)}")
    return extract


def extracted(record: Mapping[str, Any], paths: Mapping[str, str]) -> dict[str, Any]:
    """Each alias's value at its path in the thread (`values.messages[-1].content`), None where it leads nowhere."""
    return {alias: _at(record, path) for alias, path in paths.items()}


def _at(record: Mapping[str, Any], path: str) -> Any:
    parts = _STEP.split(path)
    current: Any = record.get(parts[0])
    for part in parts[1:]:
        if current is None:
            return None
        if part.endswith("]"):
            try:
                current = current[int(part[:-1])] if isinstance(current, list) else None
            except (ValueError, IndexError):
                return None
        elif part:
            current = current.get(part) if isinstance(current, dict) else None
    return current


def values_match(values: Any, wanted: Mapping[str, Any]) -> bool:
    """Whether a thread's values hold each key of `wanted` with that value (search and count's `values`)."""
    return not wanted or (isinstance(values, dict) and all(values.get(k) == v for k, v in wanted.items()))


def refuse_include(include: str | None) -> None:
    """`threads.get(include=…)`: langgraph-api's only one is `ttl`, which threads here do not have."""
    if include:
        raise BadRequest(422, f"'include' cannot be {include[:80]!r}: threads here have no ttl (they expire by the "
                              "operator's retention setting)")
