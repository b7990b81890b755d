"""`response_format=` in every builder: the `respond` node after the closing one, and a checkpointer that stores
the response's classes.

The builders add `respond` only when a response format is given, so a graph without one is unchanged (its
diagram, its nodes). A pydantic model or dataclass instance in the state is checkpointed as that class, which a
strict serializer (the Redis saver's allow-list, LangGraph's strict msgpack) would refuse to read back: the
checkpointer is given the response's classes (nested ones included) with LangGraph's `with_allowlist`.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import StateGraph

from reactgraph.models.response_format import ResponseFormat, response_format_of
from reactgraph.nodes.closing.respond import make_respond
from reactgraph.nodes.runtime.services import AgentServices

RESPOND = "respond"


def add_respond(builder: StateGraph[Any, Any, Any, Any], services: AgentServices,
                response_format: ResponseFormat) -> str:
    """Add the respond node (with the model nodes' retry policy); its name, for the edges into it."""
    builder.add_node(RESPOND, make_respond(services, response_format), retry_policy=services.retry)
    return RESPOND


def storing(checkpointer: BaseCheckpointSaver | None,
            response_format: ResponseFormat | None) -> BaseCheckpointSaver | None:
    """The checkpointer, allowed to read back the response's classes (None and a JSON schema need nothing)."""
    if checkpointer is None or response_format is None or response_format.kind in ("typeddict", "json_schema"):
        return checkpointer
    if not isinstance(checkpointer, BaseCheckpointSaver):  # True/False (a subgraph's), or another object
        return checkpointer
    return checkpointer.with_allowlist(_classes(response_format.schema))


def _classes(schema: type) -> set[tuple[str, ...]]:
    """(module, name) of the schema and the models and dataclasses in its fields, as LangGraph collects them
    from a state schema (falling back to the schema's own class if that helper moves)."""
    try:
        from langgraph._internal._serde import collect_allowlist_from_schemas
    except ImportError:
        return {(schema.__module__, schema.__name__)}
    return collect_allowlist_from_schemas(schemas=[schema]) | {(schema.__module__, schema.__name__)}


__all__ = ["RESPOND", "ResponseFormat", "add_respond", "response_format_of", "storing"]
