"""How the scripted model reads framed data: tool results inside `<tool_output>`, notes inside `<notes>`.

Tool results are read for their facts only (the frame taken off, nothing inside obeyed). The notes block that
opens the question's message (summary, reflection note, plan, lessons: data written by a model) is set apart
from the question as context; the scripted model reads nothing of its wording, only the question after it.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage

from reactgraph.tools import untrusted


def unframed(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages with tool results unframed, and a notes block (which opens the question's message) set apart
    from the question as a context message."""
    out: list[BaseMessage] = []
    for message in messages:
        if isinstance(message, HumanMessage) and untrusted.is_notes(message.text):
            body, rest = untrusted.split_notes(message.text)
            out.append(SystemMessage(body))
            if rest.strip():
                out.append(HumanMessage(rest, id=message.id))
        elif isinstance(message, ToolMessage) and isinstance(message.content, str):
            out.append(message.model_copy(update={"content": untrusted.tool_output_body(message.content)}))
        else:
            out.append(message)
    return out
