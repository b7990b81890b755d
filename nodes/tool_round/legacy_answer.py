"""The approval answers of the previous release, still read for one release (with a DeprecationWarning, see
approval_answer.py): one decision for every call, or a mapping from call id to a decision:
    {"decision": "approve"}
    {"decision": "edit", "name": "get_weather", "args": {"city": "Paris"}}   (name: optional, the same tool)
    {"decision": "reject", "reason": "not that site"}                         (reason: optional)
"approve" and "reject" alone are taken for the first and third.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reactgraph.nodes.tool_round.decision import MAX_NAME_CHARS, MAX_REASON_CHARS, BadAnswer, Decision

ACCEPTED = ('{"decision": "approve"}, {"decision": "edit", "name": ..., "args": {...}}, '
            '{"decision": "reject", "reason": "..."}, or a mapping from call id to one of these')


def is_legacy(answer: Any, call_ids: list[str]) -> bool:
    """Whether an answer is in the old shape: a decision, or a mapping with a call id among its keys."""
    return _is_decision(answer) or (isinstance(answer, Mapping) and any(key in call_ids for key in answer))


def read_legacy(answer: Any, call_ids: list[str]) -> dict[str, Decision]:
    """A decision per call id, or `BadAnswer`. One decision applies to every call; a mapping must decide each
    call asked about and nothing else."""
    if _is_decision(answer):
        one = _decision(answer, "the answer")
        return dict.fromkeys(call_ids, one)
    if not isinstance(answer, Mapping):
        raise BadAnswer(f"an answer must be a decision or a mapping of call ids to decisions, not "
                        f"{type(answer).__name__}; accepted: {ACCEPTED}")
    unknown = [str(key) for key in answer if key not in call_ids]
    missing = [call_id for call_id in call_ids if call_id not in answer]
    if unknown or missing:
        problems = ([f"no call {', '.join(map(repr, unknown[:5]))} was asked about"] if unknown else []) + \
                   ([f"no decision for call {', '.join(map(repr, missing[:5]))}"] if missing else [])
        raise BadAnswer("; ".join(problems) + f" (calls asked about: {', '.join(map(repr, call_ids))})")
    return {call_id: _decision(answer[call_id], f"call {call_id!r}") for call_id in call_ids}


def _is_decision(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, Mapping) and "decision" in value)


def _decision(value: Any, where: str) -> Decision:
    if isinstance(value, str):
        value = {"decision": value}
    if not isinstance(value, Mapping):
        raise BadAnswer(f"{where}: a decision must be a mapping, not {type(value).__name__}; accepted: {ACCEPTED}")
    kind = value.get("decision")
    extra = sorted(str(key) for key in value if key not in _KEYS.get(kind, {"decision"}))
    if kind not in _KEYS:
        raise BadAnswer(f"{where}: decision {str(kind)[:40]!r} is not approve, edit or reject")
    if extra:
        raise BadAnswer(f"{where}: {kind} takes no {', '.join(map(repr, extra[:5]))}; accepted: {ACCEPTED}")
    if kind == "reject":
        reason = value.get("reason", "")
        if not isinstance(reason, str):
            raise BadAnswer(f"{where}: reason must be text")
        return Decision("reject", message=reason.strip()[:MAX_REASON_CHARS])
    if kind == "edit":
        return _edit(value, where)
    return Decision("approve")


def _edit(value: Mapping[str, Any], where: str) -> Decision:
    name, args = value.get("name"), value.get("args")
    if name is not None and (not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS):
        raise BadAnswer(f"{where}: edit's name must be a tool name (1 to {MAX_NAME_CHARS} characters)")
    if not isinstance(args, Mapping):
        raise BadAnswer(f"{where}: edit needs args, a mapping of the tool's arguments")
    return Decision("edit", name=name.strip() if name else None, args=dict(args))


_KEYS: dict[Any, set[str]] = {"approve": {"decision"}, "reject": {"decision", "reason"},
                              "edit": {"decision", "name", "args"}}
