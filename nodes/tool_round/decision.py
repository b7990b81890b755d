"""A person's decision on one tool call, whichever format it came in (approval_answer.py reads it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reactgraph.errors import ReactGraphError
from reactgraph.tools.meta import ApprovalDecision

MAX_REASON_CHARS = 1000  # a rejection's reason goes into the model's next prompt
MAX_RESPONSE_CHARS = 10_000  # a respond's text is the call's result (observe still cuts it to the budget)
MAX_NAME_CHARS = 100


@dataclass(frozen=True)
class Decision:
    """One person's decision on one call."""

    kind: ApprovalDecision
    name: str | None = None  # edit: the tool to call instead (None: the same tool)
    args: dict[str, Any] = field(default_factory=dict)  # edit: the arguments to call it with
    message: str = ""  # reject: why, shown to the model; respond: the call's result


class BadAnswer(ReactGraphError, ValueError):
    """An answer that is not one of the accepted shapes; the message says what was wrong and what is accepted."""
