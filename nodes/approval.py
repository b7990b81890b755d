"""Approval of tool calls: `approve` pauses the graph (LangGraph `interrupt`) for a person to approve, edit,
reject or answer the calls of the last model reply that the gateway says need approval; it runs between the
model's reply and `act`.

The interrupt speaks LangChain's human-in-the-loop format (`HumanInTheLoopMiddleware`), which LangChain's
frontend docs and agent-chat-ui are written for. Batched (`Context.approval_mode`, the default), one interrupt
for every call of a reply that needs approval:
    {"action_requests": [{"name", "args", "description"}, ...],
     "review_configs": [{"action_name", "allowed_decisions"}, ...]}
answered with `{"decisions": [decision, ...]}`, one per action request, in order. Per call, one interrupt per
call, in the reply's order:
    {"type": "tool_approval", "tool_call_id", "name", "args", "description"}
answered with one decision. A decision is one of:
- approve, `{"type": "approve"}`: the call runs as the model made it.
- edit, `{"type": "edit", "edited_action": {"name", "args"}}`: the call runs with the person's tool and arguments
  instead, through the whole gateway pipeline (the permission check included). A per-call edit keeps the tool
  (as LangChain's does); a batched one may name another tool, and when that tool itself asks for approval it is
  asked about again in a second interrupt: an edit is never a way around a tool's policy. The model's reply is
  rewritten to the edited call (same id), and the result says what the person changed, so the model does not
  retry the original.
- reject, `{"type": "reject", "message": "..."}` (message optional): the call is not run; the model reads the
  message as the call's result.
- respond, `{"type": "respond", "message": "..."}`: the call is not run; the person's text is its result (for
  calls whose real answer is a person's).
Each decision's type must be among the request's `allowed_decisions`; keys LangChain does not read are ignored,
as it ignores them. The previous release's answers (`{"decision": ...}`, or a mapping from call id to one) are
still read for one release, with a DeprecationWarning. Anything else is not guessed at: the request is put again
with an "error" naming the problem (its descriptions start with it, so a person sees why it is asked again), at
most `MAX_ASKS` times, after which the calls still undecided are rejected.

Decisions are recorded as step records (node "approve", status approved | edited | rejected | responded) and
sent on the `custom` stream as gateway events (approval_requested, approval_decided). Clients (the CLI,
sessions, evals) read requests with `is_approval_request` / `requested_calls` and answer with `answer_with`,
whichever mode the run uses.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphInterrupt
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from reactgraph.errors import ReactGraphError
from reactgraph.nodes import budget
from reactgraph.nodes.context import Context, context_of
from reactgraph.nodes.conversation import last_ai, latest_tool_messages, pending_calls
from reactgraph.nodes.driver import AgentServices
from reactgraph.nodes.state import AgentState, Approvals, approvals_of, iteration_of, make_step, usage_of
from reactgraph.nodes.tool_round import gateway_facts
from reactgraph.tools import ToolSession, untrusted
from reactgraph.tools.call import emit
from reactgraph.tools.guards import describe_call
from reactgraph.tools.meta import APPROVAL_DECISIONS, ApprovalDecision
from reactgraph.tools.untrusted import terminal_safe

# --- a decision, whichever format it came in ----------------------------------------------------------------

MAX_REASON_CHARS = 1000  # a rejection's reason goes into the model's next prompt
MAX_RESPONSE_CHARS = 10_000  # a respond's text is the call's result (observe still cuts it to the budget)
MAX_NAME_CHARS = 100


@dataclass(frozen=True)
class Decision:
    """One person's decision on one call."""

    kind: ApprovalDecision
    name: str | None = None  # edit: the tool to call instead (None: the same tool)
    args: dict[str, Any] = field(default_factory=dict)  # edit: the arguments to call it with
    message: str = ""  # reject: why, shown to the model; respond: the call's result


class BadAnswer(ReactGraphError, ValueError):
    """An answer that is not one of the accepted shapes; the message says what was wrong and what is accepted."""



# --- the request, in LangChain's HITL format ----------------------------------------------------------------

TOOL_APPROVAL = "tool_approval"  # the per-call interrupt value's "type", as LangChain names it


