"""The HTTP edge of `reactgraph serve`: what a request must be before the API sees it, and what an exception no
handler answered becomes.

A request must name a host this server answers to, carry a JSON body (or none) of bounded size that arrives in
bounded time, and — from a browser — come from an origin the operator allowed (CORS is off unless `http.cors`
turns it on). That closes what a web page could do to a server on the user's machine: cross-site POSTs creating
runs, DNS rebinding, GETs with side effects. The checks are pure ASGI middleware, so an oversized body is never
read whole, and uvicorn's protocol gets a deadline for a request's head (a slowloris client gets a 408). The
outermost layer turns any unanswered exception into a 500 whose request id its log record carries too.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reactgraph.errors import ReactGraphError
from reactgraph.service.server_config import BadServerConfig, LanggraphConfig
from reactgraph.service.wire import MAX_BODY_BYTES

HEADER_TIMEOUT_S = 10.0  # a request's line and headers must arrive within this (slowloris)
BODY_TIMEOUT_S = 30.0  # and its body within this once the headers are in
MAX_STREAMS = 100  # open SSE streams, joins and waits per API process (each holds a Redis connection)
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
_CORS_KEYS = {"allow_origins": list, "allow_methods": list, "allow_headers": list, "allow_credentials": bool,
              "allow_origin_regex": str, "expose_headers": list, "max_age": int}


@dataclass(frozen=True)
class HttpSettings:
    """The operator's HTTP limits (README "Security model" lists each with its flag and default)."""

    allowed_hosts: tuple[str, ...] = ()  # Host header values: "name" (any port) or "name:port"; "*" = any
    cors: dict[str, Any] | None = None  # CORSMiddleware's keyword arguments; None: CORS off
    max_body_bytes: int = MAX_BODY_BYTES
    header_timeout_s: float = HEADER_TIMEOUT_S
    body_timeout_s: float = BODY_TIMEOUT_S
    max_streams: int = MAX_STREAMS
    origins: tuple[str, ...] = field(default=(), repr=False)  # derived: the CORS origins, for the Origin check

    def host_allowed(self, host: str) -> bool:
        host = host.strip().lower()
        if "*" in self.allowed_hosts:
            return True
        name = _host_name(host)
        return any(host == allowed or (":" not in _port_part(allowed) and name == allowed)
                   for allowed in self.allowed_hosts)

    def origin_allowed(self, origin: str) -> bool:
        """An `Origin` the operator's CORS configuration lets in (CORS off: none)."""
        if self.cors is None:
            return False
        allowed = self.cors.get("allow_origins") or []
        if "*" in allowed or origin in allowed:
            return True
        pattern = self.cors.get("allow_origin_regex")
        return bool(pattern and re.fullmatch(pattern, origin))


def http_settings(config: LanggraphConfig, *, host: str, allowed_hosts: Sequence[str] = (),
                  max_body_bytes: int = MAX_BODY_BYTES, header_timeout_s: float = HEADER_TIMEOUT_S,
                  body_timeout_s: float = BODY_TIMEOUT_S, max_streams: int = MAX_STREAMS) -> HttpSettings:
    """The settings from the serve flags and langgraph.json's `http` section (`cors`, and our `allowed_hosts`)."""
    section = config.section("http")
    where = f"{config.path}: http" if config.path else "http"
    extra = section.get("allowed_hosts", [])
    if not isinstance(extra, list) or not all(isinstance(h, str) and h.strip() for h in extra):
        raise BadServerConfig(f"{where}.allowed_hosts must be a list of host names")
    names = [*_default_hosts(host), *_split(allowed_hosts), *(h.strip().lower() for h in extra)]
    cors = _cors(section.get("cors"), where)
    if not 1024 <= max_body_bytes <= MAX_BODY_BYTES:
        raise BadServerConfig(f"--max-body-bytes must be from 1024 to {MAX_BODY_BYTES}, not {max_body_bytes}")
    return HttpSettings(tuple(dict.fromkeys(names)), cors, max_body_bytes, header_timeout_s, body_timeout_s,
                        max_streams, tuple((cors or {}).get("allow_origins") or ()))


def _default_hosts(host: str) -> list[str]:
    """The bind address and the loopback names, at any port: the port is no defence against DNS rebinding (the
    attacker's page names the server's port too), and an SSH tunnel or a container's mapped port changes it."""
    bound = f"[{host}]" if _is_ipv6(host) else host.lower()
    return [*([] if host in ("0.0.0.0", "::") else [bound]), *LOOPBACK_NAMES]  # a wildcard is no name to address


def _split(values: Iterable[str]) -> list[str]:
    return [part.strip().lower() for value in values for part in value.split(",") if part.strip()]


