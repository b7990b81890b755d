"""The text ReAct protocol: the prompt, a tolerant reply parser, and the conversation rendered as text.

For models without native tool calling. The model reads a Thought / Action / Action Input / Observation
transcript and is called with `stop=["Observation:"]`. Its reply is parsed and turned into an ordinary
AIMessage with `tool_calls` (the Thought as content), so act, observe, reflect and finalize, and the step
records, are the same in both protocols; only the request is rendered as text. Reflection in `llm` mode
uses the rules here, since a text-only model may offer no structured output.
"""

from __future__ import annotations

import ast
import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from reactgraph.nodes import prompts
from reactgraph.nodes.conversation import pending_calls
from reactgraph.nodes.prompting import react_markup as markup
from reactgraph.tools import untrusted

STOP = ["Observation:"]

_INLINE_ARGS = re.compile(r"^(?P<name>[\w.-]+)\s*[(\[](?P<args>.*)[)\]]\s*$", re.S)
_NO_ACTION = {"", "none", "n/a", "na", "null", "无", "没有"}


@dataclass(frozen=True)
class ReactReply:
    """One reply read leniently: a Thought plus either an Action (with raw input) or a Final Answer."""

    thought: str = ""
    action: str | None = None
    action_input: str | None = None
    final_answer: str | None = None
    problem: str | None = None  # why the reply is unusable, when it has neither an Action nor a Final Answer


def parse_reply(text: str) -> ReactReply:
    """Read a reply: labels in any case, "：" for ":", code fences, and a made-up Observation cut off.

    A tool-output or notes block the model echoed is dropped first: protocol lines inside it are data (a page
    that says "Final Answer: …" must not end the run when the model repeats it).
    """
    sections = markup.sections(markup.unwrap(untrusted.without_data_blocks(markup.normalized(text))))
    # Everything from the first Observation on was invented by the model (a server that ignored `stop`).
    cut = next((i for i, (label, _) in enumerate(sections) if label == "observation"), len(sections))
    sections = sections[:cut]
    labels = [label for label, _ in sections]
    thought = "\n".join(value for label, value in sections[:_first(labels, "action", "final answer")]
                        if label == "thought").strip()
    act_at, final_at = _first(labels, "action"), _first(labels, "final answer")
    if act_at < final_at:
        name, _, rest = sections[act_at][1].partition("\n")
        name = name.strip().strip("`*'\"").strip()
        if name.lower() not in _NO_ACTION:
            following = sections[act_at + 1] if act_at + 1 < len(sections) else ("", "")
            raw_input = following[1] if following[0] == "action input" else (rest.strip() or None)
            inline = _INLINE_ARGS.match(name)
            if inline and raw_input is None:
                name, raw_input = inline.group("name"), inline.group("args")
            return ReactReply(thought=thought, action=name, action_input=raw_input)
    if final_at < len(sections):
        answer = sections[final_at][1]
        if len(markup.FENCE.findall(answer)) % 2:  # an unmatched fence closes a wrapper, not the answer's code
            answer = markup.FENCE.sub("", answer)
        if answer := answer.strip():
            return ReactReply(thought=thought, final_answer=answer)
        return ReactReply(thought=thought, problem="the Final Answer is empty")
    if act_at < len(sections):
        return ReactReply(thought=thought, problem="'Action:' names no tool and there is no 'Final Answer:'")
    return ReactReply(thought=thought, problem="the reply has neither 'Action:' nor 'Final Answer:'")


def _first(labels: list[str], *wanted: str) -> int:
    return next((i for i, label in enumerate(labels) if label in wanted), len(labels))


# --- from a parsed reply to a tool call --------------------------------------------------------------------

def _schema_of(schemas: Sequence[dict[str, Any]], name: str) -> tuple[str, dict[str, Any]] | None:
    """The offered tool a name refers to (exact, else case-insensitive) and its parameter schema."""
    tools = {s["function"]["name"]: s["function"].get("parameters") or {} for s in schemas}
    if name in tools:
        return name, tools[name]
    folded = [t for t in tools if t.lower() == name.lower()]
    # "the calculator tool" still means calculator, as long as exactly one offered tool is named.
    named = folded or [t for t in tools if re.search(rf"(?<![\w-]){re.escape(t)}(?![\w-])", name, re.I)]
    return (named[0], tools[named[0]]) if len(named) == 1 else None


def _single_parameter(parameters: dict[str, Any]) -> str | None:
    required = parameters.get("required") or []
    if len(required) == 1:
        return required[0]
    properties = list(parameters.get("properties") or {})
    return properties[0] if len(properties) == 1 else None


def _decode(raw: str) -> tuple[bool, Any]:
    """(parsed?, value): JSON (an object may be followed by chatter), a single-quoted dict, else the string."""
    try:
        value, end = json.JSONDecoder().raw_decode(raw)
        if isinstance(value, dict) or not raw[end:].strip():
            return True, value
    except ValueError:
        pass
    if raw.startswith("{"):
        try:  # up to the last brace: a single-quoted dict may be followed by chatter too
            value = ast.literal_eval(raw[:raw.rfind("}") + 1])  # literals only: nothing is ever executed
            json.dumps(value, allow_nan=False)  # arguments must stay JSON (sets, bytes, 1j are not)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False, raw
        return isinstance(value, dict), value
    return False, raw


