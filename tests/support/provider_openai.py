"""The provider server's OpenAI shape: chat completions (plain, or streamed as SSE chunks), and embeddings.

A tool call's arguments given as a string are sent verbatim (e.g. malformed JSON); structured output is the
message's content (the answer to a `response_format: json_schema` request); `stop` words cut the content unless
the reply ignores them; errors come as `{"error": {...}}` with the reply's headers (its retry hint).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import struct
import time
from dataclasses import replace
from typing import Any

EMBEDDING_DIM = 64


def invalid(body: dict[str, Any], headers: dict[str, str]) -> str | None:
    """Nothing is refused in this shape."""
    return None


def refusal(problem: str) -> Any:
    raise AssertionError(f"the OpenAI shape refuses nothing ({problem})")


def embedding(text: str, dim: int = EMBEDDING_DIM) -> list[float]:
    """The server's embedding of `text`: a unit bag of words, each word at a sha256-chosen signed coordinate,
    so texts that share words are close (enough for retrieval tests) and the same text always has one vector."""
    vector = [0.0] * dim
    for word in re.findall(r"\w+", text.casefold()):
        digest = hashlib.sha256(word.encode()).digest()
        vector[int.from_bytes(digest[:4], "big") % dim] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def embeddings(body: dict[str, Any]) -> dict[str, Any]:
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


def _cut_at_limit(content: str | None, limit: Any) -> tuple[str | None, bool]:
    """The content within `limit` tokens (a word a token), and whether it was cut."""
    words = re.findall(r"\s*\S+", content or "")
    if not isinstance(limit, int) or len(words) <= limit:
        return content, False
    return "".join(words[:limit]), True


def _arguments(args: dict[str, Any] | str) -> str:
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


def _usage(body: dict[str, Any], content: str | None, tool_calls: list[tuple[str, str]]) -> dict[str, int]:
    prompt = len(json.dumps(body.get("messages", []), ensure_ascii=False)) // 4 + 1
    completion = len(content or "") // 4 + sum(len(a) for _, a in tool_calls) // 4 + 1
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _message(content: str | None, tool_calls: list[tuple[str, str]], n: int,
             refusal: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None if refusal else content, "refusal": refusal}
    if tool_calls:
        message["tool_calls"] = [{"id": f"call_{n}_{k}", "type": "function",
                                  "function": {"name": name, "arguments": args}}
                                 for k, (name, args) in enumerate(tool_calls)]
    return message


def _chunks(content: str | None, tool_calls: list[tuple[str, str]], n: int) -> list[dict[str, Any]]:
    """Streamed deltas: the role, the content word by word, each tool call's name then its arguments in pieces."""
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"content": token} for token in re.findall(r"\s*\S+|\s+", content or "")]
    for k, (name, args) in enumerate(tool_calls):
        deltas.append({"tool_calls": [{"index": k, "id": f"call_{n}_{k}", "type": "function",
                                       "function": {"name": name, "arguments": ""}}]})
        half = len(args) // 2
        deltas += [{"tool_calls": [{"index": k, "function": {"arguments": piece}}]}
                   for piece in (args[:half], args[half:])]
    return [{"index": 0, "delta": d, "finish_reason": None} for d in deltas]


def answer(handler: Any, server: Any, body: dict[str, Any], reply: Any) -> None:
    """Send `reply` to a chat-completions request as OpenAI would."""
    if reply.status != 200:
        handler.send_json(reply.status, {"error": {"message": reply.error, "type": "scripted_error",
                                                   "code": reply.status}}, reply.headers)
        return
    if reply.structured is not None:
        reply = replace(reply, content=json.dumps(reply.structured, ensure_ascii=False))
    if reply.empty and body.get("stream"):
        handler.send_events(["data: [DONE]\n\n"])
        return
    if reply.empty:  # a completion with an empty choice list, as some servers send under load
        handler.send_json(200, {"id": f"chatcmpl-{len(server.requests)}", "object": "chat.completion",
                                "created": int(time.time()), "model": body.get("model", "?"), "choices": []})
        return
    if reply.no_message and not body.get("stream"):  # a choice with a finish reason and nothing else
        handler.send_json(200, {"id": f"chatcmpl-{len(server.requests)}", "object": "chat.completion",
                                "created": int(time.time()), "model": body.get("model", "?"),
                                "choices": [{"index": 0, "finish_reason": "stop"}]})
        return
    content = reply.content
    if not reply.ignore_stop and content is not None:
        content = _cut_at_stop(content, body.get("stop"))
    content, cut = _cut_at_limit(content, body.get("max_tokens") or body.get("max_completion_tokens"))
    tool_calls = [(name, _arguments(args)) for name, args in reply.tool_calls]
    usage = reply.usage or _usage(body, content, tool_calls)
    n = len(server.requests)
    base = {"id": f"chatcmpl-{n}", "created": int(time.time()), "model": body.get("model", "?")}
    finish = "length" if cut or reply.cut_off else "tool_calls" if tool_calls else "stop"
    if not body.get("stream"):
        server.usage_sent.append(usage)
        handler.send_json(200, {**base, "object": "chat.completion", "usage": usage,
                                "choices": [{"index": 0, "message": _message(content, tool_calls, n, reply.refusal),
                                             "logprobs": None, "finish_reason": finish}]})
        return
    events = [{**base, "object": "chat.completion.chunk", "choices": [c]} for c in _chunks(content, tool_calls, n)]
    events.append({**base, "object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        server.usage_sent.append(usage)
        events.append({**base, "object": "chat.completion.chunk", "choices": [], "usage": usage})
    handler.send_events([f"data: {json.dumps(event, ensure_ascii=False)}\n\n" for event in events]
                        + ["data: [DONE]\n\n"])
