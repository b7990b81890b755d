"""The last line of defence of `reactgraph serve`: an exception no handler turned into an answer is a 500 in the
Agent Server's error shape, `{"detail": …, "request_id": …}`, and one log record that carries the same request
id (with the traceback), so a client's report finds the server's record and no traceback is ever anonymous.

Pure ASGI middleware, outermost of the app's own: it also covers the auth and HTTP checks. A failure after the
answer has started (a stream) can only be logged: the client sees the connection end.
"""

from __future__ import annotations

import json
import logging
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reactgraph.errors import ReactGraphError

log = logging.getLogger("reactgraph.service.requests")


class ServerFault(ReactGraphError, RuntimeError):
    """A failure on the server's side (the operator's auth handler, say) whose one line the 500 shows: raised
    `from` the exception, so the log has its traceback under the request id."""


class InternalErrors:
    """A 500 with a request id (and `x-request-id`) for any exception that reaches it; logged under that id."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:  # the point: whatever was not answered is answered here
            request_id = uuid.uuid4().hex
            cause = (str(exc).splitlines() or [""])[0][:200]
            log.error("request id %s: %s %s failed: %s: %s", request_id, scope.get("method"), scope.get("path"),
                      type(exc).__name__, cause, exc_info=exc, extra={"request_id": request_id})
            if not started:
                shown = str(exc) if isinstance(exc, ServerFault) else f"internal error ({type(exc).__name__})"
                await _answer(send, request_id, f"{shown}; the server's log has it under request id {request_id}")


async def _answer(send: Send, request_id: str, detail: str) -> None:
    body = json.dumps({"detail": detail, "request_id": request_id}).encode()
    await send({"type": "http.response.start", "status": 500,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"x-request-id", request_id.encode())]})
    await send({"type": "http.response.body", "body": body})
