"""`select` of a search: which fields of each record the answer holds (the Agent Server's ThreadSelectField and
AssistantSelectField), checked against the fields such a record has."""

from __future__ import annotations

from typing import Any

from reactgraph.service.wire import BadRequest

# The fields of a thread a search may `select` (the Agent Server's ThreadSelectField); the whole record by default.
THREAD_FIELDS = ("thread_id", "created_at", "updated_at", "state_updated_at", "metadata", "config", "context",
                 "status", "values", "interrupts")


def selected_fields(body: dict[str, Any], fields: tuple[str, ...] = THREAD_FIELDS,
                    kind: str = "thread") -> tuple[str, ...] | None:
    """The body's `select`, in its order, when every name is one of `fields` (a 422 naming the others if not)."""
    select = body.get("select")
    if select is None:
        return None
    if not isinstance(select, list) or not all(isinstance(name, str) for name in select):
        raise BadRequest(422, f"'select' must be a list of {kind} field names")
    if unknown := sorted(set(select) - set(fields)):
        raise BadRequest(422, f"'select' cannot name {', '.join(map(repr, unknown))}; the fields are "
                              f"{', '.join(fields)}")
    return tuple(select)
