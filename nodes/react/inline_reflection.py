"""`reflection="inline"`: the think reply carries the reflection verdict beside its tool calls or its answer, so
reflecting costs no model call of its own.

Tools protocol: one more tool, `InlineReflection` (the verdict's schema), offered beside the real ones; the
system prompt asks for one call of it with every reply. Text protocol: a `<reflection>{json}</reflection>` block
before the Thought. Either way the verdict is taken out of the reply before the reply joins the conversation (it
is no call to run, no text to show) and read within bounds. A reply without a usable one gets the safe default,
a verdict that stops nothing and names no parts: the loop goes on, the loop guard's rules still apply, and a
closing answer is checked by the closing self-check as without reflection.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any, cast

from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.messages.utils import message_chunk_to_message
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ValidationError

from reactgraph.nodes.closing import model_account
from reactgraph.nodes.state import ExecutionStep, ReflectionVerdict, Verdict, make_step, parts_verdict

INLINE_TOOL = "InlineReflection"
MAX_VERDICT_CHARS = 8000  # a verdict's JSON past this is not read (model output is untrusted)
MAX_NOTE_CHARS = 500
# A block the model left unclosed ends where the protocol's next label begins.
_FLAGS = ("enough_information", "tool_error", "need_other_tool", "repeated_call")
_BLOCK = re.compile(r"<reflection>(?P<body>.*?)(?:</reflection>|(?=\n\s*(?:Thought|Action|Final Answer)\s*[:：])|\Z)",
                    re.S | re.I)


class InlineReflection(ReflectionVerdict):
    """Your verdict on the tool results so far. Call this once with every reply, beside your tool calls or your
    final answer; it runs nothing and returns nothing."""


@cache
def inline_schema() -> dict[str, Any]:
    """The verdict as one more tool's OpenAI schema (one object, so the bound model is derived once). Its fields
    go without their descriptions: the system prompt's rule (prompts.INLINE_REFLECTION_RULE) names what each
    means, and this schema rides on every think request, so every word of it is paid for on each call."""
    schema = convert_to_openai_tool(InlineReflection)
    for field_schema in schema["function"]["parameters"]["properties"].values():
        field_schema.pop("description", None)
    return schema


def _names_inline(raw_call: Any) -> bool:
    """A provider's raw tool call (`additional_kwargs["tool_calls"]`, OpenAI's shape) that calls the verdict."""
    return isinstance(raw_call, dict) and (raw_call.get("function") or {}).get("name") == INLINE_TOOL


def _names_inline_block(block: Any) -> bool:
    """A content block that calls the verdict (Anthropic's `tool_use`): sent back, it would want a result."""
    return isinstance(block, dict) and block.get("name") == INLINE_TOOL and block.get("type") != "text"


def split_tools_reply(reply: AIMessage) -> tuple[AIMessage, Any]:
    """The reply without its verdict call(s), and the first one's arguments (None when it made none; the raw
    text of an unreadable one, which then reads as no verdict). Every trace goes: the parsed and unparsable
    calls, the provider's raw calls and content blocks, so no request ever sends a call without its result."""
    if isinstance(reply, AIMessageChunk):  # a streamed reply: its calls settled as a message's
        reply = cast(AIMessage, message_chunk_to_message(reply))
    raw: Any = None
    found = False
    for call in [*reply.tool_calls, *reply.invalid_tool_calls]:
        if call.get("name") == INLINE_TOOL and not found:
            raw, found = call.get("args"), True
    if not found:
        return reply, None
    extra = dict(reply.additional_kwargs)
    if isinstance(extra.get("tool_calls"), list):
        extra["tool_calls"] = [c for c in extra["tool_calls"] if not _names_inline(c)] or None
        if extra["tool_calls"] is None:
            del extra["tool_calls"]
    content = reply.content
    if isinstance(content, list):
        content = [block for block in content if not _names_inline_block(block)]
    return reply.model_copy(update={
        "content": content, "additional_kwargs": extra,
        "tool_calls": [c for c in reply.tool_calls if c.get("name") != INLINE_TOOL],
        "invalid_tool_calls": [c for c in reply.invalid_tool_calls if c.get("name") != INLINE_TOOL]}), raw


def split_text_reply(text: str) -> tuple[str, str | None]:
    """A text-protocol reply without its `<reflection>` block(s), and the first block's body (None without one)."""
    match = _BLOCK.search(text)
    if match is None:
        return text, None
    return _BLOCK.sub("", text).strip(), match.group("body")


def read_verdict(raw: Any) -> tuple[ReflectionVerdict | None, str]:
    """The verdict from a call's arguments or a block's JSON, bounded, with "" as the problem; or None and one
    line naming why it could not be read."""
    if raw is None:
        return None, "the reply carried no verdict"
    if isinstance(raw, str):
        if len(raw) > MAX_VERDICT_CHARS:
            return None, f"the verdict is longer than {MAX_VERDICT_CHARS} characters"
        try:
            raw = json.loads(raw.strip().strip("`").removeprefix("json").strip())
        except ValueError:
            return None, "the verdict is not JSON"
    if not isinstance(raw, dict):
        return None, f"the verdict is a {type(raw).__name__}, not an object"
    if len(json.dumps(raw, default=str)) > MAX_VERDICT_CHARS:
        return None, f"the verdict is longer than {MAX_VERDICT_CHARS} characters"
    try:  # a flag the model left out stops nothing (False), as the safe default does
        verdict = ReflectionVerdict.model_validate({**dict.fromkeys(_FLAGS, False), **raw})
    except ValidationError as exc:
        return None, f"the verdict does not fit its schema ({exc.error_count()} error(s))"
    account = model_account(verdict.parts, verdict.missing)
    note = " ".join(verdict.note.split())[:MAX_NOTE_CHARS]
    return verdict.model_copy(update={"note": note, "parts": account.parts, "missing": account.missing}), ""


def inline_record(raw: Any, iteration: int) -> tuple[Verdict, ExecutionStep, str]:
    """The state's verdict from what a think reply carried (the safe default when it is unusable), its step
    record (its tokens are the think reply's, counted there) and why it was unusable ("" when it was not)."""
    verdict, problem = read_verdict(raw)
    record = verdict.record() if verdict is not None else parts_verdict()
    step = make_step(step=iteration, node="reflect", status="reflection",
                     thought=verdict.note if verdict is not None else f"no inline verdict: {problem}",
                     observation=json.dumps(record, ensure_ascii=False))
    return record, step, problem

