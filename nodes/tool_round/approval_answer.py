"""Reading a person's answer to an approval request: what `Command(resume=...)` may carry, checked strictly.

The answer is LangChain's (`HumanInTheLoopMiddleware`, see hitl.py): `{"decisions": [...]}` with one decision
per action request, in order, for a batched request; one decision for a per-call request. Each decision's type
must be among the request's `allowed_decisions`; a per-call edit keeps the tool (as LangChain's does), a batched
one may name another tool (that tool's own approval is then asked for). Keys LangChain does not read are ignored,
as it ignores them.

The previous release's answers (`{"decision": ...}`, legacy_answer.py) are still read for one release, with a
DeprecationWarning. Anything else is not guessed at: the request is put again, with the problem named in one line
(see approve.py).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from reactgraph.errors import ReactGraphError
from reactgraph.nodes.tool_round.decision import (
    MAX_NAME_CHARS,
    MAX_REASON_CHARS,
    MAX_RESPONSE_CHARS,
    BadAnswer,
    Decision,
)
from reactgraph.nodes.tool_round.legacy_answer import is_legacy, read_legacy
from reactgraph.tools.meta import APPROVAL_DECISIONS

DEPRECATED = ('approval answers in the old format ({"decision": ...} or a mapping of call ids) are deprecated and '
              'will not be read after the next release; answer {"decisions": [{"type": "approve"}, ...]} '
              "(LangChain's HITL format, see docs/approvals.md)")


class OldApprovalAnswer(ReactGraphError, DeprecationWarning):
    """An approval answered in the previous release's format (a warning, under our error root like the rest)."""


# Shown once per process, not hidden as Python hides DeprecationWarnings raised outside __main__: the code that
# sends the old answers is a client's, and whoever runs the graph is the one who can tell its authors.
warnings.filterwarnings("default", category=OldApprovalAnswer)
BATCHED = '{"decisions": [...]} with one decision per action request, in order'
PER_CALL = ('one decision: {"type": "approve"}, {"type": "edit", "edited_action": {"name": ..., "args": {...}}}, '
            '{"type": "reject", "message": "..."} or {"type": "respond", "message": "..."}')


def read_answer(answer: Any, requests: list[dict[str, Any]], *, per_call: bool) -> dict[str, Decision]:
    """A decision per call id of `requests` (the gateway's approval requests, in the order asked), or
    `BadAnswer`."""
    call_ids = [request["id"] for request in requests]
    if isinstance(answer, Mapping) and "decisions" in answer:
        return _read_decisions(answer["decisions"], requests, per_call)
    if per_call and isinstance(answer, Mapping) and "type" in answer:
        return {call_ids[0]: read_decision(answer, requests[0], "the decision", per_call=True)}
    if is_legacy(answer, call_ids):
        warnings.warn(DEPRECATED, OldApprovalAnswer, stacklevel=2)
        return read_legacy(answer, call_ids)
    shape = "a single decision" if isinstance(answer, Mapping) and "type" in answer else type(answer).__name__
    raise BadAnswer(f"an answer must be {PER_CALL if per_call else BATCHED}, not {shape}")


def _read_decisions(decisions: Any, requests: list[dict[str, Any]], per_call: bool) -> dict[str, Decision]:
    if not isinstance(decisions, list):
        raise BadAnswer(f"'decisions' must be a list, one decision per action request in order, not "
                        f"{type(decisions).__name__}")
    if len(decisions) != len(requests):
        asked = ", ".join(request["name"] for request in requests)
        raise BadAnswer(f"{len(decisions)} decision(s) for {len(requests)} action request(s) ({asked}): give one "
                        f"per request, in order")
    return {request["id"]: read_decision(decision, request, f"decision {number} ({request['name']})", per_call)
            for number, (decision, request) in enumerate(zip(decisions, requests, strict=True), 1)}


def read_decision(value: Any, request: Mapping[str, Any], where: str, per_call: bool) -> Decision:
    """One decision in LangChain's shape on the call `request` asks about, or `BadAnswer`."""
    if not isinstance(value, Mapping):
        raise BadAnswer(f"{where}: a decision must be an object with a 'type', not {type(value).__name__}")
    kind = value.get("type")
    if kind not in APPROVAL_DECISIONS:
        raise BadAnswer(f"{where}: type {str(kind)[:40]!r} is not approve, edit, reject or respond")
    allowed = request.get("decisions") or APPROVAL_DECISIONS
    if kind not in allowed:
        raise BadAnswer(f"{where}: {kind} is not allowed for {request['name']} (allowed: {', '.join(allowed)})")
    if kind == "approve":
        return Decision("approve")
    if kind == "edit":
        return _edit(value.get("edited_action"), request, where, per_call)
    message = value.get("message", "" if kind == "reject" else None)
    if not isinstance(message, str):
        raise BadAnswer(f"{where}: {kind} needs message, text" +
                        (" (why, shown to the model)" if kind == "reject" else " (the call's result)"))
    if kind == "reject":
        return Decision("reject", message=message.strip()[:MAX_REASON_CHARS])
    if len(message) > MAX_RESPONSE_CHARS:
        raise BadAnswer(f"{where}: respond's message has {len(message)} characters, more than {MAX_RESPONSE_CHARS}")
    return Decision("respond", message=message)


def _edit(action: Any, request: Mapping[str, Any], where: str, per_call: bool) -> Decision:
    if not isinstance(action, Mapping) or not isinstance(action.get("args"), Mapping):
        raise BadAnswer(f'{where}: edit needs edited_action, {{"name": "{request["name"]}", "args": {{...}}}}')
    name = action.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS:
        raise BadAnswer(f"{where}: edited_action's name must be a tool name (1 to {MAX_NAME_CHARS} characters)")
    name = name.strip()
    if per_call and name != request["name"]:
        raise BadAnswer(f"{where}: an edit of one call keeps its tool: edited_action's name is {name[:40]!r}, "
                        f"the call is {request['name']}'s")
    return Decision("edit", name=name, args=dict(action["args"]))
