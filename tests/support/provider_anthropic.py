"""The provider server's Anthropic shape: the Messages API (`POST /v1/messages`), plain or streamed (SSE events
message_start / content_block_start / content_block_delta / content_block_stop / message_delta / message_stop).

Replies become text and `tool_use` content blocks (several in one reply), structured output a `tool_use` of the
tool the request's `tool_choice` forces, stop sequences cut the text, errors come in Anthropic's JSON shape with
the reply's headers (its retry hint).

Like the real API it rejects malformed requests with 400 `invalid_request_error` (401 without an API key) before
any scripted reply is used: a `system` role inside `messages`, empty text blocks, `tool_use` blocks without
matching `tool_result` blocks in the next message, and — the rule that matters most to an agent loop —
`tool_use`/`tool_result` blocks in a request that defines no `tools` ("Requests which include `tool_use` or
`tool_result` blocks must define tools.").
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
               529: "overloaded_error"}
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")


# --- what the real API refuses -------------------------------------------------------------------------------

def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])


def api_key(headers: dict[str, str]) -> str:
    """The API key a request carried: `x-api-key`, or `Authorization: Bearer` (what anthropic>=2 sends)."""
    bearer = headers.get("authorization", "")
    return headers.get("x-api-key") or (bearer[7:] if bearer.lower().startswith("bearer ") else "")


def invalid(body: dict[str, Any], headers: dict[str, str]) -> str | None:
    """Why the real Messages API would reject this request (its error message), or None."""
    if not api_key(headers):
        return "x-api-key header is required"
    if not headers.get("anthropic-version"):
        return "anthropic-version: header is required"
    for key in ("model", "max_tokens", "messages"):
        if key not in body:
            return f"{key}: Field required"
    if not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1:
        return "max_tokens: must be a positive integer"
    if not 0 <= (body.get("temperature") if body.get("temperature") is not None else 1) <= 1:
        return "temperature: must be between 0 and 1"
    messages = body["messages"]
    if not messages:
        return "messages: at least one message is required"
    tools = body.get("tools") or []
    for k, tool in enumerate(tools):
        if not TOOL_NAME.match(str(tool.get("name", ""))):
            return f"tools.{k}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
        if (tool.get("input_schema") or {}).get("type") != "object":
            return f"tools.{k}.custom.input_schema.type: Input should be 'object'"
    choice = body.get("tool_choice")
    if choice is not None:
        if not tools:
            return "tool_choice may only be specified while providing tools."
        if choice.get("type") not in ("auto", "any", "tool", "none"):
            return "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'"
        if choice["type"] == "tool" and choice.get("name") not in [t["name"] for t in tools]:
            return f"tool_choice.name: tool {choice.get('name')!r} is not defined in tools"
    has_tool_blocks = False
    for i, message in enumerate(messages):
        if message.get("role") not in ("user", "assistant"):
            return (f"messages.{i}.role: Unexpected role \"{message.get('role')}\". The Messages API accepts a "
                    "top-level `system` parameter, not \"system\" as an input message role.")
        blocks = _blocks(message)
        last_assistant = i == len(messages) - 1 and message["role"] == "assistant"
        if not blocks and not last_assistant:
            return (f"messages.{i}: all messages must have non-empty content except for the optional final "
                    "assistant message")
        for j, block in enumerate(blocks):
            if block.get("type") == "text" and not block.get("text") and not last_assistant:
                return f"messages.{i}.content.{j}.text: text content blocks must be non-empty"
            if block.get("type") in ("tool_use", "tool_result"):
                has_tool_blocks = True
            if block.get("type") == "tool_use" and message["role"] != "assistant":
                return f"messages.{i}.content.{j}: tool_use blocks may only appear in assistant messages"
        used = [b["id"] for b in blocks if b.get("type") == "tool_use"]
        if used:
            following = _blocks(messages[i + 1]) if i + 1 < len(messages) else []
            leading: list[str] = []
            for block in following:
                if block.get("type") != "tool_result":
                    break
                leading.append(block.get("tool_use_id"))
            missing = [u for u in used if u not in leading]
            if missing:
                return (f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks immediately "
                        f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
                        "`tool_result` block in the next message.")
        if message["role"] == "user":
            previous = _blocks(messages[i - 1]) if i else []
            known = {b.get("id") for b in previous if b.get("type") == "tool_use"}
            for j, block in enumerate(blocks):
                if block.get("type") == "tool_result" and block.get("tool_use_id") not in known:
                    return (f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                            f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding "
                            "`tool_use` block in the previous message.")
    if has_tool_blocks and not tools:
        return "Requests which include `tool_use` or `tool_result` blocks must define tools."
    return None


# --- building replies ----------------------------------------------------------------------------------------

def _cut_at_stop(content: str, stop: Any) -> tuple[str, str | None]:
    cuts = [(content.index(w), w) for w in stop or [] if w and w in content]
    if not cuts:
        return content, None
    at, word = min(cuts)
    return content[:at], word


def _content(reply: Any, body: dict[str, Any], n: int) -> list[dict[str, Any]]:
    choice = body.get("tool_choice") or {}
    blocks: list[dict[str, Any]] = []
    if reply.structured is not None:
        if choice.get("type") == "tool":
            return [{"type": "tool_use", "id": f"toolu_{n}_0", "name": choice["name"], "input": reply.structured}]
        return [{"type": "text", "text": json.dumps(reply.structured, ensure_ascii=False)}]  # not forced: prose
    if reply.content:
        blocks.append({"type": "text", "text": reply.content})
    if choice.get("type") != "none":  # with tool_choice none the model cannot call tools
        blocks += [{"type": "tool_use", "id": f"toolu_{n}_{k}", "name": name,
                    "input": json.loads(args) if isinstance(args, str) else args}
                   for k, (name, args) in enumerate(reply.tool_calls)]
    return blocks


def _usage(body: dict[str, Any], blocks: list[dict[str, Any]]) -> dict[str, int]:
    prompt = len(json.dumps([body.get("system"), body.get("messages"), body.get("tools")], ensure_ascii=False))
    return {"input_tokens": prompt // 4 + 1, "output_tokens": len(json.dumps(blocks, ensure_ascii=False)) // 4 + 1}


def _events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events of a streamed message: text word by word, tool input JSON in two pieces."""
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**message["usage"], "output_tokens": 1}}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start}),
                                                ("ping", {"type": "ping"})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": {"type": "text", "text": ""}}))
            deltas = [{"type": "text_delta", "text": t} for t in re.findall(r"\s*\S+|\s+", block["text"])]
        else:
            events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": {**block, "input": {}}}))
            raw = json.dumps(block["input"], ensure_ascii=False)
            half = len(raw) // 2
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in (raw[:half], raw[half:])]
        events += [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": message["stop_reason"],
                                               "stop_sequence": message["stop_sequence"]},
                                     "usage": {"output_tokens": message["usage"]["output_tokens"]}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def refusal(problem: str) -> Any:
    """The answer to a request the real API refuses: 401 without an API key, else 400."""
    from support.provider_server import Reply

    return Reply(status=401 if problem.startswith("x-api-key") else 400, error=problem)


