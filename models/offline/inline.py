"""The verdict a request may ask for beside each step (the product's `reflection="inline"`), filled in as the
scripted reflection fills one: a bound tool whose schema is a reflection verdict's (its flags
enough_information, tool_error, need_other_tool, repeated_call) is called once beside the step's tool calls or
answer. Read from the request's structure, as any model reads it: the schemas of the tools it is offered."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from .reflection import reflection_args

VERDICT_FLAGS = frozenset({"enough_information", "tool_error", "need_other_tool", "repeated_call"})


def verdict_tools(tools: Sequence[dict[str, Any]]) -> list[str]:
    """The names of the bound tools whose parameters are a reflection verdict's."""
    names = []
    for tool in tools:
        function = tool.get("function") or tool
        properties = (function.get("parameters") or {}).get("properties") or {}
        if isinstance(properties, dict) and set(properties) >= VERDICT_FLAGS:
            names.append(str(function.get("name", "")))
    return names


def with_call(reply: AIMessage, messages: Sequence[BaseMessage], name: str, call_id: str) -> AIMessage:
    """The reply with one call of the verdict tool `name` added beside its tool calls (or its answer)."""
    reply.tool_calls = [*reply.tool_calls, {"name": name, "args": reflection_args(messages),
                                            "id": call_id, "type": "tool_call"}]
    return reply
