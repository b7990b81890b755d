"""Structured output that works on servers without `json_schema`: strategies tried in order, a refused one dropped.

A strategy is `json_schema` (the server constrains the reply to the schema), `function_calling` (the schema as
the one tool the reply must call) or `json` (the schema described in the prompt, the JSON parsed from the reply
text; any chat model can do it). REACTGRAPH_STRUCTURED_OUTPUT picks one, or `auto` (the default) starts with
`json_schema` and falls back to the next when the server refuses the request (a 4xx other than auth, limits and
timeouts, or a 5xx whose body says the request is bad). The strategy that worked is kept for later calls.
Every strategy answers as `with_structured_output(include_raw=True)` does: `{"raw", "parsed", "parsing_error"}`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from langchain_core.exceptions import OutputParserException
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.output_parsers import BaseOutputParser, JsonOutputParser, PydanticOutputParser
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

from reactgraph.models.loader import ModelConfigError, says_request_is_bad

STRATEGIES = ("json_schema", "function_calling", "json")
Build = Callable[[str], Runnable]


def strategies() -> tuple[str, ...]:
    """The strategies to try, in order, from REACTGRAPH_STRUCTURED_OUTPUT (auto: all of them)."""
    value = os.environ.get("REACTGRAPH_STRUCTURED_OUTPUT", "").strip().lower() or "auto"
    if value == "auto":
        return STRATEGIES
    if value not in STRATEGIES:
        raise ModelConfigError(f"REACTGRAPH_STRUCTURED_OUTPUT must be auto or one of {', '.join(STRATEGIES)}, "
                               f"not {value!r}")
    return (value,)


def refused(exc: BaseException) -> bool:
    """Whether the server refused the request as such (so another strategy may be accepted)."""
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        return False
    if 400 <= status < 500:
        return status not in (401, 403, 404, 408, 409, 429)
    return says_request_is_bad(getattr(exc, "body", None) or str(exc))


def truncated(exc: BaseException) -> dict[str, Any] | None:
    """A reply cut at max_tokens before its JSON was complete (the OpenAI SDK raises LengthFinishReasonError for
    it) as an unparsed output, with the reply and its token usage kept: the tokens were spent all the same."""
    completion = getattr(exc, "completion", None)
    if type(exc).__name__ != "LengthFinishReasonError" or completion is None or not completion.choices:
        return None
    usage = completion.usage
    metadata = {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens,
                "total_tokens": usage.total_tokens} if usage is not None else None
    raw = AIMessage(content=completion.choices[0].message.content or "", usage_metadata=metadata,
                    response_metadata={"finish_reason": "length", "model_name": completion.model})
    return {"raw": raw, "parsed": None, "parsing_error": exc}


def plain_json(model: Runnable, schema: type | dict[str, Any]) -> Runnable:
    """The schema described in a last message, the reply's JSON parsed (a fenced block is read too). A JSON
    schema (a caller's response_format) gives the parsed object, a pydantic model its instance."""
    parser: BaseOutputParser[Any]
    if isinstance(schema, dict):
        parser = JsonOutputParser()
        instruction = f"Reply with one JSON object that follows this JSON schema:\n{json.dumps(schema)}"
    else:
        parser = PydanticOutputParser(pydantic_object=schema)
        instruction = parser.get_format_instructions()
    instruction += "\nReply with the JSON object only."

    def ask(messages: Any) -> list[Any]:
        return [*messages, HumanMessage(instruction)] if isinstance(messages, list) else [messages, instruction]

    def parse(reply: AIMessage) -> dict[str, Any]:
        try:
            return {"raw": reply, "parsed": parser.invoke(reply), "parsing_error": None}
        except OutputParserException as exc:
            return {"raw": reply, "parsed": None, "parsing_error": exc}

    return RunnableLambda(ask) | model | RunnableLambda(parse)


class FirstAccepted(Runnable[Any, Any]):
    """The strategies' runnables in order: a refused request moves on to the next one, for this call and later."""

    def __init__(self, names: tuple[str, ...], build: Build) -> None:
        self.names, self.build = names, build
        self.chosen = 0
        self._built: dict[str, Runnable] = {}

    def _runnable(self, position: int) -> Runnable:
        name = self.names[position]
        if name not in self._built:
            self._built[name] = self.build(name)
        return self._built[name]

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        position = self.chosen
        while True:
            try:
                return self._runnable(position).invoke(input, config, **kwargs)
            except Exception as exc:  # noqa: BLE001 - `_after` re-raises what is not a refusal or a cut reply
                position, reply = self._after(position, exc)
                if reply is not None:
                    return reply

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        position = self.chosen
        while True:
            try:
                return await self._runnable(position).ainvoke(input, config, **kwargs)
            except Exception as exc:  # noqa: BLE001 - `_after` re-raises what is not a refusal or a cut reply
                position, reply = self._after(position, exc)
                if reply is not None:
                    return reply

    def _after(self, position: int, exc: Exception) -> tuple[int, Any]:
        """After strategy `position` failed with `exc`: (position, the cut reply) when the reply was only cut at
        the token limit, else (the next strategy's position, None) when the server refused this one; re-raises
        anything else, and a refusal of the last strategy."""
        if (cut := truncated(exc)) is not None:
            return position, cut
        if position + 1 >= len(self.names) or not refused(exc):
            raise exc
        self.chosen = position + 1
        return self.chosen, None


def structured_output(model: Any, schema: type | dict[str, Any], *, include_raw: bool, build: Build) -> Runnable:
    """`model`'s structured output as `schema` by the configured strategies; `build(method)` makes the model's own
    `with_structured_output(include_raw=True, method=method)` for json_schema and function_calling."""

    def make(name: str) -> Runnable:
        return plain_json(model, schema) if name == "json" else build(name)

    chain: Runnable = FirstAccepted(strategies(), make)
    if not include_raw:
        chain = chain | RunnableLambda(_parsed_or_raise)
    return chain


def _parsed_or_raise(output: dict[str, Any]) -> Any:
    if output.get("parsing_error") is not None:
        raise output["parsing_error"]
    return output.get("parsed")
