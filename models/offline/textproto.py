"""The text ReAct protocol: read a Thought/Action/Observation transcript, reply in the same format.

Used when the caller passes stop=["Observation:"] (the text protocol's think step). The transcript is turned
into the tool-calling shape (AI tool calls + ToolMessages) so the same planner decides the next step.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from reactgraph.tools import untrusted

_ACTION = re.compile(r"Action\s*[:：]\s*(?P<name>[\w.-]+)\s*\n\s*Action Input\s*[:：]\s*(?P<input>.*?)"
                     r"(?=\n\s*Observation\s*[:：]|\n\s*Thought\s*[:：]|\Z)", re.S)
_OBSERVATION = re.compile(r"^\s*Observation\s*[:：]\s*", re.S)
_LABELLED = re.compile(r"^\s*Observation\s*[:：]", re.M)
_ERROR = re.compile(r"timed out|failed|invalid arguments|unknown tool|unavailable|circuit open|denied|"
                    r"not permitted|is disabled|is busy|rate limit|^error\b", re.I)


def is_text_protocol(stop: Sequence[str] | None) -> bool:
    return any(s.strip().startswith("Observation") for s in stop or [])


def _parse_input(raw: str) -> dict:
    raw = raw.strip().strip("`").strip()
    try:
        value = json.loads(raw)
    except ValueError:
        return {"input": raw}
    return value if isinstance(value, dict) else {"input": value}


def to_tool_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The transcript as tool-calling messages: Action blocks become tool calls, Observations ToolMessages."""
    out: list[BaseMessage] = []
    pending: list[str] = []
    counter = 0

    def observe(text: str) -> None:
        if not pending:
            return
        call_id = pending.pop(0)
        content = _OBSERVATION.sub("", text, count=1).strip()
        framed_error = untrusted.is_error_block(content)
        content = untrusted.tool_output_body(content)  # the frame off; what is inside is only ever data
        try:
            json.loads(content)
            status = "error" if framed_error else "success"
        except ValueError:
            status = "error" if framed_error or _ERROR.search(content) else "success"
        out.append(ToolMessage(content, tool_call_id=call_id, status=status))

    for message in messages:
        text = message.text
        if isinstance(message, SystemMessage):
            out.append(message)
        elif isinstance(message, (HumanMessage, ToolMessage)) and _OBSERVATION.match(text):
            observe(text)
        elif isinstance(message, HumanMessage):
            out.append(message)
        elif isinstance(message, AIMessage):
            parts = re.split(r"\n\s*(?=Observation\s*[:：])", text)
            for part in parts:
                if _OBSERVATION.match(part):
                    observe(part)
                    continue
                calls = []
                for match in _ACTION.finditer(part):
                    call_id = f"text_{counter}"
                    counter += 1
                    calls.append({"name": match.group("name"), "args": _parse_input(match.group("input")),
                                  "id": call_id, "type": "tool_call"})
                    pending.append(call_id)
                out.append(AIMessage(part, tool_calls=calls) if calls else AIMessage(part))
    return out


def as_tool_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages in tool-calling shape: a text-protocol transcript is converted, anything else is kept."""
    has_calls = any(isinstance(m, AIMessage) and m.tool_calls for m in messages)
    textual = any((isinstance(m, AIMessage) and _ACTION.search(m.text))
                  or (isinstance(m, HumanMessage) and _LABELLED.search(m.text)) for m in messages)
    return to_tool_messages(messages) if textual and not has_calls else list(messages)


def render_plan(args: dict) -> str:
    """A Plan's or Replan's arguments as a numbered list, one `N. goal (tool: name)` line a step: how a plan is
    written without a schema (the text protocol's plan and replan requests)."""
    lines = []
    if "avoid_tools" in args:
        lines += [f"Reason: {args.get('reason') or ''}", f"Avoid tools: {', '.join(args['avoid_tools']) or 'none'}"]
    steps = args.get("steps") or []
    lines.append("Plan:" if steps else "Plan: none")
    lines += [f"{i}. {step['goal']} (tool: {step.get('tool') or 'none'})" for i, step in enumerate(steps, 1)]
    return "\n".join(lines)


def render_action(thought: str, name: str, args: dict) -> str:
    return f"Thought: {thought}\nAction: {name}\nAction Input: {json.dumps(args, ensure_ascii=False)}"


def render_final(answer: str, lang: str) -> str:
    thought = "我已经可以回答了。" if lang == "zh" else "I can answer now."
    return f"Thought: {thought}\nFinal Answer: {answer}"
