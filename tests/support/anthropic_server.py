"""A local Anthropic Messages API server for tests: scripted replies, every request recorded and validated.

Stdlib only (http.server on a thread), so the real langchain-anthropic client (and the anthropic SDK under
it) can be exercised end to end without a network: `POST /v1/messages`, plain or streamed (SSE events
message_start / content_block_start / content_block_delta / content_block_stop / message_delta /
message_stop), text and `tool_use` content blocks (several in one reply), structured output as a forced
tool call, stop sequences, errors in Anthropic's JSON shape with retry hints, delays.

Like the real API it rejects malformed requests with 400 `invalid_request_error` before any scripted reply
is used (the rejection is recorded in `server.rejections`): a `system` role inside `messages`, empty text
blocks, `tool_use` blocks without matching `tool_result` blocks in the next message, and — the rule that
matters most to an agent loop — `tool_use`/`tool_result` blocks in a request that defines no `tools`
("Requests which include `tool_use` or `tool_result` blocks must define tools.").
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler
from typing import Any

from support.scripted_http import ScriptedServer

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
               529: "overloaded_error"}
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")


@dataclass
class Reply:
    """One scripted response: a message (text and/or tool_use blocks, or structured output) or an HTTP error."""

    content: str | None = None
    tool_uses: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (name, input)
    structured: dict[str, Any] | None = None  # the input of the tool the request forces
    status: int = 200
    error: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    ignore_stop: bool = False  # some servers do not honour `stop_sequences`; the client must cope


def text(content: str, *, ignore_stop: bool = False) -> Reply:
    return Reply(content=content, ignore_stop=ignore_stop)


def calls(*named: tuple[str, dict[str, Any]], content: str = "") -> Reply:
    """`tool_use` blocks (after a text block when `content` is given), in order."""
    return Reply(content=content or None, tool_uses=[(name, dict(args)) for name, args in named])


def structured(value: dict[str, Any]) -> Reply:
    """The answer to a structured-output request: a `tool_use` of the tool named by the forced `tool_choice`."""
    return Reply(structured=value)


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


class AnthropicServer(ScriptedServer):
    """`with AnthropicServer(reply, ...) as server:` — serves the replies in order at `server.base_url`."""

    def __init__(self, *replies: Reply | Responder) -> None:
        super().__init__(replies, _handler_for(self), lambda: error(500, "script exhausted", 0))
        self.rejections: list[str] = []  # 400s for requests the real API would refuse

    @property
    def base_url(self) -> str:
        """What ANTHROPIC_BASE_URL holds: the SDK appends /v1/messages itself."""
        return f"http://127.0.0.1:{self.port}"

    def receive(self, body: dict[str, Any], headers: dict[str, str]) -> Reply:
        """Record the request; a scripted reply for a valid one, a 400 (script untouched) for an invalid one."""
        problem = invalid(body, headers)
        if problem:
            self.rejections.append(problem)
            return self.record(body, headers, Reply(status=401 if problem.startswith("x-api-key") else 400,
                                                    error=problem))
        return self.record(body, headers)

    # --- reading what the client sent ---------------------------------------------------------------------

    def tool_names(self, i: int = 0) -> list[str]:
        return [t["name"] for t in self.requests[i].get("tools") or []]

    def api_keys(self) -> list[str]:
        return [api_key(h) for h in self.headers]

    def blocks(self, i: int, kind: str) -> list[dict[str, Any]]:
        """Every content block of one type (text, tool_use, tool_result) in request i, in order."""
        return [b for m in self.requests[i]["messages"] if isinstance(m["content"], list)
                for b in m["content"] if b.get("type") == kind]


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


def _content(reply: Reply, body: dict[str, Any], n: int) -> list[dict[str, Any]]:
    choice = body.get("tool_choice") or {}
    blocks: list[dict[str, Any]] = []
    if reply.structured is not None:
        if choice.get("type") == "tool":
            return [{"type": "tool_use", "id": f"toolu_{n}_0", "name": choice["name"], "input": reply.structured}]
        return [{"type": "text", "text": json.dumps(reply.structured, ensure_ascii=False)}]  # not forced: prose
    if reply.content:
        blocks.append({"type": "text", "text": reply.content})
    if choice.get("type") != "none":  # with tool_choice none the model cannot call tools
        blocks += [{"type": "tool_use", "id": f"toolu_{n}_{k}", "name": name, "input": args}
                   for k, (name, args) in enumerate(reply.tool_uses)]
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


def _handler_for(server: AnthropicServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload, ensure_ascii=False).encode()
            self.send_response(status)
            for key, value in {"Content-Type": "application/json", "Content-Length": str(len(data)),
                               "request-id": f"req_test_{len(server.requests)}", **(headers or {})}.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            # the client gave up (a timeout test): nothing left to answer
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._serve()

        def _serve(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if self.path.split("?")[0].rstrip("/") != "/v1/messages":
                self._send_json(404, {"type": "error", "error": {"type": "not_found_error",
                                                                 "message": f"no route {self.path}"}})
                return
            reply = server.receive(body, {k.lower(): v for k, v in self.headers.items()})
            if reply.delay_s:
                time.sleep(reply.delay_s)
            if reply.status != 200:
                self._send_json(reply.status, {"type": "error", "error": {
                    "type": ERROR_TYPES.get(reply.status, "api_error"), "message": reply.error}}, reply.headers)
                return
            stop_sequence = None
            if not reply.ignore_stop and reply.content is not None:
                content, stop_sequence = _cut_at_stop(reply.content, body.get("stop_sequences"))
                reply = replace(reply, content=content)
            n = len(server.requests)
            blocks = _content(reply, body, n)
            stop_reason = ("tool_use" if any(b["type"] == "tool_use" for b in blocks)
                           else "stop_sequence" if stop_sequence else "end_turn")
            message = {"id": f"msg_test_{n}", "type": "message", "role": "assistant",
                       "model": body.get("model", "?"), "content": blocks, "stop_reason": stop_reason,
                       "stop_sequence": stop_sequence, "usage": _usage(body, blocks)}
            if not body.get("stream"):
                self._send_json(200, message)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("request-id", f"req_test_{n}")
            self.end_headers()
            for name, event in _events(message):
                self.wfile.write(f"event: {name}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n".encode())
                self.wfile.flush()

    return Handler
