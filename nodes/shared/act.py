"""`act`: run one tool call of the last model reply through the gateway (the calls of a reply run concurrently)."""

from __future__ import annotations

from typing import Any, TypedDict

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda

from reactgraph.nodes.shared.context import Context, current_context
from reactgraph.nodes.shared.services import AgentServices
from reactgraph.nodes.shared.sync_bridge import run_sync
from reactgraph.tools import ToolResult, ToolSession, ToolStatus, observations


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


class ToolCallTask(TypedDict):
    """What one `act` task receives: a single tool call of the model's last reply."""

    call: dict[str, Any]


def make_act(services: AgentServices) -> RunnableLambda:
    """The act node (sync and async): one task per tool call, fanned out by `Send` from the router.

    One task per call (rather than one task for all calls) is what makes a run durable at the level of
    a single call: LangGraph saves each finished task's writes at once, so after a crash only the calls
    that had not finished run again.
    """

    def prepare(task: ToolCallTask, config: RunnableConfig) -> tuple[dict[str, Any], ToolSession]:
        # Read the runtime here, not inside the coroutine: the sync path runs it on the bridge's loop.
        context: Context = current_context()
        return task["call"], services.session(context, config)

    async def execute(call: dict[str, Any], session: ToolSession) -> dict[str, Any]:
        if "parse_error" in call:
            return {"messages": [to_message(unparsable_result(call))]}
        return {"messages": [to_message(await services.gateway.execute(call, session))]}

    def act(task: ToolCallTask, config: RunnableConfig) -> dict[str, Any]:
        return run_sync(execute(*prepare(task, config)))

    async def aact(task: ToolCallTask, config: RunnableConfig) -> dict[str, Any]:
        return await execute(*prepare(task, config))

    return RunnableLambda(act, aact, name="act")
