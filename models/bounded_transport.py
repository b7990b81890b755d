"""HTTP clients under a provider SDK (OpenAI's, Anthropic's: both Stainless clients) that make its retries
bounded: a timeout is final for the SDK — raised as the SDK's own timeout error, which it does not retry — so the
node's retry policy decides whether the request is worth one more wait (once, at temperature 0); and a 5xx whose
body says the request is bad is marked `x-should-retry: false`, so the SDK does not send it again.

The SDKs build on different HTTP packages (openai on `httpx`, anthropic 2.x on its fork `httpx2`, the same API),
so the transports are made for the package the SDK takes.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from reactgraph.models.loader import says_request_is_bad


def _mark_bad_request(response: Any) -> Any:
    if response.status_code == 500 and says_request_is_bad(response.content.decode(errors="replace")[:4000]):
        response.headers["x-should-retry"] = "false"
    return response


def bounded_clients(http: ModuleType, timeout_error: Callable[[Any], Exception], **options: Any) -> tuple[Any, Any]:
    """A (Client, AsyncClient) pair of the HTTP package `http` (httpx or httpx2) on the bounded transports;
    `timeout_error(request)` is the SDK's own timeout error; `options` go to both clients (timeout, base_url)."""

    class SyncTransport(http.BaseTransport):  # type: ignore[name-defined]
        def __init__(self) -> None:
            self.inner = http.HTTPTransport()

        def handle_request(self, request: Any) -> Any:
            try:
                response = self.inner.handle_request(request)
            except http.TimeoutException as exc:
                raise timeout_error(request) from exc
            if response.status_code == 500:
                response.read()
            return _mark_bad_request(response)

        def close(self) -> None:
            self.inner.close()

    class AsyncTransport(http.AsyncBaseTransport):  # type: ignore[name-defined]
        def __init__(self) -> None:
            self.inner = http.AsyncHTTPTransport()

        async def handle_async_request(self, request: Any) -> Any:
            try:
                response = await self.inner.handle_async_request(request)
            except http.TimeoutException as exc:
                raise timeout_error(request) from exc
            if response.status_code == 500:
                await response.aread()
            return _mark_bad_request(response)

        async def aclose(self) -> None:
            await self.inner.aclose()

    return http.Client(transport=SyncTransport(), **options), http.AsyncClient(transport=AsyncTransport(), **options)
