"""`approve`: the graph pauses (LangGraph `interrupt`) for a person to approve, edit, reject or answer the tool
calls of the last model reply that the gateway says need approval; it runs between the model's reply and `act`.

The interrupt speaks LangChain's human-in-the-loop format (`HumanInTheLoopMiddleware`; hitl.py has the shapes):
batched (`Context.approval_mode`, the default), all such calls of one reply in one interrupt, answered with
`{"decisions": [...]}` in order; or per call, one interrupt per call in the reply's order, each answered with one
decision (approval_answer.py reads the answers).
- approve: the call runs as the model made it.
- edit: the call runs with the person's tool and arguments instead, through the whole gateway pipeline (the
  permission check included). An edit to *another* tool that itself asks for approval is asked about again in
  a second interrupt: an edit is never a way around a tool's policy. The model's reply is rewritten to the
  edited call (same id), and the result says what the person changed, so the model does not retry the original.
- reject: the call is not run; the model reads the message as the call's result.
- respond: the call is not run; the person's text is its result (for calls whose real answer is a person's).
An answer that is not understood is not guessed at: the request is put again with an "error" naming the
problem, at most `MAX_ASKS` times, after which the calls still undecided are rejected.

Decisions are recorded as step records (node "approve", status approved | edited | rejected | responded) and
sent on the `custom` stream as gateway events (approval_requested, approval_decided).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphInterrupt
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from reactgraph.nodes import budget
from reactgraph.nodes.context import Context, context_of
from reactgraph.nodes.conversation import last_ai, latest_tool_messages, pending_calls
from reactgraph.nodes.driver import AgentServices
from reactgraph.nodes.state import AgentState, Approvals, approvals_of, iteration_of, make_step, usage_of
from reactgraph.nodes.tool_round.approval_answer import read_answer
from reactgraph.nodes.tool_round.decision import BadAnswer, Decision
from reactgraph.nodes.tool_round.gateway_facts import gateway_facts
from reactgraph.nodes.tool_round.hitl import decision_schema, hitl_request, tool_approval_request
from reactgraph.tools import ToolSession, observations
from reactgraph.tools.pipeline import emit

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
    return ToolMessage(observations.rejected(name, reason), tool_call_id=call_id, name=name, status="error",
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
