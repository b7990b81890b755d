"""The one rule for what counts as a question: some visible text. Checked before a turn is planned, so an empty
question runs nothing and saves nothing (no checkpoint, no Q&A log entry)."""

from __future__ import annotations

import unicodedata

# Characters that show nothing: spaces and separators of any script, control and format characters (zero-width
# space, BOM, direction marks). A question made only of these is as empty as "".
_INVISIBLE = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf"})


class EmptyQuestion(ValueError):
    """A question with no visible text: refused before anything runs or is saved."""


def check_question(question: object) -> str:
    """`question` itself when it has visible text; otherwise `EmptyQuestion`, one line saying what was wrong."""
    if not isinstance(question, str):
        raise EmptyQuestion(f"the question must be text, not {type(question).__name__}; nothing was run")
    if not any(unicodedata.category(char) not in _INVISIBLE for char in question):
        what = "empty" if not question else "only whitespace or invisible characters"
        raise EmptyQuestion(f"the question is {what}; ask something (nothing was run or saved)")
    return question
