"""The verdict a prompt asks for beside each step (the product's `reflection="inline"`), filled in as the scripted
reflection would fill a ReflectionVerdict: offered as the `InlineReflection` tool, it is called once beside the
step's tool calls or answer; asked for in a text-protocol prompt as a `<reflection>` block, the reply begins with
one. Read from the request, as any model reads it: the schema it is offered, the words of its prompt."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from .reflection import reflection_args

INLINE_SCHEMA = "InlineReflection"
_BLOCK_REQUEST = re.compile(r"<reflection>\{")  # the text protocol's example of the block


def asks_for_block(messages: Sequence[BaseMessage]) -> bool:
    """The system prompt asks for a `<reflection>{…}</reflection>` block before the Thought."""
    return any(isinstance(m, SystemMessage) and _BLOCK_REQUEST.search(m.text) for m in messages)


def with_block(reply: AIMessage, messages: Sequence[BaseMessage]) -> AIMessage:
    """The text-protocol reply with the verdict block in front."""
    block = json.dumps(reflection_args(messages), ensure_ascii=False)
    reply.content = f"<reflection>{block}</reflection>\n{reply.content}"
    return reply


def with_call(reply: AIMessage, messages: Sequence[BaseMessage], call_id: str) -> AIMessage:
    """The reply with one `InlineReflection` call added beside its tool calls (or its answer)."""
    reply.tool_calls = [*reply.tool_calls, {"name": INLINE_SCHEMA, "args": reflection_args(messages),
                                            "id": call_id, "type": "tool_call"}]
    return reply
