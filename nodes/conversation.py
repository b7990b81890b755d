"""The conversation as the nodes read it, and the one rule for what counts as a question.

Reading: where the current turn starts (the human message that opened it), the question's text, the last model
reply and the tool calls it asked for (those whose arguments failed to parse included), and the tool results that
answered it. The rule: a question has some visible text. It is checked before a turn is planned, so an empty
question runs nothing and saves nothing (no checkpoint, no Q&A log entry), and again by the first node of each
graph (`turn_question`), so a bare `graph.invoke` or a Studio run is refused before any model or tool call
(LangGraph has saved the input checkpoint by then, nothing else).

Plain functions over LangChain messages, with no LangGraph import: the CLI checks a question with them before the
graph is loaded.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from reactgraph.errors import ReactGraphError

# --- the current turn in the messages ---------------------------------------------------------------------------------

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



# --- what counts as a question ----------------------------------------------------------------------------------------

# Characters that show nothing: spaces and separators of any script, control and format characters (zero-width
# space, BOM, direction marks). A question made only of these is as empty as "".
_INVISIBLE = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf"})


class EmptyQuestion(ReactGraphError, ValueError):
    """A question with no visible text: refused before anything runs or is saved."""


def check_question(question: object) -> str:
    """`question` itself when it has visible text; otherwise `EmptyQuestion`, one line saying what was wrong."""
    if not isinstance(question, str):
        raise EmptyQuestion(f"the question must be text, not {type(question).__name__}; nothing was run")
    if not any(unicodedata.category(char) not in _INVISIBLE for char in question):
        what = "empty" if not question else "only whitespace or invisible characters"
        raise EmptyQuestion(f"the question is {what}; ask something (nothing was run or saved)")
    return question


def turn_question(messages: Sequence[AnyMessage]) -> HumanMessage | None:
    """The human message that opens the current turn, if it passes `check_question` (no question is an empty one)."""
    question = current_question(messages)
    check_question(question.text if question is not None else "")
    return question
