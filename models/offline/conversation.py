"""Reading a conversation: the current question, the earlier questions, and this turn's tool observations."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from .lexicon import language_of


@dataclass(frozen=True)
class Call:
    """A tool call as the planner thinks of it: a tool name and its arguments."""

    name: str
    args: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def key(self) -> tuple[str, str]:
        """Identity of a call: same tool and same arguments means the same call."""
        return self.name, json.dumps(self.args, sort_keys=True, ensure_ascii=False)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Call) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


@dataclass(frozen=True)
class Observation:
    """One tool call of this turn and what came back."""

    call: Call
    call_id: str
    round: int  # 1-based round (AI message with tool calls) within the turn
    ok: bool
    content: str
    data: Any = None  # the parsed JSON of an ok result
    # The gateway's ToolStatus and attempts, when the result carries them (the act node's
    # `response_metadata["gateway"]`); the text protocol's observations do not, and their failure is read from the
    # text (`faults.failure_reason`).
    status: str = ""
    attempts: int = 0


@dataclass(frozen=True)
class Turn:
    """Everything the scripted model reads from the messages it is given."""

    question: str
    history: tuple[str, ...] = ()
    observations: tuple[Observation, ...] = ()
    rounds: int = 0
    prior_calls: int = 0
    used_ids: frozenset[str] = frozenset()

    @property
    def lang(self) -> str:
        return language_of(self.question)

    def latest_round(self) -> tuple[Observation, ...]:
        return tuple(o for o in self.observations if o.round == self.rounds and self.rounds)

    def earlier(self) -> tuple[Observation, ...]:
        return tuple(o for o in self.observations if o.round < self.rounds)

    def repeated(self) -> bool:
        """The latest round re-ran an earlier call of this turn (same tool and arguments) and learned nothing new."""
        earlier = self.earlier()
        return any(o.call == e.call and o.content == e.content for o in self.latest_round() for e in earlier)

    def find(self, call: Call) -> Observation | None:
        """The latest observation of exactly this call (an ok one preferred), if it was made this turn."""
        matches = [o for o in self.observations if o.call == call]
        ok = [o for o in matches if o.ok]
        return (ok or matches)[-1] if matches else None


_STR = r'"(?:[^"\\]|\\.)*"'
_SCALAR = re.compile(rf'"(\w+)"\s*:\s*({_STR}|-?\d+(?:\.\d+)?|true|false|null)')
_HIT = re.compile(rf'\{{\s*"title"\s*:\s*({_STR})\s*,\s*"snippet"\s*:\s*({_STR})(?:\s*,\s*"source"\s*:\s*({_STR}))?')


def _parse(content: str) -> Any:
    """A tool result as JSON; a result cut short by a length budget is salvaged field by field."""
    try:
        return json.loads(content)
    except (TypeError, ValueError):
        pass
    if not content.lstrip().startswith("{"):
        return content
    data: dict[str, Any] = {}
    for key, raw in _SCALAR.findall(content):
        data.setdefault(key, json.loads(raw))
    hits = [{"title": json.loads(t), "snippet": json.loads(s), "source": json.loads(src) if src else ""}
            for t, s, src in _HIT.findall(content)]
    if hits:
        data["results"] = hits
    return data or content


def _outcome(result: ToolMessage) -> tuple[str, int]:
    """(status, attempts) from the gateway's facts on the result, allow-listed and bounded ("" and 0 when
    absent)."""
    facts = (result.response_metadata or {}).get("gateway")
    facts = facts if isinstance(facts, dict) else {}
    status = facts.get("status")
    attempts = facts.get("attempts")
    return (status if isinstance(status, str) and len(status) <= 32 else "",
            attempts if isinstance(attempts, int) and 0 <= attempts <= 1000 else 0)


def read_turn(messages: Sequence[BaseMessage]) -> Turn:
    """Split the conversation at the last human message: before it is context, after it is this turn."""
    last_human = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
    question = messages[last_human].text.strip() if last_human >= 0 else ""
    history = tuple(m.text for m in messages[:max(last_human, 0)] if isinstance(m, HumanMessage))
    used_ids: set[str] = set()
    prior_calls = 0
    for message in messages:
        if isinstance(message, AIMessage):
            prior_calls += len(message.tool_calls)
            used_ids.update(tc.get("id") or "" for tc in message.tool_calls)

    calls: dict[str, tuple[Call, int]] = {}
    order: list[str] = []
    results: dict[str, ToolMessage] = {}
    rounds = 0
    for message in messages[last_human + 1:]:
        if isinstance(message, AIMessage) and message.tool_calls:
            rounds += 1
            for tc in message.tool_calls:
                call_id = tc.get("id") or f"anon_{len(order)}"
                calls[call_id] = (Call(tc["name"], dict(tc.get("args") or {})), rounds)
                order.append(call_id)
        elif isinstance(message, ToolMessage):
            results[message.tool_call_id] = message

    observations = []
    for call_id in order:
        call, round_no = calls[call_id]
        result = results.get(call_id)
        if result is None:
            observations.append(Observation(call, call_id, round_no, False, "No result was returned."))
            continue
        content = result.text
        ok = getattr(result, "status", "success") != "error"
        status, attempts = _outcome(result)
        observations.append(Observation(call, call_id, round_no, ok, content, _parse(content) if ok else None,
                                        status, attempts))
    return Turn(question=question, history=history, observations=tuple(observations), rounds=rounds,
                prior_calls=prior_calls, used_ids=frozenset(used_ids))
