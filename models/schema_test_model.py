"""`--model test`: a model that calls tools from their schemas alone, so any tool — yours, an MCP server's — can
be seen working end to end without an API key (as pydantic-ai's `TestModel` does).

It is not a language model and writes nothing clever: on a new question it calls the tools the question names
(by name or a word of it: "weather" for `get_weather`; none when it names none; `test:<tool>,<tool>` picks them
whatever the question says), each with arguments built from its JSON
schema (`default`, then `examples`, `enum`, `const`, else the simplest value of the type within its bounds);
once results are in, it answers with what they returned. Structured output (reflections, plans, the closing
check) is an instance built from the schema the same way.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, Field

# A schema is the tool's (an MCP server's: untrusted): what it asks for is built within these bounds.
MAX_DEPTH = 6  # nested objects are built this deep at most; deeper ones are {}
MAX_ITEMS = 10  # an array's minItems, at most
MAX_CHARS = 100  # a string's minLength, at most
MAX_ANSWER_CHARS = 2_000


def example_value(schema: Any, depth: int = 0) -> Any:
    """The simplest value `schema` accepts: its default, example, first enum value or const, else by type. Any
    part of the schema that is not what JSON Schema says it is (a malformed server's) counts as absent."""
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return None
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    for key in ("examples", "enum"):
        if isinstance(choices := schema.get(key), list) and choices:
            return choices[0]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(options := schema.get(key), list) and options:
            chosen = next((o for o in options if isinstance(o, dict) and o.get("type") != "null"), options[0])
            return example_value(chosen, depth + 1)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    kind = next((k for k in kind if k != "null"), "null") if isinstance(kind, list) else kind
    if kind == "object":
        properties = schema.get("properties")
        required = schema.get("required")
        if not isinstance(properties, dict) or not isinstance(required, list):
            return {}
        return {name: example_value(sub, depth + 1) for name, sub in properties.items() if name in required}
    if kind == "array":
        count = _bounded(schema, "minItems", MAX_ITEMS)
        return [example_value(schema.get("items", {}), depth + 1) for _ in range(count)]
    if kind in ("integer", "number"):
        low = _number(schema.get("minimum", schema.get("exclusiveMinimum", 0)))
        value = max(low + (1 if "exclusiveMinimum" in schema else 0), 0)
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return "a" * max(_bounded(schema, "minLength", MAX_CHARS), 1)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and abs(value) < 1e15 else 0


def _bounded(schema: dict[str, Any], key: str, limit: int) -> int:
    value = schema.get(key, 0)
    return min(max(int(value), 0), limit) if isinstance(value, int | float) and not isinstance(value, bool) else 0


class SchemaTestModel(BaseChatModel):
    """Calls the named (or every) bound tool once with schema-built arguments, then answers with the results."""

    only: tuple[str, ...] = ()  # `test:<tool>,<tool>`: call these (when bound), whatever the question says
    tools: list[dict[str, Any]] = Field(default_factory=list)
    model_name: str = "test"

    @property
    def _llm_type(self) -> str:
        return "reactgraph-schema-test"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        return self.model_copy(update={"tools": [convert_to_openai_tool(t) for t in tools]})

    def with_structured_output(self, schema: Any, *, include_raw: bool = False, **kwargs: Any) -> Runnable:
        json_schema = schema.model_json_schema() if isinstance(schema, type) and issubclass(schema, BaseModel) \
            else convert_to_openai_tool(schema)["function"]["parameters"]

        def build(_input: Any) -> Any:
            value = example_value(json_schema)
            parsed = schema.model_validate(value) if isinstance(schema, type) and issubclass(schema, BaseModel) \
                else value
            raw = AIMessage(json.dumps(value))
            return {"raw": raw, "parsed": parsed, "parsing_error": None} if include_raw else parsed
        return RunnableLambda(build)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        question_at = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
        results = [m for m in messages[question_at + 1:] if isinstance(m, ToolMessage)]
        calls = [] if results else self._calls(str(messages[question_at].text) if question_at >= 0 else "")
        reply = AIMessage("", tool_calls=calls) if calls else AIMessage(_answer(results))
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _calls(self, question: str) -> list[dict[str, Any]]:
        names = [t["function"]["name"] for t in self.tools]
        chosen = [n for n in names if n in self.only] if self.only else [n for n in names if _named(n, question)]
        by_name = {t["function"]["name"]: t["function"] for t in self.tools}
        return [{"name": name, "args": example_value(by_name[name].get("parameters") or {}) or {},
                 "id": f"test-call-{position}", "type": "tool_call"} for position, name in enumerate(chosen)]


def _named(tool: str, question: str) -> bool:
    """Whether the question names the tool: its name, or a word of it ("weather" for get_weather)."""
    asked = question.lower()
    words = [w for w in tool.lower().replace("-", "_").split("_") if len(w) > 2 and w not in _VERBS]
    return tool.lower() in asked or any(word in asked for word in words)


_VERBS = frozenset({"get", "set", "run", "call", "fetch", "make", "list", "tool"})


def _answer(results: list[ToolMessage]) -> str:
    if not results:
        return "(test model) No tool was called."
    lines = [f"{m.name}: {m.text}" for m in results]
    return ("(test model) The tools returned:\n" + "\n".join(lines))[:MAX_ANSWER_CHARS]


def test_model(spec: str) -> SchemaTestModel:
    """`test`, or `test:<tool>,<tool>` naming the tools to call."""
    _, _, names = spec.partition(":")
    return SchemaTestModel(only=tuple(n.strip() for n in names.split(",") if n.strip()))


