"""Reading the conversation: where the current turn starts and what the last model reply was."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage


def last_human_index(messages: Sequence[AnyMessage]) -> int:
    """Index of the message that opened the current turn (-1 if there is none)."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            return i
    return -1


def current_question(messages: Sequence[AnyMessage]) -> HumanMessage | None:
    i = last_human_index(messages)
    question = messages[i] if i >= 0 else None
    return question if isinstance(question, HumanMessage) else None


def question_text(messages: Sequence[AnyMessage]) -> str:
    """The text of the question that opened the current turn, stripped ("" if there is none)."""
    question = current_question(messages)
    return question.text.strip() if question is not None else ""


def last_ai(messages: Sequence[AnyMessage]) -> AIMessage | None:
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return message
    return None


def pending_calls(message: AIMessage | None) -> list[dict]:
    """Tool calls the model asked for, including ones whose arguments failed to parse."""
    if message is None:
        return []
    calls = [dict(c) for c in message.tool_calls]
    for bad in message.invalid_tool_calls:
        calls.append({"name": bad.get("name") or "", "args": bad.get("args"), "id": bad.get("id") or "",
                      "parse_error": bad.get("error") or "arguments are not valid JSON"})
    return calls


def latest_tool_messages(messages: Sequence[AnyMessage]) -> list[ToolMessage]:
    """The tool results that answered the last model reply."""
    tail: list[ToolMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        tail.append(message)
    return tail[::-1]



def tokens_of(message: AIMessage | None) -> int:
    usage = getattr(message, "usage_metadata", None) or {}
    return int(usage.get("total_tokens", 0) or 0)
