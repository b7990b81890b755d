"""`select` of a thread search: which fields of each thread the answer holds (the Agent Server's
ThreadSelectField), checked against the fields a thread has."""

from __future__ import annotations

from typing import Any

from reactgraph.service.wire import BadRequest

# The fields of a thread a search may `select` (the Agent Server's ThreadSelectField); the whole record by default.
THREAD_FIELDS = ("thread_id", "created_at", "updated_at", "state_updated_at", "metadata", "config", "context",
                 "status", "values", "interrupts")


def selected_fields(body: dict[str, Any]) -> frozenset[str] | None:
    select = body.get("select")
    if select is None:
        return None
    if not isinstance(select, list) or not all(isinstance(name, str) for name in select):
        raise BadRequest(422, "'select' must be a list of thread field names")
    if unknown := sorted(set(select) - set(THREAD_FIELDS)):
        raise BadRequest(422, f"'select' cannot name {', '.join(map(repr, unknown))}; the fields are "
                              f"{', '.join(THREAD_FIELDS)}")
    return frozenset(select)