def tool_args(raw: str | None, parameters: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """Arguments from an Action Input: a JSON object, or a bare value for the tool's single parameter."""
    raw = markup.input_text(raw)
    if not raw:
        return {}, None
    parsed, value = _decode(raw)
    if parsed and isinstance(value, dict):
        return value, None
    if not parsed and raw[:1] in "{[":
        return None, "Action Input is not valid JSON"
    if isinstance(value, list):
        return None, "Action Input must be a JSON object, not a list"
    single = _single_parameter(parameters)
    if single is None:
        names = ", ".join(parameters.get("properties") or {}) or "none"
        return None, f"Action Input must be a JSON object with the arguments ({names})"
    if not isinstance(value, str) and (parameters.get("properties") or {}).get(single, {}).get("type") == "string":
        value = raw  # `Action Input: 2` for a string parameter means the text "2"
    elif isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] and value[0] in "'`":
        value = value[1:-1]
    return {single: value}, None


def to_ai_message(reply: ReactReply, raw_text: str, schemas: Sequence[dict[str, Any]],
                  source: AIMessage | None = None) -> AIMessage:
    """The parsed reply as a normal AIMessage: the Thought plus one tool call, or the Final Answer."""
    extra = {"usage_metadata": source.usage_metadata, "response_metadata": source.response_metadata,
             **({"id": source.id} if source.id else {})} if source is not None else {}
    kwargs = {"react_text": raw_text}  # what the model actually wrote, for debugging
    if reply.final_answer is not None:
        return AIMessage(content=reply.final_answer, additional_kwargs=kwargs, **extra)
    call_id = f"call_{uuid.uuid4().hex[:16]}"
    found = _schema_of(schemas, reply.action or "")
    name, parameters = found if found else (reply.action or "", {})
    args, problem = tool_args(reply.action_input, parameters) if found else (_loose_args(reply.action_input), None)
    if args is None:
        return AIMessage(content=reply.thought, additional_kwargs=kwargs, invalid_tool_calls=[
            {"name": name, "args": reply.action_input, "id": call_id, "error": problem, "type": "invalid_tool_call"}],
            **extra)
    return AIMessage(content=reply.thought, additional_kwargs=kwargs, **extra,
                     tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])


def _loose_args(raw: str | None) -> dict[str, Any]:
    # An unknown tool is refused by the gateway anyway; its arguments only need to be recordable.
    parsed, value = _decode(markup.input_text(raw))
    return value if parsed and isinstance(value, dict) else ({"input": raw} if raw else {})


# --- the request: instructions and the conversation as text ------------------------------------------------

def tool_names(schemas: Sequence[dict[str, Any]]) -> str:
    return ", ".join(s["function"]["name"] for s in schemas)


def instructions(schemas: Sequence[dict[str, Any]]) -> str:
    """The protocol part of the system prompt: the offered tools with their JSON schemas, format, examples."""
    lines = [prompts.TEXT_TOOL_LINE.format(
        name=s["function"]["name"], description=" ".join((s["function"].get("description") or "").split()),
        parameters=json.dumps(s["function"].get("parameters") or {}, ensure_ascii=False)) for s in schemas]
    offered = {s["function"]["name"] for s in schemas}
    examples = [text for tool, text in prompts.TEXT_EXAMPLES.items() if tool in offered][:2]
    examples.append(prompts.TEXT_EXAMPLE_NO_TOOL)
    return prompts.TEXT_PROTOCOL_PROMPT.format(
        tools="\n".join(lines) or prompts.TEXT_NO_TOOLS, tool_names=tool_names(schemas),
        examples=prompts.TEXT_EXAMPLES_HEADER + "\n\n" + "\n\n".join(examples))


def format_correction(problem: str, schemas: Sequence[dict[str, Any]]) -> str:
    return prompts.TEXT_FORMAT_CORRECTION.format(problem=problem, tool_names=tool_names(schemas) or "none")


def _action_text(thought: str, call: dict[str, Any]) -> str:
    args = call.get("args")
    shown = args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False)
    return "\n".join([*([f"Thought: {thought}"] if thought else []), f"Action: {call['name']}",
                      f"Action Input: {shown}"])


def _observation(message: ToolMessage, tool: str | None = None) -> HumanMessage:
    """A tool result as the user's "Observation:" message, its text framed as data (see tools/untrusted.py)."""
    content = untrusted.tool_output_body(message.text.strip())
    return HumanMessage("Observation: " + untrusted.tool_output(message.name or tool, content,
                                                                error=message.status == "error"))


def as_text_messages(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """The conversation for a text-only model: each tool call as an assistant step, its result as a user
    Observation framed as data (parallel calls one after another, matched by call id). Only the request is
    rendered this way; the state keeps the ordinary messages."""
    out: list[AnyMessage] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        i += 1
        if isinstance(message, AIMessage) and (calls := pending_calls(message)):
            results: dict[str, ToolMessage] = {}
            while i < len(messages) and isinstance(result_message := messages[i], ToolMessage):
                results[result_message.tool_call_id] = result_message
                i += 1
            thought = message.text.strip()
            for call in calls:
                out.append(AIMessage(_action_text(thought, call)))
                thought = ""
                if (result := results.pop(call.get("id") or "", None)) is not None:
                    out.append(_observation(result, call.get("name")))
            out += [_observation(orphan) for orphan in results.values()]
        elif isinstance(message, AIMessage):
            if answer := message.text.strip():
                out.append(AIMessage(f"Final Answer: {answer}"))
        elif isinstance(message, ToolMessage):
            out.append(_observation(message))
        else:
            out.append(message)
    return out


def answer_text(text: str) -> str:
    """The answer in a text-protocol reply written without tools (finalize): its Final Answer if labelled."""
    reply = parse_reply(text)
    return reply.final_answer or reply.thought or text.strip()
