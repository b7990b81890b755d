"""The one token estimate, for any model that reports no usage (and for the scripted model, which has none to
report): CJK characters count one token each, other text ~4 characters per token. Model-neutral, so it sits in
the models layer where both the budgets (nodes) and the offline model can use it.

A run sends its whole history again with every model call, so what is read off a message is read once and kept
while the message lives (`PerMessage`): the counts of its text here, its copy framed as data in nodes/prompts.py.
Read again each time, a turn's estimates grew with the square of its length.
"""

from __future__ import annotations

import json
import math
import re
import weakref
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache, partial
from typing import Any, Generic, TypeVar

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.ai import UsageMetadata

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def _counts(text: str) -> tuple[int, int]:
    """(CJK characters, other characters) of a text."""
    cjk = len(_CJK.findall(text))  # one regex pass: a per-character test showed up in every model call's cost
    return cjk, len(text) - cjk


def _tokens(cjk: int, other: int) -> int:
    return cjk + math.ceil(other / 4)


def estimate_tokens(text: str) -> int:
    """Rough token count: 1 per CJK character plus ceil(other characters / 4)."""
    return _tokens(*_counts(text))


T = TypeVar("T")


class PerMessage(Generic[T]):
    """`derive(message)`, kept while the message lives and still holds the same content and tool calls.

    Messages are not hashable, so each is kept by identity, beside a weak reference that drops its entry when the
    message goes (an id is never reused while its entry stands) and the content and tool calls it was derived from
    (a message given new ones is derived again)."""

    def __init__(self, derive: Callable[[Any], T]) -> None:
        self.derive = derive
        self._kept: dict[int, tuple[weakref.ref[Any], Any, Any, T]] = {}

    def __call__(self, message: BaseMessage) -> T:
        # (not getattr with a default: pydantic raises and catches an AttributeError for a message without calls)
        key, calls = id(message), message.tool_calls if isinstance(message, AIMessage) else None
        kept = self._kept.get(key)
        if kept is not None and kept[0]() is message and kept[1] is message.content and kept[2] is calls:
            return kept[3]
        value = self.derive(message)
        self._kept[key] = (weakref.ref(message, partial(self._forget, key)), message.content, calls, value)
        return value

    def _forget(self, key: int, _gone: weakref.ref[Any]) -> None:
        kept = self._kept.get(key)
        if kept is not None and kept[0]() is None:
            del self._kept[key]


def _message_text(message: BaseMessage) -> str:
    text = str(message.text)
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            text += call["name"] + json.dumps(call.get("args") or {}, ensure_ascii=False)
    return text


@lru_cache(maxsize=64)
def _repeated_counts(text: str) -> tuple[int, int]:
    return _counts(text)


def _text_counts(text: str) -> tuple[int, int]:
    """`_counts`, kept for texts that come back as new messages (each request's system prompt); up to 64 texts
    of at most 64 KiB are held."""
    return _repeated_counts(text) if len(text) <= 65_536 else _counts(text)


_message_counts = PerMessage(lambda message: _text_counts(_message_text(message)))


def usage_for(messages: Sequence[BaseMessage], reply: AIMessage,
              tools: Iterable[dict[str, Any]] | None = None) -> UsageMetadata:
    """Estimated input (messages and bound tool schemas) and output (content and tool-call args) tokens."""
    cjk = other = 0
    for message in messages:  # counted message by message: the same as over the prompt's whole text
        message_cjk, message_other = _message_counts(message)
        cjk, other = cjk + message_cjk, other + message_other
    schemas_cjk, schemas_other = _counts("".join(json.dumps(t, ensure_ascii=False) for t in tools or []))
    input_tokens = _tokens(cjk + schemas_cjk, other + schemas_other)
    output_tokens = max(1, estimate_tokens(_message_text(reply)))
    return UsageMetadata(input_tokens=input_tokens, output_tokens=output_tokens,
                         total_tokens=input_tokens + output_tokens)
