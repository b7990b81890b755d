"""The request a model reads: tool results framed as untrusted data, notes from earlier steps in a data message.

Only requests are framed; the state, the step records and the CLI keep the tools' own text.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AnyMessage, HumanMessage, ToolMessage

from reactgraph.nodes.conversation import last_human_index
from reactgraph.nodes.prompting import prompts
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


def with_notes(messages: Sequence[AnyMessage], sections: Sequence[str]) -> list[AnyMessage]:
    """The conversation with the notes block opening the current question's message (a copy, for the request).

    There, not in the system prompt: the notes were written after reading tool output, so they are data.
    In the question's message rather than a message of their own, because some chat templates refuse two
    user messages in a row; at the current question rather than first, so the earlier turns stay a stable
    prefix for prompt caching.
    """
    block = untrusted.notes(list(sections))
    out = list(messages)
    if block is None:
        return out
    at = last_human_index(out)
    if at < 0:
        return [HumanMessage(block), *out]
    content = out[at].content
    joined = f"{block}\n\n{content}" if isinstance(content, str) else [{"type": "text", "text": block}, *content]
    out[at] = out[at].model_copy(update={"content": joined})
    return out


def summary_section(summary: str | None) -> list[str]:
    """The running session summary as a notes section, or none when there is no summary yet.

    Blank lines are dropped: in the notes block a blank line separates one section from the next.
    """
    lines = [line.strip() for line in (summary or "").splitlines() if line.strip()]
    return [prompts.SUMMARY_LINE.format(summary="\n".join(lines))] if lines else []
