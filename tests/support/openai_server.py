"""A local OpenAI-compatible chat-completions server for tests: scripted replies, every request recorded.

Stdlib only (http.server on a thread), so the real langchain-openai client can be exercised end to end
without a network: plain and streamed (SSE) completions, tool calls (parallel, or with malformed
arguments), structured output (`response_format` json_schema), stop words, errors with retry hints, delays.
It also serves `/embeddings` (see `embedding`), outside the script, each request kept in `embedding_requests`.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import math
import re
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from support.scripted_http import ScriptedServer


@dataclass
class Reply:
    """One scripted response: a completion (text and/or tool calls) or an HTTP error."""

    content: str | None = None
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (name, raw JSON arguments)
    status: int = 200
    error: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    ignore_stop: bool = False  # some servers do not honour `stop`; the client must cope


def text(content: str, *, ignore_stop: bool = False) -> Reply:
    return Reply(content=content, ignore_stop=ignore_stop)


def calls(*named: tuple[str, dict[str, Any] | str], content: str = "") -> Reply:
    """Tool calls; arguments given as a string are sent verbatim (e.g. malformed JSON)."""
    return Reply(content=content or None, tool_calls=[
        (name, args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)) for name, args in named])


def structured(value: dict[str, Any]) -> Reply:
    """The answer to a `response_format: json_schema` request: the object as the message content."""
    return Reply(content=json.dumps(value, ensure_ascii=False))


def error(status: int, message: str = "scripted failure", retry_after_ms: int = 10) -> Reply:
    # A short retry hint keeps the client's backoff (and so the tests) fast.
    return Reply(status=status, error=message, headers={"retry-after-ms": str(retry_after_ms)})


def slow(seconds: float, reply: Reply | None = None) -> Reply:
    reply = reply or text("late")
    reply.delay_s = seconds
    return reply


def verdict(enough: bool = False, *, note: str = "", tool_error: bool = False) -> Reply:
    """A reflection verdict (nodes.reflection.ReflectionVerdict) as structured output."""
    return structured({"enough_information": enough, "tool_error": tool_error, "need_other_tool": False,
                       "repeated_call": False, "note": note})


Responder = Callable[[dict[str, Any]], Reply]


class OpenAIServer(ScriptedServer):
    """`with OpenAIServer(reply, ...) as server:` — serves the replies in order at `server.base_url`."""

    def __init__(self, *replies: Reply | Responder) -> None:
        super().__init__(replies, _handler_for(self), lambda: error(500, "script exhausted", 0))
        self.embedding_requests: list[dict[str, Any]] = []  # `/embeddings` bodies; they take no scripted reply
        # The usage reported for each completion (a streamed one only when `stream_options.include_usage`).
        self.usage_sent: list[dict[str, int]] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def next_reply(self, body: dict[str, Any], headers: dict[str, str]) -> Reply:
        return self.record(body, headers)

    # --- reading what the client sent ---------------------------------------------------------------------

    def tool_names(self, i: int = 0) -> list[str]:
        return [t["function"]["name"] for t in self.requests[i].get("tools") or []]



EMBEDDING_DIM = 64


def embedding(text: str, dim: int = EMBEDDING_DIM) -> list[float]:
    """The server's embedding of `text`: a unit bag of words, each word at a sha256-chosen signed coordinate,
    so texts that share words are close (enough for retrieval tests) and the same text always has one vector."""
    vector = [0.0] * dim
    for word in re.findall(r"\w+", text.casefold()):
        digest = hashlib.sha256(word.encode()).digest()
        vector[int.from_bytes(digest[:4], "big") % dim] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def _embeddings(body: dict[str, Any]) -> dict[str, Any]:
    """The `/embeddings` answer; a token-array input (what tiktoken-based clients send) is embedded as its text."""
    inputs = body.get("input")
    inputs = [inputs] if isinstance(inputs, str) or (inputs and isinstance(inputs[0], int)) else list(inputs or [])
    rows = []
    for i, item in enumerate(inputs):
        vector = embedding(item if isinstance(item, str) else " ".join(map(str, item)))
        # the openai client asks for base64 (little-endian float32) unless told otherwise
        encoded: Any = (base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
                        if body.get("encoding_format") == "base64" else vector)
        rows.append({"object": "embedding", "index": i, "embedding": encoded})
    tokens = sum(len(str(item)) // 4 + 1 for item in inputs)
    return {"object": "list", "data": rows, "model": body.get("model", "?"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def _cut_at_stop(content: str, stop: Any) -> str:
    words = [stop] if isinstance(stop, str) else list(stop or [])
    cuts = [content.index(w) for w in words if w and w in content]
    return content[:min(cuts)] if cuts else content


def _usage(body: dict[str, Any], reply: Reply) -> dict[str, int]:
    prompt = len(json.dumps(body.get("messages", []), ensure_ascii=False)) // 4 + 1
    completion = len(reply.content or "") // 4 + sum(len(a) for _, a in reply.tool_calls) // 4 + 1
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _message(reply: Reply, n: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = [{"id": f"call_{n}_{k}", "type": "function",
                                  "function": {"name": name, "arguments": args}}
                                 for k, (name, args) in enumerate(reply.tool_calls)]
    return message


def _chunks(reply: Reply, n: int) -> list[dict[str, Any]]:
    """Streamed deltas: the role, the content word by word, each tool call's name then its arguments in pieces."""
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"content": token} for token in re.findall(r"\s*\S+|\s+", reply.content or "")]
    for k, (name, args) in enumerate(reply.tool_calls):
        deltas.append({"tool_calls": [{"index": k, "id": f"call_{n}_{k}", "type": "function",
                                       "function": {"name": name, "arguments": ""}}]})
        half = len(args) // 2
        deltas += [{"tool_calls": [{"index": k, "function": {"arguments": piece}}]}
                   for piece in (args[:half], args[half:])]
    return [{"index": 0, "delta": d, "finish_reason": None} for d in deltas]


