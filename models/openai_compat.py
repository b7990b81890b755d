"""Requests that every OpenAI-compatible server understands, and failures that are retried only when a retry helps.

`CompatibleChatOpenAI` is langchain-openai's `ChatOpenAI` with four differences, each for servers seen in the
wild (llama.cpp's llama-server, llama-cpp-python, vLLM, Ollama, LiteLLM):
- tools are bound with `tool_choice="auto"` (REACTGRAPH_TOOL_CHOICE): llama-cpp-python reads an unset
  `tool_choice` as "none" and never shows the tools to the model;
- an assistant message holding only tool calls is sent with `content: ""`, not `null`, which some servers reject;
- the reply limit goes out as `max_tokens` to a compatible server (`max_completion_tokens`, OpenAI's newer name,
  is unknown to most of them; OpenAI itself, with no base URL, still gets the new name);
- structured output starts with `json_schema` and falls back to function calling, then to plain JSON in the
  reply, when the server refuses a strategy (models/structured_output.py).

`provider_clients` wrap the HTTP transport under the OpenAI SDK: a timeout is final for the SDK (the node's
retry policy decides whether the request is worth one more wait), and a 5xx whose body says the request is bad
is marked `x-should-retry: false`, so the SDK does not send the same bad request again.
"""

from __future__ import annotations

import os
from typing import Any, cast

import httpx
from langchain_openai import ChatOpenAI
from openai import APITimeoutError

from reactgraph.models.loader import ModelConfigError, says_request_is_bad
from reactgraph.models.structured_output import structured_output

TOOL_CHOICES = ("auto", "required", "none", "unset")


def tool_choice_setting() -> str | None:
    """REACTGRAPH_TOOL_CHOICE: what `tool_choice` says when tools are bound (default auto; unset: not sent)."""
    value = os.environ.get("REACTGRAPH_TOOL_CHOICE", "").strip().lower() or "auto"
    if value not in TOOL_CHOICES:
        raise ModelConfigError(f"REACTGRAPH_TOOL_CHOICE must be one of {', '.join(TOOL_CHOICES)}, not {value!r}")
    return None if value == "unset" else value


class CompatibleChatOpenAI(ChatOpenAI):
    """ChatOpenAI whose requests every OpenAI-compatible server accepts (see the module's docstring)."""

    default_tool_choice: str | None = "auto"

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        if tool_choice is None and tools:
            tool_choice = self.default_tool_choice
        return super().bind_tools(tools, tool_choice=tool_choice, **kwargs)

    def with_structured_output(self, schema: Any = None, *, include_raw: bool = False, **kwargs: Any) -> Any:
        if kwargs.get("method") is not None:  # a caller that chose a strategy gets exactly that one
            return super().with_structured_output(schema, include_raw=include_raw, **kwargs)
        return structured_output(self, schema, include_raw=include_raw,
                                 build=lambda method: super(CompatibleChatOpenAI, self).with_structured_output(
                                     schema, include_raw=True, method=cast(Any, method), **kwargs))

    def _get_request_payload(self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any) -> dict[str, Any]:
        payload = super()._get_request_payload(input_, stop=stop, **kwargs)
        for message in payload.get("messages") or []:
            if message.get("role") == "assistant" and message.get("content") is None:
                message["content"] = ""
        if self.openai_api_base and "max_completion_tokens" in payload:
            payload["max_tokens"] = payload.pop("max_completion_tokens")
        return payload


def _mark_bad_request(response: httpx.Response) -> httpx.Response:
    if response.status_code == 500 and says_request_is_bad(response.content.decode(errors="replace")[:4000]):
        response.headers["x-should-retry"] = "false"
    return response


class _SyncTransport(httpx.BaseTransport):
    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = self.inner.handle_request(request)
        except httpx.TimeoutException as exc:  # an OpenAIError: the SDK raises it as it is, without a retry
            raise APITimeoutError(request=request) from exc  # type: ignore[arg-type]
        if response.status_code == 500:
            response.read()
        return _mark_bad_request(response)

    def close(self) -> None:
        self.inner.close()


class _AsyncTransport(httpx.AsyncBaseTransport):
    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = await self.inner.handle_async_request(request)
        except httpx.TimeoutException as exc:
            raise APITimeoutError(request=request) from exc  # type: ignore[arg-type]
        if response.status_code == 500:
            await response.aread()
        return _mark_bad_request(response)

    async def aclose(self) -> None:
        await self.inner.aclose()


def provider_clients() -> dict[str, Any]:
    """The `http_client` / `http_async_client` options of a `CompatibleChatOpenAI` (see the module's docstring)."""
    return {"http_client": httpx.Client(transport=_SyncTransport()),
            "http_async_client": httpx.AsyncClient(transport=_AsyncTransport())}