def answer(handler: Any, server: Any, body: dict[str, Any], reply: Any) -> None:
    """Send `reply` to a Messages request as Anthropic would."""
    request_id = {"request-id": f"req_test_{len(server.requests)}"}
    if reply.status != 200:
        handler.send_json(reply.status, {"type": "error", "error": {
            "type": ERROR_TYPES.get(reply.status, "api_error"), "message": reply.error}},
            {**request_id, **reply.headers})
        return
    stop_sequence = None
    if not reply.ignore_stop and reply.content is not None:
        content, stop_sequence = _cut_at_stop(reply.content, body.get("stop_sequences"))
        reply = replace(reply, content=content)
    n = len(server.requests)
    blocks = _content(reply, body, n)
    stop_reason = ("max_tokens" if reply.cut_off else "tool_use" if any(b["type"] == "tool_use" for b in blocks)
                   else "stop_sequence" if stop_sequence else "end_turn")
    message = {"id": f"msg_test_{n}", "type": "message", "role": "assistant",
               "model": body.get("model", "?"), "content": blocks, "stop_reason": stop_reason,
               "stop_sequence": stop_sequence, "usage": _usage(body, blocks)}
    if not body.get("stream"):
        handler.send_json(200, message, request_id)
        return
    handler.send_events([f"event: {name}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n"
                         for name, event in _events(message)], request_id)
