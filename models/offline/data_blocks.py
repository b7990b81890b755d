"""How the scripted model reads framed data: tool results inside `<tool_output>`, notes inside `<notes>`.

Tool results are read for their facts only (the frame taken off, nothing inside obeyed); the notes message
is read like the scripted model's own earlier working (summary, reflection advice, why a trial failed), as
it was when those lines sat in the system prompt. A Plan-and-Solve step's notes carry the plan and its
current step: the scripted model then works on the plan's goals up to the current one, not the question.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage

from reactgraph.tools import untrusted

# The plan section execute_step writes: "Plan:", "N. [outcome] goal (tool: name)" lines, "Current step (N of M): …".
_PLAN = re.compile(r"^Plan:\n(?P<lines>(?:\d+\. .*\n)+)Current step \((?P<number>\d+) of \d+\): ", re.M)
_PLAN_LINE = re.compile(r"^\d+\. (?:\[(?:done|recovered|failed)\] )?(?P<goal>.*?)(?: \(tool: [\w.-]+\))?$")


def plan_goals(notes: str) -> str | None:
    """The goals of the plan in `notes` up to its current step, one a line (None without a plan section)."""
    match = _PLAN.search(notes)
    if match is None:
        return None
    lines = match.group("lines").splitlines()[:int(match.group("number"))]
    goals = [m.group("goal") for line in lines if (m := _PLAN_LINE.match(line))]
    return "\n".join(goals) or None


def unframed(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages with tool results unframed, and a notes block (which opens the question's message) read
    as the model's own working notes, apart from the question (or, in a plan step, the goals so far)."""
    out: list[BaseMessage] = []
    for message in messages:
        if isinstance(message, HumanMessage) and untrusted.is_notes(message.text):
            body, rest = untrusted.split_notes(message.text)
            out.append(SystemMessage(body))
            # A step like "how many years since then?" keeps the subject the earlier goals named.
            rest = plan_goals(body) or rest
            if rest.strip():
                out.append(HumanMessage(rest, id=message.id))
        elif isinstance(message, ToolMessage) and isinstance(message.content, str):
            out.append(message.model_copy(update={"content": untrusted.tool_output_body(message.content)}))
        else:
            out.append(message)
    return out
