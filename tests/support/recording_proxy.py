"""A loopback proxy in front of an OpenAI-compatible server (the real-model tier's llama-server) that keeps every
chat-completion exchange: to count a run's requests, and to record them as cassettes.

    with RecordingProxy("http://127.0.0.1:8080") as proxy:   # OPENAI_BASE_URL=proxy.openai_url
        ...
        proxy.exchanges[-1].reply  # the completion as one message: content, tool calls, finish reason, usage

Responses pass through as they arrive (a stream stays a stream, so client timeouts behave as they would against
the server itself). What the server said is model output: it is parsed, never trusted.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

UPSTREAM_TIMEOUT = httpx.Timeout(connect=5, read=600, write=30, pool=30)
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}


@dataclass
class Exchange:
    """One chat-completion request and what came back."""

    request: dict[str, Any]
    status: int = 0
    body: str = ""  # the JSON answer, or the stream's `data:` lines as sent
    seconds: float = 0.0
    complete: bool = False  # False: the client hung up first (its timeout)

    @property
    def reply(self) -> dict[str, Any]:
        """The completion as one message: {content, tool_calls: [(name, arguments as sent)], finish_reason, usage}."""
        if self.status != 200:
            return {"status": self.status, "error": _error_message(self.body)}
        if self.request.get("stream"):
            return _from_stream(self.body)
        return _from_message(json.loads(self.body))


def _error_message(body: str) -> str:
    try:
        error = json.loads(body).get("error")
        return str(error.get("message") if isinstance(error, dict) else error)[:2000]
    except (ValueError, AttributeError):
        return body[:2000]


def _from_message(payload: dict[str, Any]) -> dict[str, Any]:
    choice = (payload.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    calls = [(c.get("function", {}).get("name", ""), c.get("function", {}).get("arguments", ""))
             for c in message.get("tool_calls") or []]
    return {"content": message.get("content"), "tool_calls": calls, "finish_reason": choice.get("finish_reason"),
            "usage": payload.get("usage")}


def _from_stream(body: str) -> dict[str, Any]:
    """Deltas joined: the content, each tool call's name and argument pieces, the last finish reason and usage."""
    content: list[str] = []
    calls: dict[int, list[str]] = {}
    reply: dict[str, Any] = {"finish_reason": None, "usage": None}
    for line in body.splitlines():
        data = line.removeprefix("data:").strip()
        if not line.startswith("data:") or data == "[DONE]":
            continue
        event = json.loads(data)
        reply["usage"] = event.get("usage") or reply["usage"]
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or {}
            content.append(delta.get("content") or "")
            for call in delta.get("tool_calls") or []:
                name_and_args = calls.setdefault(call.get("index", 0), ["", ""])
                function = call.get("function") or {}
                name_and_args[0] += function.get("name") or ""
                name_and_args[1] += function.get("arguments") or ""
            reply["finish_reason"] = choice.get("finish_reason") or reply["finish_reason"]
    return {"content": "".join(content) if content else None, "tool_calls": [tuple(calls[k]) for k in sorted(calls)],
            **reply}


class RecordingProxy:
    """`with RecordingProxy(upstream) as proxy:` — forwards everything to `upstream`, keeps chat completions."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._client = httpx.Client(base_url=self.upstream, timeout=UPSTREAM_TIMEOUT)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    @property
    def openai_url(self) -> str:
        """What OPENAI_BASE_URL holds."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def mark(self) -> int:
        """Where the next exchange will be kept: `proxy.since(mark)` is what came after."""
        with self._lock:
            return len(self.exchanges)

    def since(self, mark: int) -> list[Exchange]:
        with self._lock:
            return list(self.exchanges[mark:])

    def keep(self, exchange: Exchange) -> None:
        with self._lock:
            self.exchanges.append(exchange)

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._client.close()


def _handler_for(proxy: RecordingProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._forward(b"")

        def do_POST(self) -> None:
            self._forward(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

        def _forward(self, raw: bytes) -> None:
            exchange = None
            if self.path.split("?")[0].rstrip("/").endswith("/chat/completions"):
                exchange = Exchange(request=json.loads(raw or b"{}"))
                proxy.keep(exchange)
            started = time.monotonic()
            # uncompressed: what is kept is the text the model wrote
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in HOP_BY_HOP | {"host", "accept-encoding"}}
            pieces: list[bytes] = []
            # the client gave up (its timeout): the upstream answer is dropped, the exchange stays incomplete
            with contextlib.suppress(BrokenPipeError, ConnectionResetError), proxy._client.stream(
                    self.command, self.path, content=raw or None, headers=headers) as upstream:
                self.send_response(upstream.status_code)
                for key, value in upstream.headers.items():
                    if key.lower() not in HOP_BY_HOP:
                        self.send_header(key, value)
                self.end_headers()  # HTTP/1.0: the end of the answer is the end of the connection
                if exchange is not None:
                    exchange.status = upstream.status_code
                for chunk in upstream.iter_raw():
                    pieces.append(chunk)
                    self.wfile.write(chunk)
                    self.wfile.flush()
                if exchange is not None:
                    exchange.complete = True
            if exchange is not None:
                exchange.body = b"".join(pieces).decode(errors="replace")
                exchange.seconds = time.monotonic() - started

    return Handler



def truncated(exchanges: list[Exchange]) -> list[str]:
    """The content of each answering reply (not a structured one: a check or a plan may repeat the answer) the
    server cut at its token limit."""
    return [e.reply.get("content") or "" for e in exchanges
            if e.complete and e.status == 200 and e.reply.get("finish_reason") == "length"
            and not e.request.get("response_format") and e.request.get("tool_choice") in (None, "auto")]
