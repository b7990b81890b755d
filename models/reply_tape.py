"""A comparison's model replies, kept beside its results and played back without the provider (`compare --replay`).

While a tape records, every HTTP exchange of a provider client (OpenAI's and Anthropic's SDKs, through the
bounded transports of models/bounded_transport.py) made inside a run's scope (`run_scope`, set by the eval runner
for each run) is appended to `replies.jsonl`: the run, the attempt (one per time the run was made: a resumed or
retried run keeps only its last), the request's kind (what it asked for: JSON schema, JSON mode, a forced tool,
tools, plain; streamed or not) and the response (status, content type, body; or that it timed out). While a tape
replays, no request leaves the process: each is answered with the next stored response of the same kind of the
same run's attempt. A request the recording has no response for raises `NoStoredReply` (a connection error to the
SDK) and is kept in `missed`, so that the command ends with one line naming the run.

Bounded: a response body over `MAX_BODY_BYTES` is stored as too large (a replay of it is a miss), and the file
stops growing at `MAX_TAPE_BYTES` (what came after is missed at replay). The file is model output on read:
each line is checked for its shape, and an unreadable line is skipped.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import threading
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from reactgraph.errors import ReactGraphError

REPLIES = "replies.jsonl"
MAX_BODY_BYTES = 1_000_000
MAX_TAPE_BYTES = 200_000_000

_run: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("reactgraph_tape_run", default=None)
_active: Tape | None = None


class NoStoredReply(ReactGraphError, ConnectionError):
    """A replayed run asked for a reply its recording does not have (a connection error to the SDK: nothing was
    sent)."""


def request_kind(body: bytes) -> str:
    """What a chat request asks for, in a few words: the same request asks the same at replay whatever the day or
    the tool results in its prompt."""
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        return "unreadable"
    if not isinstance(data, dict):
        return "unreadable"
    if "input" in data and "messages" not in data:
        return "embeddings"
    response_format = data.get("response_format") or data.get("output_format") or {}
    fmt = response_format.get("type") if isinstance(response_format, dict) else None
    choice = data.get("tool_choice")
    if isinstance(choice, dict):  # OpenAI's {"type": "function", …}, Anthropic's {"type": "tool"|"any"|"auto"}
        choice = "forced" if choice.get("type") in ("function", "tool", "any") else choice.get("type")
    elif choice == "required":
        choice = "forced"
    tools = "tools" if data.get("tools") else "no tools"
    return " ".join(str(part) for part in (fmt or "text", choice or "-", tools,
                                            "stream" if data.get("stream") else "whole"))


@dataclass
class Stored:
    """One response as kept: its status, content type and body, or a timeout."""

    status: int = 0
    content_type: str = ""
    body: str = ""
    timeout: bool = False
    too_large: bool = False


@dataclass
class Tape:
    """The replies of one results folder: recording (appending) or replaying."""

    path: Path
    replaying: bool = False
    written: int = 0
    full: bool = False
    missed: list[str] = field(default_factory=list)
    _stored: dict[tuple[str, str], list[Stored]] = field(default_factory=lambda: defaultdict(list))  # run, kind
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def recording(cls, folder: Path) -> Tape:
        path = folder / REPLIES
        return cls(path, written=path.stat().st_size if path.is_file() else 0)

    @classmethod
    def replay(cls, folder: Path, attempts: dict[str, str]) -> Tape:
        """The stored replies of the runs' kept attempts (`attempts`: run → attempt, from the records)."""
        tape = cls(folder / REPLIES, replaying=True)
        if tape.path.is_file():
            with tape.path.open(encoding="utf-8", errors="replace") as lines:
                for line in lines:
                    entry = _entry(line)
                    if entry is not None and attempts.get(entry[0]) == entry[1]:
                        tape._stored[entry[0], entry[2]].append(entry[3])
        return tape

    def keep(self, request_body: bytes, stored: Stored) -> None:
        """Append one exchange of the run in scope (none out of a run's scope, none once the file is full)."""
        scope = _run.get()
        if scope is None or self.replaying:
            return
        line = json.dumps({"run": scope[0], "attempt": scope[1], "kind": request_kind(request_body),
                           "status": stored.status, "content_type": stored.content_type,
                           "body": stored.body, "timeout": stored.timeout, "too_large": stored.too_large},
                          ensure_ascii=False) + "\n"
        data = line.encode()
        with self._lock:
            if self.written + len(data) > MAX_TAPE_BYTES:
                self.full = True
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("ab") as out:
                out.write(data)
            self.written += len(data)

    def answer(self, request_body: bytes) -> Stored:
        """The next stored response of this kind for the run in scope (its kept attempt's); `NoStoredReply` when
        there is none."""
        scope = _run.get()
        kind = request_kind(request_body)
        with self._lock:
            queue = self._stored.get((scope[0], kind)) if scope is not None else None
            if queue and not queue[0].too_large:
                return queue.pop(0)
            run = scope[0] if scope is not None else "(outside any run)"
            self.missed.append(f"run {run} asked for a reply ({kind}) the recording does not have")
        raise NoStoredReply(self.missed[-1])


def _entry(line: str) -> tuple[str, str, str, Stored] | None:
    """One line of the file as (run, attempt, kind, response); None for a line that is not what `keep` writes."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    run, attempt, kind, content_type, body = (data.get(key) for key in ("run", "attempt", "kind", "content_type",
                                                                         "body"))
    status = data.get("status")
    if not (isinstance(run, str) and isinstance(attempt, str) and isinstance(kind, str)
            and isinstance(content_type, str) and isinstance(body, str)):
        return None
    if type(status) is not int or not 0 <= status <= 599:
        return None
    return run, attempt, kind, Stored(status, content_type, body, data.get("timeout") is True,
                                      data.get("too_large") is True)


def active() -> Tape | None:
    """The tape the provider clients record to or replay from, if any."""
    return _active


@contextlib.contextmanager
def using(tape: Tape | None) -> Iterator[Tape | None]:
    """Record to (or replay from) `tape` for the duration."""
    global _active
    previous, _active = _active, tape
    try:
        yield tape
    finally:
        _active = previous


@contextlib.contextmanager
def run_scope(run: str, attempt: str) -> Iterator[None]:
    """The requests made in here (and in the threads the run starts with a copy of its context) are this run's."""
    token = _run.set((run, attempt))
    try:
        yield
    finally:
        _run.reset(token)
