"""Cassettes: a real small model's replies (SmolLM2-135M-Instruct on llama-server, recorded by
tests/real_model/record_cassettes.py) replayed by the local OpenAI-compatible test server, so that every suite run
meets real-model output — cut at the token limit, junk, no tool call where one was due, malformed tool calls — in
seconds.

A cassette (tests/data/cassettes/<scenario>.json) holds the scenario (graph, protocol, question, context) and the
exchanges in the order they happened: each request's kind and shape, and the reply as one message (content, tool
calls with their arguments as sent, finish reason, the server's usage). Replay answers each request with the next
recorded reply of the same kind (plain, tools, structured, or a forced tool call), so a product that asks one
question more or less than at recording time still meets the model's own replies; once a kind's replies are used
up, its last one again (the model asked the same thing at temperature 0 says the same thing), and a kind never
recorded gets the next unused reply whatever its kind.

The files are model output: untrusted. `load` checks their shape and bounds their sizes before anything uses them.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.provider_server import Reply

CASSETTES = Path(__file__).parent.parent / "data/cassettes"
MAX_FILE_BYTES = 200_000
MAX_EXCHANGES = 40
MAX_TEXT_CHARS = 8_000
KINDS = ("plain", "tools", "structured", "forced")
USAGE_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens")


class BadCassette(ValueError):
    """A cassette file that is not what the recorder writes."""


def request_kind(body: dict[str, Any]) -> str:
    """What a chat-completion request asks for: structured output, a forced tool call, a free choice of tools,
    or plain text."""
    if (body.get("response_format") or {}).get("type") in ("json_schema", "json_object"):
        return "structured"
    choice = body.get("tool_choice")
    if isinstance(choice, dict) or choice == "required":
        return "forced"
    return "tools" if body.get("tools") else "plain"


def request_shape(body: dict[str, Any]) -> dict[str, Any]:
    """What a cassette keeps of a request: its kind and shape, not its prompts (they change with the product)."""
    return {"kind": request_kind(body), "messages": len(body.get("messages") or []),
            "roles": [m.get("role") for m in body.get("messages") or []],
            "tools": [t.get("function", {}).get("name") for t in body.get("tools") or []],
            "stream": bool(body.get("stream")), "max_tokens": body.get("max_tokens")}


def _text(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_TEXT_CHARS:
        raise BadCassette(f"{what}: a string of at most {MAX_TEXT_CHARS} characters expected")
    return value


def _reply(raw: Any) -> Reply:
    if not isinstance(raw, dict):
        raise BadCassette("a reply must be an object")
    if "status" in raw:  # the server refused the request (llama-server sends a bad request's error as a 500)
        if type(raw["status"]) is not int or not 400 <= raw["status"] <= 599:
            raise BadCassette("status: an HTTP error status expected")
        # a short retry hint keeps the client's backoff, and so the replay, fast
        return Reply(status=raw["status"], error=_text(raw.get("error"), "error") or "",
                     headers={"retry-after-ms": "10"})
    calls = raw.get("tool_calls") or []
    if not isinstance(calls, list) or len(calls) > 8:
        raise BadCassette("tool_calls: a list of at most 8 [name, arguments] pairs expected")
    tool_calls: list[tuple[str, dict[str, Any] | str]] = []
    for call in calls:
        if not (isinstance(call, list) and len(call) == 2):
            raise BadCassette("a tool call must be [name, arguments]")
        tool_calls.append((_text(call[0], "tool name") or "", _text(call[1], "tool arguments") or ""))
    usage = raw.get("usage")
    if usage is not None:  # the counts a client reads; the rest (llama-server's prompt_tokens_details) is left out
        usage = {k: v for k, v in usage.items() if k in USAGE_COUNTS} if isinstance(usage, dict) else None
        if usage is None or not all(type(v) is int and 0 <= v < 10**7 for v in usage.values()):
            raise BadCassette("usage: an object of token counts expected")
    finish = _text(raw.get("finish_reason"), "finish_reason")
    if finish not in (None, "stop", "length", "tool_calls"):
        raise BadCassette(f"finish_reason {finish!r} is not one a server sends")
    return Reply(content=_text(raw.get("content"), "content"), tool_calls=tool_calls, cut_off=finish == "length",
                 usage=usage or None)


@dataclass
class Cassette:
    """One recorded scenario."""

    name: str
    scenario: dict[str, Any]
    kinds: list[str]
    replies: list[Reply]
    served: list[tuple[str, Reply]] = field(default_factory=list)  # what replay answered, in order, by request kind
    _used: set[int] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: dict[str, Any]) -> Reply:
        """The reply to one request (a Responder for ProviderServer's `then`)."""
        kind = request_kind(body)
        with self._lock:
            same = [i for i, k in enumerate(self.kinds) if k == kind]
            unused = [i for i in (same or range(len(self.replies))) if i not in self._used]
            index = unused[0] if unused else same[-1] if same else len(self.replies) - 1
            self._used.add(index)
            self.served.append((kind, self.replies[index]))
        return self.replies[index]

    def truncated(self) -> list[str]:
        """The content of each served answering reply (not a structured one: a check or a plan may repeat the
        answer) the server cut at its token limit."""
        return [r.content or "" for kind, r in self.served if r.cut_off and kind in ("plain", "tools")]


def load(path: Path) -> Cassette:
    """A cassette from its file, shape checked and sizes bounded."""
    if path.stat().st_size > MAX_FILE_BYTES:
        raise BadCassette(f"{path.name}: larger than {MAX_FILE_BYTES} bytes")
    data = json.loads(path.read_text(encoding="utf-8"))
    exchanges = data.get("exchanges") if isinstance(data, dict) else None
    scenario = data.get("scenario") if isinstance(data, dict) else None
    if not isinstance(scenario, dict) or not isinstance(exchanges, list) or not 0 < len(exchanges) <= MAX_EXCHANGES:
        raise BadCassette(f"{path.name}: a scenario and 1-{MAX_EXCHANGES} exchanges expected")
    kinds = [(e.get("request") or {}).get("kind") if isinstance(e, dict) else None for e in exchanges]
    if any(kind not in KINDS for kind in kinds):
        raise BadCassette(f"{path.name}: every request's kind must be one of {KINDS}")
    return Cassette(path.stem, scenario, kinds, [_reply(e.get("reply")) for e in exchanges])


def all_cassettes() -> list[Path]:
    return sorted(CASSETTES.glob("*.json"))
