"""Structured output that works on the servers people run: strategies tried in order, one that fails dropped.

A strategy is `json_schema` (the server constrains the reply to the schema), `function_calling` (the schema as
the one tool the reply must call: `tool_choice: "required"`, the string form every server reads; llama.cpp's
server ignores the object form naming the tool), `json_object` (`response_format: {"type": "json_object"}`, the
schema described in the prompt) or `json` (the schema described in the prompt, no response format; any chat
model can do it). The last two read the reply with a tolerant parser: the first JSON object in the text, fenced
or not. REACTGRAPH_STRUCTURED_OUTPUT picks one, or `auto` (the default) starts with `json_schema` and moves to the
next when the server refuses the request (a 4xx other than auth, limits and timeouts, or a 5xx whose body says
the request is bad) or does not apply it (a forced tool call answered without a call, a JSON reply with no JSON
object in it). The strategy that worked is remembered per (base URL, model), in the process and across
processes (models/strategy_record.py), so a new process does not pay the refused request again.
Every strategy answers as `with_structured_output(include_raw=True)` does: `{"raw", "parsed", "parsing_error"}`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from langchain_core.exceptions import OutputParserException
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.output_parsers import BaseOutputParser, PydanticOutputParser
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from pydantic import BaseModel, ValidationError

from reactgraph.models.loader import ModelConfigError, says_request_is_bad
from reactgraph.models.strategy_record import remember, remembered

STRATEGIES = ("json_schema", "function_calling", "json_object", "json")
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


# Places a reply's object may start that are tried, at most: each try may read to the reply's end, so a reply made
# of thousands of `{` (a model repeating itself) would cost time growing with its length squared (seconds for 200 KB).
MAX_OBJECT_STARTS = 100


def json_object_in(text: str) -> Any:
    """The first JSON object in a reply's text: the whole text, else a fenced block, else the first `{…}` that
    parses (a small model wraps its JSON in prose), among the first MAX_OBJECT_STARTS. Raises ValueError when
    there is none."""
    decoder = json.JSONDecoder()
    stripped = text.strip()
    candidates = [stripped]
    if "```" in stripped:
        candidates += [block.removeprefix("json").strip() for block in stripped.split("```")[1::2]]
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
            continue
        if isinstance(value, dict):
            return value
    position, tries = stripped.find("{"), 0
    while position != -1 and tries < MAX_OBJECT_STARTS:
        tries += 1
        try:
            value, _ = decoder.raw_decode(stripped, position)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            return value
        position = stripped.find("{", position + 1)
    raise ValueError("the reply holds no JSON object")


class TolerantJsonParser(BaseOutputParser[Any]):
    """The first JSON object in the reply (`json_object_in`), validated by pydantic when the schema is a class."""

    target: Any = None  # a pydantic model to validate against, or a JSON schema dict (not validated here)

    def parse(self, text: str) -> Any:
        try:
            value = json_object_in(text)
        except ValueError as exc:
            raise OutputParserException(f"{exc}: {text[:200]!r}", llm_output=text) from None
        if isinstance(self.target, type) and issubclass(self.target, BaseModel):
            try:
                return self.target.model_validate(value)
            except ValidationError as exc:
                raise OutputParserException(f"{self.target.__name__}: {exc}"[:1000], llm_output=text) from None
        return value


def plain_json(model: Runnable, schema: type | dict[str, Any], *, json_mode: bool = False) -> Runnable:
    """The schema described in a last message, the first JSON object of the reply parsed (a fenced block, or one
    in prose, is read too). A JSON schema (a caller's response_format) gives the parsed object, a pydantic model
    its instance. `json_mode`: the request asks for `response_format: {"type": "json_object"}` as well."""
    instruction: str
    if isinstance(schema, dict):
        instruction = f"Reply with one JSON object that follows this JSON schema:\n{json.dumps(schema)}"
    else:
        instruction = PydanticOutputParser(pydantic_object=schema).get_format_instructions()
    instruction += "\nReply with the JSON object only."
    parser = TolerantJsonParser(target=schema)
    if json_mode:
        model = model.bind(response_format={"type": "json_object"})

    def ask(messages: Any) -> list[Any]:
        return [*messages, HumanMessage(instruction)] if isinstance(messages, list) else [messages, instruction]

    def parse(reply: AIMessage) -> dict[str, Any]:
        try:
            return {"raw": reply, "parsed": parser.invoke(reply), "parsing_error": None}
        except OutputParserException as exc:
            return {"raw": reply, "parsed": None, "parsing_error": exc}

    return RunnableLambda(ask) | model | RunnableLambda(parse)


def not_applied(name: str, output: Any) -> bool:
    """Whether the server answered without applying strategy `name`: a forced tool call answered with no call
    (llama.cpp's server ignores `tool_choice` naming a tool), or a JSON reply with no JSON object in its text."""
    raw = output.get("raw") if isinstance(output, dict) else None
    if not isinstance(raw, AIMessage) or output.get("parsed") is not None:
        return False
    text = raw.content if isinstance(raw.content, str) else ""
    # a reply cut at the token limit tells only when no JSON had even begun (the strategy's own output would have)
    without_json = bool(text.strip()) and "{" not in text
    if (raw.response_metadata or {}).get("finish_reason") == "length":
        return without_json
    if name == "function_calling":
        return not raw.tool_calls and not raw.invalid_tool_calls
    return name in ("json_schema", "json_object") and without_json


class FirstAccepted(Runnable[Any, Any]):
    """The strategies' runnables in order: one the server refuses or does not apply moves on to the next, for this
    call and later ones — of every runnable for the same `key` (base URL and model), in this process and in later
    ones (models/strategy_record.py). Without a key, only this runnable's later calls."""

    def __init__(self, names: tuple[str, ...], build: Build, key: str | None = None) -> None:
        self.names, self.build, self.key = names, build, key
        self.chosen = 0
        self._built: dict[str, Runnable] = {}

    def _start(self) -> int:
        known = remembered(self.key, self.names) if self.key is not None and len(self.names) > 1 else None
        return self.names.index(known) if known is not None else self.chosen

    def _runnable(self, position: int) -> Runnable:
        name = self.names[position]
        if name not in self._built:
            self._built[name] = self.build(name)
        return self._built[name]

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        position, lasting = self._start(), True  # lasting: what this call learns holds for later calls too
        while True:
            try:
                output = self._runnable(position).invoke(input, config, **kwargs)
            except Exception as exc:  # noqa: BLE001 - `_after` re-raises what is not a refusal or a cut reply
                position, lasting, reply = self._after(position, lasting, exc)
                if reply is not None:
                    return reply
                continue
            if (moved := self._worked(position, lasting, output)) is None:
                return output
            position = moved

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        position, lasting = self._start(), True  # lasting: what this call learns holds for later calls too
        while True:
            try:
                output = await self._runnable(position).ainvoke(input, config, **kwargs)
            except Exception as exc:  # noqa: BLE001 - `_after` re-raises what is not a refusal or a cut reply
                position, lasting, reply = self._after(position, lasting, exc)
                if reply is not None:
                    return reply
                continue
            if (moved := self._worked(position, lasting, output)) is None:
                return output
            position = moved

    def _worked(self, position: int, lasting: bool, output: Any) -> int | None:
        """None when strategy `position` was applied (remembered as the one that works, when `lasting`); else the
        next one's position (the server ignored it: a forced call without a call, JSON mode without JSON)."""
        moved = position + 1 < len(self.names) and not_applied(self.names[position], output)
        if lasting:
            self._move(position + 1 if moved else position)
        return position + 1 if moved else None

    def _move(self, position: int) -> None:
        self.chosen = position
        if self.key is not None and len(self.names) > 1:
            remember(self.key, self.names[position], self.names)

    def _after(self, position: int, lasting: bool, exc: Exception) -> tuple[int, bool, Any]:
        """After strategy `position` failed with `exc`: (position, lasting, the cut reply) when the reply was only
        cut at the token limit, else (the next strategy's position, lasting, None) when the server refused this
        one (or answered a json_schema request with a reply that does not parse: it did not apply the schema);
        re-raises anything else, and a refusal of the last strategy. A refusal sent as a 5xx is this request's
        (llama.cpp's server failing to read one constrained reply back): the next form is tried for this call
        only, and nothing it learns is remembered."""
        if (cut := truncated(exc)) is not None:
            return position, lasting, cut
        # the OpenAI SDK parses a json_schema reply itself: one that does not parse was not constrained by the server
        ignored = self.names[position] == "json_schema" and isinstance(exc, ValidationError | ValueError)
        if position + 1 >= len(self.names) or not (refused(exc) or ignored):
            raise exc
        status = getattr(exc, "status_code", None)
        lasting = lasting and not (isinstance(status, int) and status >= 500)
        if lasting:
            self._move(position + 1)
        return position + 1, lasting, None


def structured_output(model: Any, schema: type | dict[str, Any], *, include_raw: bool, build: Build,
                      key: str | None = None) -> Runnable:
    """`model`'s structured output as `schema` by the configured strategies; `build(method)` makes the model's own
    `with_structured_output(include_raw=True, method=method)` for json_schema and function_calling. `key`: the
    server and model whose working strategy is remembered (models/strategy_record.py)."""

    def make(name: str) -> Runnable:
        if name in ("json", "json_object"):
            return plain_json(model, schema, json_mode=name == "json_object")
        return build(name)

    chain: Runnable = FirstAccepted(strategies(), make, key)
    if not include_raw:
        chain = chain | RunnableLambda(_parsed_or_raise)
    return chain


def _parsed_or_raise(output: dict[str, Any]) -> Any:
    if output.get("parsing_error") is not None:
        raise output["parsing_error"]
    return output.get("parsed")
