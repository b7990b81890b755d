"""`act`: run every tool call of the last model reply through the gateway, concurrently."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.runtime import get_runtime

from nodes.context import Context
from nodes.services import AgentServices
from nodes.state import AgentState
from nodes.sync_bridge import run_sync
from nodes.transcript import last_ai, pending_calls
from tools import ToolResult, ToolSession, ToolStatus, observations


def unparsable_result(call: dict[str, Any]) -> ToolResult:
    """A call whose arguments the provider could not parse never reaches the gateway; the model is told why."""
    return ToolResult(name=call["name"], call_id=call["id"], status=ToolStatus.INVALID_ARGS,
                      content=observations.invalid_args(call["name"] or "<unnamed tool>", call["parse_error"]))


def to_message(result: ToolResult) -> ToolMessage:
    return ToolMessage(
        content=result.content, tool_call_id=result.call_id, name=result.name,
        status="success" if result.ok else "error",
        # Kept beside the text so observe can build step records without re-parsing the observation.
        artifact={"status": result.status.value, "latency_ms": round(result.latency_ms, 3),
                  "attempts": result.attempts},
    )


def make_act(services: AgentServices) -> RunnableLambda:
    """The act node (sync and async): tool results come back as ToolMessages in call order."""

    def prepare(state: AgentState, config: RunnableConfig) -> tuple[list[dict[str, Any]], ToolSession]:
        # Read the runtime here, not inside the coroutine: the sync path may run it on another thread.
        context: Context = get_runtime(Context).context
        return pending_calls(last_ai(state["messages"])), services.session(context, config)

    async def execute(calls: list[dict[str, Any]], session: ToolSession) -> dict[str, Any]:
        runnable = [c for c in calls if "parse_error" not in c]
        results = iter(await services.gateway.execute_many(runnable, session))
        ordered = [unparsable_result(c) if "parse_error" in c else next(results) for c in calls]
        return {"messages": [to_message(r) for r in ordered]}

    def act(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        return run_sync(execute(*prepare(state, config)))

    async def aact(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        return await execute(*prepare(state, config))

    return RunnableLambda(act, aact, name="act")