def _handler_for(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload, ensure_ascii=False).encode()
            self.send_response(status)
            for key, value in {"Content-Type": "application/json", "Content-Length": str(len(data)),
                               **(headers or {})}.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            # the client gave up (a timeout test): nothing left to answer
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._serve()

        def _serve(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if self.path.rstrip("/").endswith("/embeddings"):
                server.embedding_requests.append(body)
                self._send_json(200, _embeddings(body))
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            reply = server.next_reply(body, {k.lower(): v for k, v in self.headers.items()})
            if reply.delay_s:
                time.sleep(reply.delay_s)
            if reply.status != 200:
                self._send_json(reply.status, {"error": {"message": reply.error, "type": "scripted_error",
                                                         "code": reply.status}}, reply.headers)
                return
            if not reply.ignore_stop and reply.content is not None:
                reply = Reply(**{**reply.__dict__, "content": _cut_at_stop(reply.content, body.get("stop"))})
            n = len(server.requests)
            base = {"id": f"chatcmpl-{n}", "created": int(time.time()), "model": body.get("model", "?")}
            finish = "tool_calls" if reply.tool_calls else "stop"
            if not body.get("stream"):
                server.usage_sent.append(_usage(body, reply))
                self._send_json(200, {**base, "object": "chat.completion", "usage": _usage(body, reply),
                                      "choices": [{"index": 0, "message": _message(reply, n), "logprobs": None,
                                                   "finish_reason": finish}]})
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            events = [{**base, "object": "chat.completion.chunk", "choices": [c]} for c in _chunks(reply, n)]
            events.append({**base, "object": "chat.completion.chunk",
                           "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
            if (body.get("stream_options") or {}).get("include_usage"):
                server.usage_sent.append(_usage(body, reply))
                events.append({**base, "object": "chat.completion.chunk", "choices": [],
                               "usage": _usage(body, reply)})
            for event in events:
                self.wfile.write(f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")

    return Handler
