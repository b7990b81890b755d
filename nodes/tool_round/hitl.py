"""The approval request in LangChain's human-in-the-loop format (`HumanInTheLoopMiddleware`), which LangChain's
frontend docs and agent-chat-ui are written for.

Batched (the default, `Context.approval_mode`), one interrupt for every call of a reply that needs approval:
    {"action_requests": [{"name", "args", "description"}, ...],
     "review_configs": [{"action_name", "allowed_decisions"}, ...]}
answered with `{"decisions": [decision, ...]}`, one per action request, in order.
Per call, one interrupt per call, in the reply's order:
    {"type": "tool_approval", "tool_call_id", "name", "args", "description"}
answered with one decision. A decision is `{"type": "approve"}`, `{"type": "edit", "edited_action": {"name",
"args"}}`, `{"type": "reject", "message": "..."}` (message optional) or `{"type": "respond", "message": "..."}`
(the call is not run; the text is its result). A request put again because its answer was not understood also has
"error", and its descriptions start with the problem, so a person sees why it is asked again.

Clients (the CLI, sessions, evals) read requests with `is_approval_request` / `requested_calls` and answer with
`answer_with`, whichever mode the run uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TOOL_APPROVAL = "tool_approval"  # the per-call interrupt value's "type", as LangChain names it


def describe(request: Mapping[str, Any], error: str = "") -> str:
    """What the person reads: why the call asks, the tool and its arguments (as LangChain's default does), after
    the problem with the last answer if there was one."""
    # imported here: the CLI's approval prompt reads this module, and `reactgraph --help` must not load the tools
    from reactgraph.tools.approval import describe_call
    from reactgraph.tools.untrusted import terminal_safe

    text = describe_call(request["name"], request.get("args"), request["reason"])  # escaped there
    return terminal_safe(f"The last answer was not understood: {error}\n\n") + text if error else text


def hitl_request(requests: list[dict[str, Any]], error: str = "") -> dict[str, Any]:
    """The batched interrupt value (LangChain's `HITLRequest`) for these calls."""
    value: dict[str, Any] = {
        "action_requests": [{"name": r["name"], "args": r["args"], "description": describe(r, error)}
                            for r in requests],
        "review_configs": [{"action_name": r["name"], "allowed_decisions": list(r["decisions"])} for r in requests]}
    if error:
        value["error"] = error
    return value


def tool_approval_request(request: dict[str, Any], error: str = "") -> dict[str, Any]:
    """The per-call interrupt value (LangChain's `ToolApprovalRequest`) for one call."""
    value: dict[str, Any] = {"type": TOOL_APPROVAL, "tool_call_id": request["id"], "name": request["name"],
                             "args": request["args"], "description": describe(request, error)}
    if error:
        value["error"] = error
    return value


def decision_schema(request: Mapping[str, Any], args_schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """The per-call interrupt's `response_schema` (JSON Schema, as LangChain's per-call mode surfaces it): the
    decisions the tool allows, an edit's `name` pinned to the tool and its `args` in the tool's own schema. Shown
    to clients, not enforced by LangGraph: the approve step reads the answer (approval_answer.py)."""
    message = {"type": "string"}
    branches = {
        "approve": _decision("approve", {}, []),
        "edit": _decision("edit", {"edited_action": {
            "type": "object", "properties": {"name": {"const": request["name"]},
                                             "args": dict(args_schema or {"type": "object"})},
            "required": ["name", "args"]}}, ["edited_action"]),
        "reject": _decision("reject", {"message": message}, []),
        "respond": _decision("respond", {"message": message}, ["message"])}
    chosen = [branches[kind] for kind in request["decisions"] if kind in branches]
    return chosen[0] if len(chosen) == 1 else {"oneOf": chosen, "discriminator": {"propertyName": "type"}}


def _decision(kind: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"title": f"{kind.capitalize()}Decision", "type": "object",
            "properties": {"type": {"const": kind}, **properties}, "required": ["type", *required]}


def is_approval_request(value: Any) -> bool:
    """Whether an interrupt's value is an approval request, batched or per call."""
    return isinstance(value, Mapping) and (
        ("action_requests" in value and "review_configs" in value) or value.get("type") == TOOL_APPROVAL)


def requested_calls(value: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The calls a request asks about, in order: `{"name", "args", "description", "allowed_decisions"}` each."""
    if value.get("type") == TOOL_APPROVAL:
        return [{"name": value.get("name"), "args": value.get("args"), "description": value.get("description", ""),
                 "allowed_decisions": ["approve", "edit", "reject", "respond"]}]
    configs = value.get("review_configs") or []
    return [{**{k: action.get(k) for k in ("name", "args")}, "description": action.get("description", ""),
             "allowed_decisions": list(config.get("allowed_decisions") or ())}
            for action, config in zip(value.get("action_requests") or [], configs, strict=False)]


def answer_with(value: Mapping[str, Any], decisions: list[dict[str, Any]]) -> Any:
    """The resume value that gives these decisions (one per requested call, in order) to this request."""
    return decisions[0] if value.get("type") == TOOL_APPROVAL else {"decisions": decisions}
