"""The request a model reads: tool results framed as untrusted data, notes from earlier steps in a data message.

Only requests are framed; the state, the step records and the CLI keep the tools' own text.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AnyMessage, HumanMessage, ToolMessage

from reactgraph.nodes.shared.transcript import last_human_index
from reactgraph.tools import untrusted


def framed(message: ToolMessage) -> ToolMessage:
    """A copy of a tool result whose content is a `<tool_output tool="…">` block (framed once only)."""
    error = message.status == "error"
    content = message.content
    if isinstance(content, str):
        if untrusted.tool_output_body(content) != content:
            return message
        return message.model_copy(update={"content": untrusted.tool_output(message.name, content, error=error)})
    # Content blocks (text beside images...): the text blocks are neutralised and the whole list delimited.
    opening, closing = untrusted.tool_output(message.name, "\x00", error=error).split("\x00")
    blocks = [{**b, "text": untrusted.neutralise(b["text"])} if isinstance(b, dict) and b.get("type") == "text"
              else untrusted.neutralise(b) if isinstance(b, str) else b for b in content]
    return message.model_copy(update={"content": [{"type": "text", "text": opening.rstrip("\n")}, *blocks,
                                                  {"type": "text", "text": closing.lstrip("\n")}]})


def for_model(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """The messages with every tool result framed as data."""
    return [framed(m) if isinstance(m, ToolMessage) else m for m in messages]


def notes_message(sections: Sequence[str]) -> HumanMessage | None:
    """The data message carrying notes from earlier steps (summary, reflection, lessons...), if there are any."""
    text = untrusted.notes(list(sections))
    return HumanMessage(text) if text is not None else None


def with_notes(messages: Sequence[AnyMessage], sections: Sequence[str]) -> list[AnyMessage]:
    """The conversation with the notes message just before the current question.

    There, not in the system prompt: the notes were written after reading tool output, so they are data.
    Before the question rather than first, so the earlier turns stay a stable prefix for prompt caching.
    """
    note = notes_message(sections)
    out = list(messages)
    if note is not None:
        out.insert(max(last_human_index(out), 0), note)
    return out