def describe(request: Mapping[str, Any], error: str = "") -> str:
    """What the person reads: why the call asks, the tool and its arguments (as LangChain's default does), after
    the problem with the last answer if there was one."""
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
    to clients, not enforced by LangGraph: the approve step reads the answer (`read_answer`)."""
    message = {"type": "string"}
    branches = {
        "approve": _decision_branch("approve", {}, []),
        "edit": _decision_branch("edit", {"edited_action": {
            "type": "object", "properties": {"name": {"const": request["name"]},
                                             "args": dict(args_schema or {"type": "object"})},
            "required": ["name", "args"]}}, ["edited_action"]),
        "reject": _decision_branch("reject", {"message": message}, []),
        "respond": _decision_branch("respond", {"message": message}, ["message"])}
    chosen = [branches[kind] for kind in request["decisions"] if kind in branches]
    return chosen[0] if len(chosen) == 1 else {"oneOf": chosen, "discriminator": {"propertyName": "type"}}


def _decision_branch(kind: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
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



# --- the previous release's answers -------------------------------------------------------------------------

ACCEPTED = ('{"decision": "approve"}, {"decision": "edit", "name": ..., "args": {...}}, '
            '{"decision": "reject", "reason": "..."}, or a mapping from call id to one of these')


def is_legacy(answer: Any, call_ids: list[str]) -> bool:
    """Whether an answer is in the old shape: a decision, or a mapping with a call id among its keys."""
    return _is_decision(answer) or (isinstance(answer, Mapping) and any(key in call_ids for key in answer))


def read_legacy(answer: Any, call_ids: list[str]) -> dict[str, Decision]:
    """A decision per call id, or `BadAnswer`. One decision applies to every call; a mapping must decide each
    call asked about and nothing else."""
    if _is_decision(answer):
        one = _legacy_decision(answer, "the answer")
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
    return {call_id: _legacy_decision(answer[call_id], f"call {call_id!r}") for call_id in call_ids}


def _is_decision(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, Mapping) and "decision" in value)


def _legacy_decision(value: Any, where: str) -> Decision:
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
        return _legacy_edit(value, where)
    return Decision("approve")


def _legacy_edit(value: Mapping[str, Any], where: str) -> Decision:
    name, args = value.get("name"), value.get("args")
    if name is not None and (not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS):
        raise BadAnswer(f"{where}: edit's name must be a tool name (1 to {MAX_NAME_CHARS} characters)")
    if not isinstance(args, Mapping):
        raise BadAnswer(f"{where}: edit needs args, a mapping of the tool's arguments")
    return Decision("edit", name=name.strip() if name else None, args=dict(args))


_KEYS: dict[Any, set[str]] = {"approve": {"decision"}, "reject": {"decision", "reason"},
                              "edit": {"decision", "name", "args"}}



# --- reading the answer -------------------------------------------------------------------------------------

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



# --- approve ------------------------------------------------------------------------------------------------

MAX_ASKS = 5  # interrupts per request (a reply's, or a call's per call): edit rounds and answers not understood


def calls_to_run(state: AgentState, context: Context) -> tuple[AIMessage | None, list[dict[str, Any]]]:
    """The last reply and its calls that will be sent to `act` to run: not yet answered, well-formed, and
    within the budgets (a call a budget cuts is answered "not run" without anyone being asked)."""
    messages = state["messages"]
    reply = last_ai(messages)
    calls = pending_calls(reply)
    answered = {m.tool_call_id for m in latest_tool_messages(messages)}
    cuts = budget.calls_cut(usage_of(state), context, len(calls))
    return reply, [call for call, cut in zip(calls, cuts, strict=True)
                   if cut is None and "parse_error" not in call and call["id"] not in answered]


def approvals_for(state: AgentState, reply: AIMessage | None) -> Approvals:
    """The approval outcome recorded for this reply, or an empty one (nothing approved, no notes)."""
    recorded = approvals_of(state)
    if reply is None or recorded is None or recorded.get("message_id") != reply.id:
        return Approvals(message_id=reply.id if reply is not None else None, approved=[], notes={})
    return recorded


def approval_check(services: AgentServices):
    """For the routers: whether any call of the last reply that will run needs a person's approval first."""

    def needs_approval(state: AgentState, context: Context) -> bool:
        session = services.session(context, None)  # approval depends on the Context's settings, not the thread
        _reply, calls = calls_to_run(state, context)
        return any(services.gateway.approval_request(call, session) for call in calls)

    return needs_approval


@dataclass
class _Round:
    """What the approve step decides on, and what it has decided so far."""

    runtime: Runtime[Context]
    services: AgentServices
    session: ToolSession
    current: dict[str, dict[str, Any]]  # call id → the call as it will run (edits replace it)
    decided: dict[str, Decision] = field(default_factory=dict)  # call id → the last decision on it
    approved: set[str] = field(default_factory=set)


def make_approve(services: AgentServices):
    """The approve node of a graph whose tool calls go through `services.gateway`."""

    def approve(state: AgentState, runtime: Runtime[Context], config: RunnableConfig) -> dict[str, Any]:
        context = context_of(runtime)
        session = services.session(context, config)
        reply, calls = calls_to_run(state, context)
        round_ = _Round(runtime, services, session, {call["id"]: call for call in calls})
        requests = [request for call in calls if (request := services.gateway.approval_request(call, session))]
        per_call = context.approval_mode == "per_call"
        for group in ([[request] for request in requests] if per_call else [requests] if requests else []):
            _settle(round_, group, per_call)
        return _update(state, reply, round_)

    return approve


def _settle(round_: _Round, requests: list[dict[str, Any]], per_call: bool) -> None:
    """Ask about these calls until each is decided (an edit into another tool that asks is asked about again),
    at most MAX_ASKS times; the ones still undecided then are rejected."""
    error = ""
    for _ in range(MAX_ASKS):
        if not requests:
            return
        answer = _ask(round_, requests, error, per_call)
        try:
            decisions = read_answer(answer, requests, per_call=per_call)
        except BadAnswer as exc:
            error = str(exc)
            continue
        error, requests = "", _apply(decisions, requests, round_)
    for request in requests:
        round_.decided[request["id"]] = Decision(
            "reject", message=f"no valid decision after {MAX_ASKS} answers ({error or 'edit rounds'})")


