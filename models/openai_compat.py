"""Requests that every OpenAI-compatible server understands, and failures that are retried only when a retry helps.

`CompatibleChatOpenAI` is langchain-openai's `ChatOpenAI` with seven differences, each for servers seen in the
wild (llama.cpp's llama-server, llama-cpp-python, vLLM, Ollama, LiteLLM):
- tools are bound with `tool_choice="auto"` (REACTGRAPH_TOOL_CHOICE): llama-cpp-python reads an unset
  `tool_choice` as "none" and never shows the tools to the model;
- an assistant message holding only tool calls is sent with `content: ""`, not `null`, which some servers reject;
- a structured request (a response format or a forced tool call) whose conversation ends with the assistant's
  reply gets a last user turn asking for the structured reply: llama.cpp's server takes a last assistant message
  as a reply to continue (a prefill) and then refuses any grammar — json_schema, json_object or a forced call —
  with a 400 "Failed to initialize samplers" (the closing self-check, which checks the last reply, was refused
  so on every run);
- the reply limit goes out as `max_tokens` to a compatible server (`max_completion_tokens`, OpenAI's newer name,
  is unknown to most of them; OpenAI itself, with no base URL, still gets the new name);
- a call forced by the name of the only tool bound (function calling as a structured-output strategy) sends
  `tool_choice: "required"`: llama.cpp's server ignores the object form `{"type": "function", …}` and lets the
  model answer in text, and OpenAI, vLLM and others read both alike;
- structured output starts with `json_schema` and falls back to function calling, then to a JSON object in the
  reply, when the server refuses a strategy or ignores it; the strategy that worked is remembered per base URL
  and model across processes (models/structured_output.py, models/strategy_record.py);
- a completion without a choice (llama.cpp and others under load), or with a choice that holds no message, is
  `EmptyReply`, one line naming the server, where langchain-openai would fail with a bare `IndexError` or
  `AttributeError`.

`provider_clients` put the bounded transports (models/bounded_transport.py) under the OpenAI SDK.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar, cast

import httpx
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_openai import ChatOpenAI
from openai import APITimeoutError

from reactgraph.errors import ReactGraphError
from reactgraph.models.bounded_transport import bounded_clients
from reactgraph.models.loader import ModelConfigError, with_raw_reply
from reactgraph.models.strategy_record import strategy_key
from reactgraph.models.structured_output import structured_output

TOOL_CHOICES = ("auto", "required", "none", "unset")
# The last turn of a structured request over a conversation that ends with the assistant's reply (the closing
# self-check): a server reads a last assistant message as a start to continue, and llama.cpp's then cannot start
# the grammar of a json_schema (400 "Failed to initialize samplers").
STRUCTURED_TURN = "Reply now, in the form the instructions above ask for."


class EmptyReply(ReactGraphError):
    """A completion with no choice in it: the provider answered, with nothing."""


def tool_choice_setting() -> str | None:
    """REACTGRAPH_TOOL_CHOICE: what `tool_choice` says when tools are bound (default auto; unset: not sent)."""
    value = os.environ.get("REACTGRAPH_TOOL_CHOICE", "").strip().lower() or "auto"
    if value not in TOOL_CHOICES:
        raise ModelConfigError(f"REACTGRAPH_TOOL_CHOICE must be one of {', '.join(TOOL_CHOICES)}, not {value!r}")
    return None if value == "unset" else value


class CompatibleChatOpenAI(ChatOpenAI):
    """ChatOpenAI whose requests every OpenAI-compatible server accepts (see the module's docstring)."""

    timeouts_final: ClassVar[bool] = True  # its SDK does not retry a timeout (the loader's error line says so)

    default_tool_choice: str | None = "auto"

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        if tool_choice is None and tools:
            tool_choice = self.default_tool_choice
        elif _names_the_one_tool(tool_choice, tools):
            tool_choice = "required"  # the same demand in the form every server reads (see the module's docstring)
        return super().bind_tools(tools, tool_choice=tool_choice, **kwargs)

    def with_structured_output(self, schema: Any = None, *, include_raw: bool = False, **kwargs: Any) -> Any:
        if kwargs.get("method") is not None:  # a caller that chose a strategy gets exactly that one
            return super().with_structured_output(schema, include_raw=include_raw, **kwargs)
        def build(method: str) -> Any:
            own = super(CompatibleChatOpenAI, self).with_structured_output
            return (with_raw_reply(own(schema, method=cast(Any, method), **kwargs))
                    or own(schema, include_raw=True, method=cast(Any, method), **kwargs))
        return structured_output(self, schema, include_raw=include_raw, build=build,
                                 key=strategy_key(self.openai_api_base, self.model_name))

    def _create_chat_result(self, response: Any, generation_info: dict | None = None) -> Any:
        choices = response.get("choices") if isinstance(response, dict) else getattr(response, "choices", None)
        server = self.openai_api_base or "the OpenAI API"
        if not choices and not (isinstance(response, dict) and response.get("error")):  # an error: its own line
            raise EmptyReply(f"the reply from {server} held no choices (an empty completion)")
        for choice in choices or ():
            if (choice.get("message") if isinstance(choice, dict) else getattr(choice, "message", None)) is None:
                raise EmptyReply(f"the reply from {server} held a choice without a message")
        return super()._create_chat_result(response, generation_info)

    def _get_request_payload(self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any) -> dict[str, Any]:
        payload = super()._get_request_payload(input_, stop=stop, **kwargs)
        for message in payload.get("messages") or []:
            if message.get("role") == "assistant" and message.get("content") is None:
                message["content"] = ""
        if self.openai_api_base and "max_completion_tokens" in payload:
            payload["max_tokens"] = payload.pop("max_completion_tokens")
        messages = payload.get("messages") or []
        forced = payload.get("response_format") or payload.get("tool_choice") not in (None, "auto", "none")
        if forced and messages and messages[-1].get("role") == "assistant":
            messages.append({"role": "user", "content": STRUCTURED_TURN})
        return payload


def strategy_of(model: Any) -> tuple[str, str | None] | None:
    """(the key its structured-output strategy is remembered by, the strategy remembered now) of an
    OpenAI-compatible model; None for any other model."""
    from reactgraph.models.strategy_record import remembered
    from reactgraph.models.structured_output import STRATEGIES

    if not isinstance(model, CompatibleChatOpenAI):
        return None
    key = strategy_key(model.openai_api_base, model.model_name)
    return key, remembered(key, STRATEGIES)


def _names_the_one_tool(tool_choice: Any, tools: Any) -> bool:
    """Whether `tool_choice` forces the only tool bound by its name (a string, or OpenAI's object form)."""
    if not tools or len(tools) != 1 or tool_choice in (None, "auto", "none", "any", "required", True, False):
        return False
    name = tool_choice.get("function", {}).get("name") if isinstance(tool_choice, dict) else tool_choice
    return isinstance(name, str) and name == convert_to_openai_tool(tools[0])["function"]["name"]


def provider_clients() -> dict[str, Any]:
    """The `http_client` / `http_async_client` options of a `CompatibleChatOpenAI` (see the module's docstring)."""
    sync_client, async_client = bounded_clients(httpx, lambda request: APITimeoutError(request=request))
    return {"http_client": sync_client, "http_async_client": async_client}
