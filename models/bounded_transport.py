"""HTTP clients under a provider SDK (OpenAI's, Anthropic's: both Stainless clients) that make its retries
bounded: a timeout is final for the SDK — raised as the SDK's own timeout error, which it does not retry — so the
node's retry policy decides whether the request is worth one more wait (once, at temperature 0); and a 5xx whose
body says the request is bad is marked `x-should-retry: false`, so the SDK does not send it again.

The SDKs build on different HTTP packages (openai on `httpx`, anthropic 2.x on its fork `httpx2`, the same API),
so the transports are made for the package the SDK takes.

They are also where a comparison's replies are kept and played back (models/reply_tape.py): while a tape records,
each exchange of a run is read whole and stored; while one replays, no request leaves the process.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from reactgraph._tls import shared_ssl_context
from reactgraph.models import reply_tape
from reactgraph.models.loader import says_request_is_bad
from reactgraph.models.reply_tape import Stored


def _mark_bad_request(response: Any) -> Any:
    if response.status_code == 500 and says_request_is_bad(response.content.decode(errors="replace")[:4000]):
        response.headers["x-should-retry"] = "false"
    return response


def _stored(response: Any) -> Stored:
    """A response as the tape keeps it (read whole already)."""
    content = response.content
    if len(content) > reply_tape.MAX_BODY_BYTES:
        return Stored(response.status_code, too_large=True)
    return Stored(response.status_code, response.headers.get("content-type", ""), content.decode(errors="replace"))


def _played(http: ModuleType, request: Any, stored: Stored, timeout_error: Callable[[Any], Exception]) -> Any:
    """The stored response to `request`, as the server sent it (or its timeout, raised again)."""
    if stored.timeout:
        raise timeout_error(request)
    return http.Response(stored.status, headers={"content-type": stored.content_type},
                         content=stored.body.encode(), request=request)


def bounded_clients(http: ModuleType, timeout_error: Callable[[Any], Exception], **options: Any) -> tuple[Any, Any]:
    """A (Client, AsyncClient) pair of the HTTP package `http` (httpx or httpx2) on the bounded transports;
    `timeout_error(request)` is the SDK's own timeout error; `options` go to both clients (timeout, base_url)."""

    class SyncTransport(http.BaseTransport):  # type: ignore[name-defined]
        def __init__(self) -> None:
            self.inner = http.HTTPTransport(verify=shared_ssl_context(http))

        def handle_request(self, request: Any) -> Any:
            tape = reply_tape.active()
            if tape is not None and tape.replaying:
                return _mark_bad_request(_played(http, request, tape.answer(request.read()), timeout_error))
            try:
                response = self.inner.handle_request(request)
                if response.status_code == 500 or tape is not None:  # a body read whole is read under the timeout
                    response.read()
            except http.TimeoutException as exc:
                if tape is not None:
                    tape.keep(request.read(), Stored(timeout=True))
                raise timeout_error(request) from exc
            if tape is not None:
                tape.keep(request.read(), _stored(response))
            return _mark_bad_request(response)

        def close(self) -> None:
            self.inner.close()

    class AsyncTransport(http.AsyncBaseTransport):  # type: ignore[name-defined]
        def __init__(self) -> None:
            self.inner = http.AsyncHTTPTransport(verify=shared_ssl_context(http))

        async def handle_async_request(self, request: Any) -> Any:
            tape = reply_tape.active()
            if tape is not None and tape.replaying:
                return _mark_bad_request(_played(http, request, tape.answer(await request.aread()), timeout_error))
            try:
                response = await self.inner.handle_async_request(request)
                if response.status_code == 500 or tape is not None:  # a body read whole is read under the timeout
                    await response.aread()
            except http.TimeoutException as exc:
                if tape is not None:
                    tape.keep(await request.aread(), Stored(timeout=True))
                raise timeout_error(request) from exc
            if tape is not None:
                tape.keep(await request.aread(), _stored(response))
            return _mark_bad_request(response)

        async def aclose(self) -> None:
            await self.inner.aclose()

    return http.Client(transport=SyncTransport(), **options), http.AsyncClient(transport=AsyncTransport(), **options)
