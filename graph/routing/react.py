"""Where the ReAct graph goes after think, after a tool round and after reflect."""

from __future__ import annotations

from typing import Literal

from langgraph.runtime import Runtime
from langgraph.types import Send

from reactgraph.graph.routing.tool_round import ApprovalCheck, ReadsState, act_tasks
from reactgraph.nodes import budget
from reactgraph.nodes.context import Context, context_of
from reactgraph.nodes.conversation import last_ai, latest_tool_messages, pending_calls
from reactgraph.nodes.state import AgentState, has_failed, iteration_of, usage_of, verdict_of
from reactgraph.nodes.tool_commands import tool_goto


def after_think(state: AgentState, runtime: Runtime[Context], approval: ApprovalCheck | None = None,
                reads_state: ReadsState | None = None) -> list[Send] | Literal["approve", "observe", "finalize"]:
    """Each tool call goes to its own act task (run concurrently), by way of approve when a person must approve
    one of them first; a final answer or failure goes to finalize. Calls a middleware's `after_model` answered
    itself (LangChain's ToolCallLimit, HITL's rejections) get no task; when it answered them all, their answers
    are observed as a round's results (graph/middleware.py)."""
    if has_failed(state):
        return "finalize"
    reply = last_ai(state["messages"])
    calls = pending_calls(reply)
    context = context_of(runtime)
    if calls and approval is not None and approval(state, context):
        return "approve"
    if tasks := act_tasks(state, context, calls, reads_state):
        return tasks
    return "observe" if calls and state["messages"][-1] is not reply else "finalize"


def after_round(state: AgentState, runtime: Runtime[Context]) -> Literal["reflect", "think", "finalize"]:
    """A round's results to reflect on, unless a budget ran out (reflecting may call the model); where a tool's
    Command said where to go (tool_commands.py), there: finalize, or think within the iteration limit (the
    reflection is skipped, as LangChain's jump to the model skips what lies between)."""
    context = context_of(runtime)
    if budget.exhausted(usage_of(state), context):
        return "finalize"
    goto = tool_goto(latest_tool_messages(state["messages"]))
    if "finalize" in goto:  # of several calls' gotos, ending the loop wins: a tool said the work is done
        return "finalize"
    if "think" in goto:
        return "finalize" if iteration_of(state) >= context.max_iterations else "think"
    return "reflect"


def after_reflect(state: AgentState, runtime: Runtime[Context]) -> Literal["think", "finalize"]:
    """Back to think, unless the iteration limit is reached, a budget ran out, a call repeated itself, or the
    verdict says done."""
    context = context_of(runtime)
    verdict = verdict_of(state)
    if iteration_of(state) >= context.max_iterations or budget.exhausted(usage_of(state), context):
        return "finalize"
    if verdict is not None and (verdict["repeated_call"] or verdict["enough_information"]):
        return "finalize"
    return "think"
