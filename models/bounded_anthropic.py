"""langchain-anthropic's `ChatAnthropic` on the bounded transports (models/bounded_transport.py): a timeout is
not retried by the Anthropic SDK (the node's retry policy sends it once more at temperature 0), and a 500 whose
body says the request is bad is not sent again. ChatAnthropic builds its SDK clients itself and takes no HTTP
client, so this subclass builds them the same way with the transports in place."""

from __future__ import annotations

import importlib
from functools import cached_property
from typing import Any, ClassVar

import anthropic
from langchain_anthropic import ChatAnthropic

from reactgraph.errors import ReactGraphError
from reactgraph.models.bounded_transport import bounded_clients


class ProviderTimeoutError(ReactGraphError, anthropic.AnthropicError, TimeoutError):
    """No reply within the request's timeout. An AnthropicError, so the SDK passes it through as it is (it wraps
    other exceptions of its transport as connection errors, and retries those), but not its APITimeoutError, an
    APIConnectionError, which it retries wherever it is raised."""

    def __init__(self, request: Any) -> None:
        super().__init__("Request timed out.")
        self.request = request  # what the loader reads the endpoint from (models/loader.py describe_model_error)


def _http_package() -> Any:
    """The HTTP package this anthropic SDK is built on (2.x: httpx2; before: httpx)."""
    try:
        return importlib.import_module("httpx2")
    except ImportError:
        return importlib.import_module("httpx")


class BoundedChatAnthropic(ChatAnthropic):
    """`ChatAnthropic` whose SDK clients send through the bounded transports."""

    timeouts_final: ClassVar[bool] = True  # its SDK does not retry a timeout (the loader's error line says so)

    @cached_property
    def _http_clients(self) -> tuple[Any, Any]:
        params = self._client_params
        options: dict[str, Any] = {"base_url": params["base_url"]}
        if "timeout" in params:
            options["timeout"] = params["timeout"]
        return bounded_clients(_http_package(), ProviderTimeoutError, **options)

    @cached_property
    def _client(self) -> anthropic.Client:
        return anthropic.Client(**self._client_params, http_client=self._http_clients[0])

    @cached_property
    def _async_client(self) -> anthropic.AsyncClient:
        return anthropic.AsyncClient(**self._client_params, http_client=self._http_clients[1])
