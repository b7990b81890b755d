"""Reading a text-protocol reply within the run's format-error budget, the same for every node that asks for one.

A reply is cut of its loops (repetition.py) and parsed. A reply the parser cannot use is answered with a short
format note and asked for again, while the run's budget (`Context.max_format_errors`, counted from the turn's
`format_error` records) lasts. The request never grows with the junk: the unusable reply is replaced by a
fixed stand-in, and only the latest correction follows it, so call N is as long as call 2.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Protocol, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from reactgraph.models.gateway import ModelCall
from reactgraph.nodes import prompts
from reactgraph.nodes.conversation import tokens_of
from reactgraph.nodes.driver import Request, log_fallback
from reactgraph.nodes.prompting.repetition import without_repetition
from reactgraph.nodes.state import ExecutionStep, make_step, steps_of

FORMAT_ERROR = "format_error"  # the status of a record for an unusable reply


class Parsed(Protocol):
    @property
    def problem(self) -> str | None: ...


P = TypeVar("P", bound=Parsed)


@dataclass(frozen=True)
class FormatError:
    """One unusable reply: what the model wrote (loops cut), why it could not be read, the note sent back."""

    text: str
    problem: str
    correction: str
    tokens: int
    latency_ms: float


@dataclass
class Attempts(Generic[P]):
    """What the attempts came to: the usable reply (None when the budget ran out first) and each unusable one."""

    reply: AIMessage | None = None
    text: str = ""
    parsed: P | None = None
    errors: list[FormatError] = field(default_factory=list)

    def records(self, node: str, step: Callable[[int], int]) -> list[ExecutionStep]:
        """A `format_error` record per unusable reply; `step(i)` numbers the i-th."""
        return [make_step(step=step(i), node=node, status=FORMAT_ERROR, thought=error.text[:2000],
                          observation=error.correction, tokens=error.tokens, latency_ms=error.latency_ms)
                for i, error in enumerate(self.errors)]


def format_errors(state: Mapping[str, Any]) -> int:
    """The turn's unusable replies so far (its `format_error` records)."""
    return sum(1 for step in steps_of(state) if step["status"] == FORMAT_ERROR)


def corrections_left(state: Mapping[str, Any], max_format_errors: int) -> int:
    """How many more unusable replies this turn may have corrected (`max_format_errors` less those so far)."""
    return max(max_format_errors - format_errors(state), 0)


def read_reply(call: ModelCall, parse: Callable[[str], P], correction: Callable[[str], str], *, node: str,
               allowed: int, attempts: Attempts[P] | None = None) -> Generator[Request, Any, Attempts[P]]:
    """Make `call` (its messages, then with the latest correction after them) until `parse` finds no problem
    or `allowed` corrections are spent; returns `Attempts` (filled in as they happen into `attempts` when given:
    a caller keeps the unusable replies of a call that then fails).

    A node body's part (see node_driver): `attempts = yield from read_reply(...)`."""
    attempts = attempts if attempts is not None else Attempts()
    request: list[BaseMessage] = list(call.messages)
    asked = call
    while True:
        started = time.perf_counter()
        reply = (yield from asked).message or AIMessage("")
        text = without_repetition(str(reply.text))
        parsed = parse(text)
        if parsed.problem is None:
            attempts.reply, attempts.text, attempts.parsed = reply, text, parsed
            return attempts
        note = correction(parsed.problem)
        log_fallback(node, "format_correction", parsed.problem, level=logging.INFO)
        attempts.errors.append(FormatError(text, parsed.problem, note, tokens_of(reply),
                                           (time.perf_counter() - started) * 1000))
        if len(attempts.errors) > allowed:
            return attempts
        asked = replace(call, messages=[*request, AIMessage(prompts.TEXT_REPLY_STAND_IN),
                                        HumanMessage(f"Observation: {note}")])