def _ask(round_: _Round, requests: list[dict[str, Any]], error: str, per_call: bool) -> Any:
    """Pause for a person (or, on resume, return their answer); the request event is sent when it pauses."""
    try:
        if not per_call:
            return interrupt(hitl_request(requests, error))
        meta = round_.services.gateway.registry.get(requests[0]["name"])
        args_schema = meta.openai_schema()["function"].get("parameters") if meta is not None else None
        return interrupt(tool_approval_request(requests[0], error),
                         response_schema=decision_schema(requests[0], args_schema))
    except GraphInterrupt:
        for request in requests:
            _event(round_.runtime, "approval_requested", request["name"], request["id"], reason=request["reason"])
        raise


def _apply(decisions: dict[str, Decision], requests: list[dict[str, Any]], round_: _Round) -> list[dict[str, Any]]:
    """Record each decision; return the requests for edited calls that need approval of their own."""
    again = []
    for request in requests:
        decision = decisions[request["id"]]
        round_.decided[request["id"]] = decision
        if decision.kind == "approve":
            round_.approved.add(request["id"])
        elif decision.kind == "edit":
            edited = {**round_.current[request["id"]], "name": decision.name or request["name"],
                      "args": decision.args}
            round_.current[request["id"]] = edited
            follow_up = round_.services.gateway.approval_request(edited, round_.session)
            if follow_up is not None and edited["name"] != request["name"]:
                again.append({**follow_up, "reason": f"edited from {request['name']}: {follow_up['reason']}"})
            else:  # the person wrote this call for this tool: the edit is their approval of it
                round_.approved.add(request["id"])
    return again


def _update(state: AgentState, reply: AIMessage | None, round_: _Round) -> dict[str, Any]:
    iteration, current, approved = iteration_of(state), round_.current, round_.approved
    original = {call["id"]: call for call in pending_calls(reply) if "parse_error" not in call}
    messages: list[Any] = []
    steps, notes = [], {}
    for call_id, decision in round_.decided.items():
        call, asked = current[call_id], original.get(call_id, current[call_id])
        edited = call["name"] != asked["name"] or call.get("args") != asked.get("args")
        status = ("responded" if decision.kind == "respond" else "edited" if call_id in approved and edited
                  else "approved" if call_id in approved  # approve and edit add to it
                  else "rejected")  # a reject, or an edit still awaiting its second yes
        if status in ("rejected", "responded"):
            messages.append(_answer(call_id, asked["name"], status, decision))
        elif edited:
            notes[call_id] = (f"[A person edited this call before it ran; the model had asked for "
                              f"{asked['name']}({_compact(asked.get('args'))}).]")
        steps.append(make_step(step=iteration, node="approve", action=call["name"], action_input=call.get("args"),
                               status=status, observation=_describe(status, asked, decision)))
        _event(round_.runtime, "approval_decided", call["name"], call_id, decision=status,
               **({"reason": decision.message} if decision.kind == "reject" else {}))
    if reply is not None and any(current[i] != original.get(i, current[i]) for i in current):
        # The reply shows the calls that ran (same message id: add_messages replaces it in place).
        messages.insert(0, reply.model_copy(update={"tool_calls": [
            {**c, **({"name": current[c["id"]]["name"], "args": current[c["id"]]["args"]} if c["id"] in current
                     else {})} for c in reply.tool_calls]}))
    return {"messages": messages, "steps": steps,
            "approvals": Approvals(message_id=reply.id if reply is not None else None, approved=sorted(approved),
                                   notes=notes)}


def _answer(call_id: str, name: str, status: str, decision: Decision) -> ToolMessage:
    """The result of a call that does not run: the person's text (respond), or why it was rejected."""
    if status == "responded":
        return ToolMessage(decision.message, tool_call_id=call_id, name=name, status="success",
                           response_metadata=gateway_facts("responded", 0.0, 0))
    reason = decision.message if decision.kind == "reject" else "not approved"
    return ToolMessage(untrusted.rejected(name, reason), tool_call_id=call_id, name=name, status="error",
                       response_metadata=gateway_facts("rejected", 0.0, 0))


def _describe(status: str, asked: dict[str, Any], decision: Decision) -> str:
    if status == "rejected":
        return f"rejected: {decision.message or 'no reason given'}"
    if status == "edited":
        return f"edited from {asked['name']}({_compact(asked.get('args'))})"
    if status == "responded":
        return f"responded: {decision.message[:200]}"
    return "approved"


def _compact(args: Any) -> str:
    text = json.dumps(args, ensure_ascii=False, default=str, sort_keys=True)
    return text if len(text) <= 200 else text[:199] + "…"


def _event(runtime: Runtime[Context], event: str, name: str, call_id: str, **fields: Any) -> None:
    """An approval event on the `custom` stream, in the gateway events' shape (see `emit`)."""
    emit(runtime.stream_writer, name, call_id, event, **fields)
