"""One local model provider for tests, speaking both OpenAI's and Anthropic's shapes: scripted replies, every
request recorded.

Stdlib only (http.server on a thread), so the real langchain-openai and langchain-anthropic clients (and the SDKs
under them) can be exercised end to end without a network:

- OpenAI at `server.openai_url` (`…/v1`): `POST /v1/chat/completions`, plain or streamed (SSE), and
  `/v1/embeddings` (outside the script; each request kept in `embedding_requests`). See provider_openai.py.
- Anthropic at `server.anthropic_url` (the SDK appends `/v1/messages`): `POST /v1/messages`, plain or streamed.
  Like the real API it refuses malformed requests with a 400 before any scripted reply is used, and records why
  in `server.rejections`. See provider_anthropic.py.

The script is one queue whichever shape asks: text, tool calls (several in one reply, or with malformed
arguments), structured output, stop words, errors in the provider's JSON shape with retry hints, delays, an empty
stream. A reply may also be a callable of the request body. When the script runs out, `then` answers (a callable of
the request body: a cassette's replay, support/cassettes.py), else every call gets a 500. The OpenAI shape honours
`max_tokens` (a word a token: longer content is cut, finish_reason "length") and sends the usage (in a last chunk
when the stream asks for it).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from support import provider_anthropic, provider_openai


@dataclass
class Reply:
    """One scripted response: a message (text and/or tool calls, or structured output) or an HTTP error."""

    content: str | None = None
    # (name, arguments): a dict, or (OpenAI shape only) a string sent verbatim, e.g. malformed JSON
    tool_calls: list[tuple[str, dict[str, Any] | str]] = field(default_factory=list)
    structured: dict[str, Any] | None = None  # the object a structured-output request asked for
    status: int = 200
    error: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    ignore_stop: bool = False  # some servers do not honour stop words; the client must cope
    empty: bool = False  # no choices: a streamed reply that closes with no data (llama.cpp under load), or none at all
    cut_off: bool = False  # stopped at the output-token limit (OpenAI: finish_reason "length"; Anthropic: "max_tokens")
    usage: dict[str, int] | None = None  # as a recorded server reported it (support/cassettes.py); unset: counted
    refusal: str | None = None  # OpenAI only: the model declined (`message.refusal`, content null)
    no_message: bool = False  # OpenAI only, unstreamed: a choice that holds no message at all


def text(content: str, *, ignore_stop: bool = False) -> Reply:
    return Reply(content=content, ignore_stop=ignore_stop)


def cut_off(content: str) -> Reply:
    """Text that stopped at the output-token limit, as the provider reports it."""
    return Reply(content=content, cut_off=True)


def calls(*named: tuple[str, dict[str, Any] | str], content: str = "") -> Reply:
    """Tool calls, in order (after the text when `content` is given)."""
    return Reply(content=content or None,
                 tool_calls=[(name, args if isinstance(args, str) else dict(args)) for name, args in named])


def structured(value: dict[str, Any]) -> Reply:
    """The answer to a structured-output request: OpenAI's as the message's JSON content (`response_format`),
    Anthropic's as a `tool_use` of the tool the request's `tool_choice` forces."""
    return Reply(structured=value)


def error(status: int, message: str = "scripted failure", retry_after_ms: int = 10) -> Reply:
    # A short retry hint keeps the client's backoff (and so the tests) fast.
    return Reply(status=status, error=message, headers={"retry-after-ms": str(retry_after_ms)})


def empty_stream() -> Reply:
    """A stream that ends at once: `data: [DONE]` and nothing before it."""
    return Reply(empty=True)


def slow(seconds: float, reply: Reply | None = None) -> Reply:
    reply = reply or text("late")
    reply.delay_s = seconds
    return reply


def verdict(enough: bool = False, *, note: str = "", tool_error: bool = False) -> Reply:
    """A reflection verdict (reactgraph's ReflectionVerdict) as structured output."""
    return structured({"enough_information": enough, "tool_error": tool_error, "need_other_tool": False,
                       "repeated_call": False, "note": note})


def closing_check(parts: list[str], missing: list[str] | None = None) -> Reply:
    """A closing self-check (reactgraph's ClosingCheck) as structured output."""
    return structured({"parts": parts, "missing": list(missing or [])})


Responder = Callable[[dict[str, Any]], Reply]


class ProviderServer:
    """`with ProviderServer(reply, ...) as server:` — serves the replies in order, to either shape."""

    def __init__(self, *replies: Reply | Responder, then: Responder | None = None) -> None:
        self.script: deque[Reply | Responder] = deque(replies)
        self.then = then
        self.requests: list[dict[str, Any]] = []  # chat bodies (both shapes, refused ones too), in order
        self.headers: list[dict[str, str]] = []  # their headers, lower-cased names
        self.rejections: list[str] = []  # Anthropic requests the real API would refuse: why (its message)
        self.embedding_requests: list[dict[str, Any]] = []  # `/embeddings` bodies; they take no scripted reply
        # The usage reported for each OpenAI completion (a streamed one only with `stream_options.include_usage`).
        self.usage_sent: list[dict[str, int]] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def openai_url(self) -> str:
        """What OPENAI_BASE_URL holds."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        """What ANTHROPIC_BASE_URL holds: the SDK appends /v1/messages itself."""
        return f"http://127.0.0.1:{self.port}"

    def add(self, *replies: Reply | Responder) -> None:
        with self._lock:
            self.script.extend(replies)

    def __enter__(self) -> ProviderServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def next_reply(self, body: dict[str, Any], headers: dict[str, str], refusal: Reply | None = None) -> Reply:
        """Log the request; answer with `refusal` when given (script untouched), else the next scripted reply."""
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            if refusal is not None:
                return refusal
            item = (self.script.popleft() if self.script else self.then if self.then
                    else error(500, "script exhausted", 0))
        return item(body) if callable(item) else item

    # --- reading what the client sent ---------------------------------------------------------------------

    def roles(self, i: int) -> list[str]:
        return [m["role"] for m in self.requests[i]["messages"]]

    def tool_names(self, i: int = 0) -> list[str]:
        """The tools request i offered (OpenAI's `function` objects or Anthropic's tools)."""
        return [t["function"]["name"] if "function" in t else t["name"] for t in self.requests[i].get("tools") or []]

    def api_keys(self) -> list[str]:
        """The API key each request carried (`x-api-key`, or `Authorization: Bearer`)."""
        return [provider_anthropic.api_key(h) for h in self.headers]

    def blocks(self, i: int, kind: str) -> list[dict[str, Any]]:
        """Every Anthropic content block of one type (text, tool_use, tool_result) in request i, in order."""
        return [b for m in self.requests[i]["messages"] if isinstance(m["content"], list)
                for b in m["content"] if b.get("type") == kind]


def _handler_for(server: ProviderServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload, ensure_ascii=False).encode()
            self.send_response(status)
            for key, value in {"Content-Type": "application/json", "Content-Length": str(len(data)),
                               **(headers or {})}.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def send_events(self, events: list[str], headers: dict[str, str] | None = None) -> None:
            self.send_response(200)
            for key, value in {"Content-Type": "text/event-stream", **(headers or {})}.items():
                self.send_header(key, value)
            self.end_headers()
            for event in events:
                self.wfile.write(event.encode())
                self.wfile.flush()

        def do_POST(self) -> None:
            # the client gave up (a timeout test): nothing left to answer
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._serve()

        def _serve(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            headers = {k.lower(): v for k, v in self.headers.items()}
            path = self.path.split("?")[0].rstrip("/")
            if path.endswith("/embeddings"):
                server.embedding_requests.append(body)
                self.send_json(200, provider_openai.embeddings(body))
                return
            shape: Any = (provider_openai if path.endswith("/chat/completions")
                          else provider_anthropic if path == "/v1/messages" else None)
            if shape is None:
                self.send_json(404, {"type": "error", "error": {"type": "not_found_error",
                                                                "message": f"no route {self.path}"}})
                return
            problem = shape.invalid(body, headers)
            if problem:
                server.rejections.append(problem)
            reply = server.next_reply(body, headers, shape.refusal(problem) if problem else None)
            if reply.delay_s:
                time.sleep(reply.delay_s)
            shape.answer(self, server, body, reply)

    return Handler


def point_at(monkeypatch: Any, server: ProviderServer, provider: str = "openai", *, retries: int = 0,
             node_retries: int = 0) -> None:
    """Point `provider`'s models at `server` (a test key, no settings of the caller's environment left over), with
    `retries` client retries and `node_retries` graph retries: a failing test fails fast."""
    import os

    prefix = provider.upper()
    for name in [n for n in os.environ if n.startswith(("REACTGRAPH_", f"{prefix}_"))
                 and n not in ("REACTGRAPH_HOME", "REACTGRAPH_STRATEGY_FILE")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv(f"{prefix}_BASE_URL", server.openai_url if provider == "openai" else server.anthropic_url)
    monkeypatch.setenv(f"{prefix}_API_KEY", "sk-test")
    monkeypatch.setenv("REACTGRAPH_MODEL_RETRIES", str(retries))
    monkeypatch.setenv("REACTGRAPH_NODE_RETRIES", str(node_retries))
