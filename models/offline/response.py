"""The scripted model's structured answer for a caller's `response_format` (any schema, not one of the project's):
built from its own final answer, so a run with no key gives one for simple schemas.

Each field is filled from the answer by its type: text gets the answer (an enum the choice the answer names, else
its first), numbers the answer's numbers in order (a calculation's result first), a list of text the answer's
sentences, a nested object the same way; anything else gets the simplest value its schema allows
(schema_test_model.example_value). It reads no meaning into field names: it is a script, not a language model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from reactgraph.models.response_format import read_request
from reactgraph.models.schema_test_model import MAX_DEPTH, example_value

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:[.,]\d+)?(?![\w])")
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+")


def answer_responder(parameters: dict[str, Any]) -> Callable[[Sequence[BaseMessage]], dict[str, Any]]:
    """A responder filling `parameters` (the schema's JSON schema) from the answer the request shows."""

    def respond(messages: Sequence[BaseMessage]) -> dict[str, Any]:
        asked = read_request(list(messages))
        answer = asked[1] if asked else next((m.text for m in reversed(messages) if m.text), "")
        numbers = iter(_numbers(answer))
        value = _fill(parameters, answer, numbers, 0)
        return value if isinstance(value, dict) else {}

    return respond


def _numbers(answer: str) -> list[float]:
    """The answer's numbers in order, a calculation's result (what follows its last "=") first."""
    before, _, after = answer.rpartition("=")
    found = _NUMBER.findall(after) + _NUMBER.findall(before) if before else _NUMBER.findall(answer)
    return [float(n.replace(",", ".")) for n in found]


def _fill(schema: Any, answer: str, numbers: Iterator[float], depth: int) -> Any:
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return None
    if isinstance(options := schema.get("anyOf") or schema.get("oneOf"), list) and options:
        chosen = next((o for o in options if isinstance(o, dict) and o.get("type") != "null"), options[0])
        return _fill(chosen, answer, numbers, depth + 1)
    kind = schema.get("type", "object" if "properties" in schema else None)
    if isinstance(enum := schema.get("enum"), list) and enum:
        return next((v for v in enum if isinstance(v, str) and v.lower() in answer.lower()), enum[0])
    if kind == "object" and isinstance(properties := schema.get("properties"), dict):
        return {name: _fill(sub, answer, numbers, depth + 1) for name, sub in properties.items()}
    if kind == "string":
        limit = schema.get("maxLength")
        return answer[:limit] if isinstance(limit, int) and limit > 0 else answer
    if kind in ("number", "integer"):
        number = next(numbers, None)
        if number is None:
            return example_value(schema)
        return round(number) if kind == "integer" else number
    if kind == "array" and isinstance(items := schema.get("items"), dict) and items.get("type") == "string":
        return [part for part in _SENTENCE.split(answer) if part.strip()] or [answer]
    return example_value(schema, depth)
