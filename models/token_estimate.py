"""The one token estimate, for any model that reports no usage (and for the scripted model, which has none to
report): CJK characters count one token each, other text ~4 characters per token. Model-neutral, so it sits in
the models layer where both the budgets (nodes) and the offline model can use it."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.ai import UsageMetadata

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def estimate_tokens(text: str) -> int:
    """Rough token count: 1 per CJK character plus ceil(other characters / 4)."""
    cjk = len(_CJK.findall(text))  # one regex pass: a per-character test showed up in every model call's cost
    other = len(text) - cjk
    return cjk + math.ceil(other / 4)


def _message_text(message: BaseMessage) -> str:
    text = str(message.text)
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            text += call["name"] + json.dumps(call.get("args") or {}, ensure_ascii=False)
    return text


def usage_for(messages: Sequence[BaseMessage], reply: AIMessage,
              tools: Iterable[dict[str, Any]] | None = None) -> UsageMetadata:
    """Estimated input (messages and bound tool schemas) and output (content and tool-call args) tokens."""
    prompt = "".join(_message_text(m) for m in messages)
    prompt += "".join(json.dumps(t, ensure_ascii=False) for t in tools or [])
    input_tokens = estimate_tokens(prompt)
    output_tokens = max(1, estimate_tokens(_message_text(reply)))
    return UsageMetadata(input_tokens=input_tokens, output_tokens=output_tokens,
                         total_tokens=input_tokens + output_tokens)
