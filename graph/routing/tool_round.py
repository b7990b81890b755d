"""Routing of the tool round every paradigm shares: one act task per tool call, within the budgets and the
approvals a person gave."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from langgraph.runtime import Runtime
from langgraph.types import Send

from reactgraph.nodes import budget
from reactgraph.nodes.approval import approvals_for
from reactgraph.nodes.context import Context, context_of
from reactgraph.nodes.conversation import last_ai, latest_tool_messages, pending_calls
from reactgraph.nodes.state import AgentState, usage_of
from reactgraph.nodes.tool_round import ToolCallTask

# Whether a reply's calls need a person's approval before they run (nodes/approval.py `approval_check`).
ApprovalCheck = Callable[[AgentState, Context], bool]
# Whether a tool asks for the graph state (InjectedState, ToolRuntime): `ToolGateway.reads_state`.
ReadsState = Callable[[str], bool]


def act_tasks(state: AgentState, context: Context, calls: list[dict],
              reads_state: ReadsState | None = None) -> list[Send]:
    """One act task per tool call; the calls beyond what the budgets allow go as "not run" tasks (each call
    still gets its answer, so the conversation stays well-formed), the ones that fit run as usual. Calls the
    approve step answered (rejected) get no task; the ones it let through carry its approval. A call of a tool
    that reads the state carries it (as LangGraph's ToolNode gets it: a task has no other view of the state)."""
    answered = {m.tool_call_id for m in latest_tool_messages(state["messages"])}
    decided = approvals_for(state, last_ai(state["messages"]))
    approved, notes = set(decided["approved"]), decided["notes"]
    tasks = []
    for call, cut in zip(calls, budget.calls_cut(usage_of(state), context, len(calls)), strict=True):
        if call["id"] in answered and call["id"]:
            continue
        task = ToolCallTask(call=call, not_run=budget.not_run_text(cut)) if cut else ToolCallTask(call=call)
        if call["id"] in approved:
            task["approved"] = True
            if note := notes.get(call["id"]):
                task["note"] = note
        if reads_state is not None and not cut and reads_state(call["name"]):
            task["state"] = dict(state)
        tasks.append(Send("act", task))
    return tasks


def after_approve(state: AgentState, runtime: Runtime[Context],
                  reads_state: ReadsState | None = None) -> list[Send] | Literal["observe"]:
    """The calls a person let through (and those needing no approval) to act; straight to observe when every
    call was rejected or answered by the person, so those are recorded and reflected on like any result."""
    reply = last_ai(state["messages"])
    return act_tasks(state, context_of(runtime), pending_calls(reply), reads_state) or "observe"
