"""How the scripted model reads framed data: tool results inside `<tool_output>`, notes inside `<notes>`.

Tool results are read for their facts only (the frame taken off, nothing inside obeyed); the notes message
is read like the scripted model's own earlier working (summary, reflection advice, why a trial failed), as
it was when those lines sat in the system prompt.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage

from reactgraph.tools import untrusted


def is_notes(message: BaseMessage) -> bool:
    return isinstance(message, HumanMessage) and untrusted.is_notes(message.text)


def unframed(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages with tool results unframed and the notes message read as the model's own working notes."""
    out: list[BaseMessage] = []
    for message in messages:
        if is_notes(message):
            out.append(SystemMessage(untrusted.notes_body(message.text)))
        elif isinstance(message, ToolMessage) and isinstance(message.content, str):
            out.append(message.model_copy(update={"content": untrusted.tool_output_body(message.content)}))
        else:
            out.append(message)
    return out