def _cors(value: Any, where: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BadServerConfig(f"{where}.cors must be an object")
    unknown = set(value) - set(_CORS_KEYS)
    if unknown:
        raise BadServerConfig(f"{where}.cors: unknown key(s) {', '.join(sorted(unknown))}; "
                              f"known: {', '.join(_CORS_KEYS)}")
    for key, kind in _CORS_KEYS.items():
        if key in value and (not isinstance(value[key], kind) or isinstance(value[key], bool) is not (kind is bool)):
            raise BadServerConfig(f"{where}.cors.{key} must be a {kind.__name__}")
        if kind is list and key in value and not all(isinstance(v, str) for v in value[key]):
            raise BadServerConfig(f"{where}.cors.{key} must be a list of strings")
    if "allow_origin_regex" in value:
        try:
            re.compile(value["allow_origin_regex"])
        except re.error as exc:
            raise BadServerConfig(f"{where}.cors.allow_origin_regex: {exc}") from None
    return dict(value)


def _is_ipv6(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).version == 6
    except ValueError:
        return False


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _port_part(host: str) -> str:
    return host[len(_host_name(host)):]


def http_middleware(settings: HttpSettings) -> list[Middleware]:
    """Outermost first: the Host check, CORS (so a browser can read the refusals below), the request checks."""
    middleware = [Middleware(HostCheck, settings=settings)]
    if settings.cors is not None:
        middleware.append(Middleware(CORSMiddleware, **settings.cors))
    middleware.append(Middleware(RequestCheck, settings=settings))
    return middleware


async def refuse(send: Send, status: int, message: str, *, close: bool = False,
                 headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    """Answer `{"detail": message}` (the Agent Server's error shape); `close` when the body was not read."""
    body = json.dumps({"detail": message}).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]
    if close:
        head.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


class HostCheck:
    """421 for a Host header this server does not answer to (DNS rebinding: the page's name, our address)."""

    def __init__(self, app: ASGIApp, settings: HttpSettings) -> None:
        self.app, self.settings = app, settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = _header(scope, b"host") or ""
            if not self.settings.host_allowed(host):
                await refuse(send, 421, f"this server does not answer to host {host[:100]!r}; the operator may "
                                        "add it with --allowed-hosts", close=True)
                return
        await self.app(scope, receive, send)


class RequestCheck:
    """The request's origin (a browser's cross-site request), Content-Type, and body size and read time.

    The body is read here, within `max_body_bytes` and `body_timeout_s`, and handed on whole: Starlette would
    read it whole anyway, and this way an oversized or slow one is refused before any handler runs."""

    def __init__(self, app: ASGIApp, settings: HttpSettings) -> None:
        self.app, self.settings = app, settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await refuse(send, *refusal, close=True)
            return
        try:
            body = await asyncio.wait_for(self._read(receive), self.settings.body_timeout_s)
        except _TooLarge as exc:
            await refuse(send, 413, str(exc), close=True)
            return
        except TimeoutError:
            await refuse(send, 408, f"the request body did not arrive within {self.settings.body_timeout_s:g} s",
                         close=True)
            return
        if body is None:  # the client went away
            return
        await self.app(scope, _replay(body, receive), send)

    def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        method = scope["method"]
        origin = _header(scope, b"origin")
        if method != "OPTIONS":  # a preflight is CORS's to answer
            if origin is not None and not self._same_origin(scope, origin) and not self.settings.origin_allowed(origin):
                return 403, (f"cross-origin request from {origin[:100]!r} refused; the operator may allow that "
                             "origin with http.cors in langgraph.json")
            if origin is None and _header(scope, b"sec-fetch-site") in ("cross-site", "same-site"):
                # a browser's request from another site with no Origin to check: an <img>, a link
                return 403, "cross-site request refused (it carries no Origin to check)"
        length = _header(scope, b"content-length")
        if length is not None:
            if not (length.strip().isascii() and length.strip().isdigit()):  # "¹" is a digit to isdigit()
                return 400, f"Content-Length {length[:40]!r} is not a number"
            if int(length) > self.settings.max_body_bytes:
                return 413, (f"request body of {int(length)} bytes is over the limit of "
                             f"{self.settings.max_body_bytes} bytes")
        chunked = "chunked" in (_header(scope, b"transfer-encoding") or "").lower()
        kind = _header(scope, b"content-type")
        if (chunked or (length is not None and int(length) > 0)) and not _is_json(kind):
            # text/plain and forms are what a page may POST cross-site without a preflight
            return 415, (f"request body must be application/json, not {kind[:100]!r}" if kind
                         else "request body must be application/json (no Content-Type was sent)")
        return None

    def _same_origin(self, scope: Scope, origin: str) -> bool:
        host = (_header(scope, b"host") or "").lower()
        return origin.lower() in (f"http://{host}", f"https://{host}")

    async def _read(self, receive: Receive) -> bytes | None:
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.settings.max_body_bytes:  # a chunked body: stop reading at the limit
                raise _TooLarge(f"request body is over the limit of {self.settings.max_body_bytes} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


class _TooLarge(ReactGraphError):
    pass


def _is_json(kind: str | None) -> bool:
    """application/json, with parameters (`; charset=utf-8`) or not."""
    return kind is not None and kind.split(";", 1)[0].strip().lower() == "application/json"


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body read above as one message, then the client's own messages (its disconnect, for streams)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


_TIMED_OUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
              b"connection: close\r\n\r\n%s")


def _base() -> type:
    try:  # what uvicorn's "auto" picks when httptools is installed (uvicorn[standard])
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
        return HttpToolsProtocol
    except ImportError:
        from uvicorn.protocols.http.h11_impl import H11Protocol
        return H11Protocol


def header_deadline_protocol(header_timeout_s: float) -> type:
    """A uvicorn `http=` protocol class closing a connection whose request head takes over `header_timeout_s`."""
    base: Any = _base()

    class HeaderDeadlineProtocol(base):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._deadline is None and self._between_requests():
                self._arm()  # a further request's first bytes on a kept-alive connection
            super().data_received(data)
            if not self._between_requests():
                self._disarm()  # its head is in: the body's time is the app's to bound

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _between_requests(self) -> bool:
            cycle = getattr(self, "cycle", None)
            return cycle is None or cycle.response_complete

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(header_timeout_s, self._timed_out)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _timed_out(self) -> None:
            self._deadline = None
            if self.transport.is_closing() or not self._between_requests():
                return
            body = (b'{"detail":"the request line and headers did not arrive within %g s"}' % header_timeout_s)
            self.transport.write(_TIMED_OUT % (len(body), body))
            self.transport.close()

    return HeaderDeadlineProtocol


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
