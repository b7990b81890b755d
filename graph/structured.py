"""`response_format=` in every builder: the `respond` node after the closing one, and a `structured_response`
channel that holds the response as `create_agent` gives it while checkpoints hold plain JSON.

The builders add `respond` only when a response format is given, so a graph without one is unchanged (its
diagram, its nodes). Its state schema then gains a `structured_response` key on a `ResponseValue` channel: the
node writes JSON data, the channel gives the run (its result, `get_state`, the `values` stream) the pydantic or
dataclass instance, and checkpoints and pending writes stay JSON. So every reader of a thread (`reactgraph
history`, the service, Studio, another process) reads it without importing the caller's classes, and the Redis
saver's allow-list needs no exception for them.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Annotated, Any, NotRequired, Self, TypeVar

from langgraph.channels import LastValue
from langgraph.graph import StateGraph

from reactgraph.models.response_format import ResponseFormat, jsonable, response_format_of
from reactgraph.nodes.closing import make_respond
from reactgraph.nodes.driver import AgentServices

RESPOND = "respond"
S = TypeVar("S")


class ResponseValue(LastValue[Any]):
    """`LastValue` for `structured_response`: JSON data in checkpoints and writes, the response format's
    instance in the running graph (data that no longer fits the schema stays data)."""

    __slots__ = ("response_format",)

    def __init__(self, typ: Any, key: str = "", response_format: ResponseFormat | None = None) -> None:
        super().__init__(typ, key)
        self.response_format = response_format

    def _revived(self, value: Any) -> Any:
        if value is None or self.response_format is None or self.response_format.kind not in ("pydantic",
                                                                                              "dataclass"):
            return value
        try:
            return self.response_format.validate(value)
        except ValueError:
            return value

    def copy(self) -> Self:
        empty = super().copy()
        empty.response_format = self.response_format
        return empty

    def from_checkpoint(self, checkpoint: Any) -> Self:
        empty = super().from_checkpoint(checkpoint)
        empty.response_format = self.response_format
        if empty.is_available():
            empty.value = empty._revived(empty.value)
        return empty

    def update(self, values: Sequence[Any]) -> bool:
        if not super().update(values):
            return False
        self.value = self._revived(self.value)
        return True

    def checkpoint(self) -> Any:
        value = super().checkpoint()
        return jsonable(value) if self.is_available() else value


def state_schema(schema: type[S], response_format: ResponseFormat | None) -> type[S]:
    """`schema`, with `structured_response` on a `ResponseValue` channel when there is a response format."""
    if response_format is None:
        return schema
    channel = ResponseValue(Any, response_format=response_format)
    namespace = {"__annotations__": {"structured_response": NotRequired[Annotated[Any, channel]]},
                 "__module__": schema.__module__, "__doc__": schema.__doc__}
    return types.new_class(schema.__name__, (schema,), {}, lambda ns: ns.update(namespace))


def add_respond(builder: StateGraph[Any, Any, Any, Any], services: AgentServices,
                response_format: ResponseFormat) -> str:
    """Add the respond node (with the model nodes' retry policy); its name, for the edges into it."""
    builder.add_node(RESPOND, make_respond(services, response_format), retry_policy=services.retry)
    return RESPOND


__all__ = ["RESPOND", "ResponseFormat", "ResponseValue", "add_respond", "response_format_of", "state_schema"]
