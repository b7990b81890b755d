"""The one rule for what counts as a question: some visible text. Checked before a turn is planned, so an empty
question runs nothing and saves nothing (no checkpoint, no Q&A log entry); checked again by the first node of
each graph (`turn_question`), so a bare `graph.invoke` or a Studio run is refused before any model or tool call
(LangGraph has saved the input checkpoint by then, nothing else)."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from langchain_core.messages import AnyMessage, HumanMessage

from reactgraph.errors import ReactGraphError
from reactgraph.nodes.conversation.transcript import current_question

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
