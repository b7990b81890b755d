"""`act`: run one tool call of the last model reply through the gateway (the calls of a reply run concurrently)."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from reactgraph.nodes.context import Context
from reactgraph.nodes.driver import AgentServices, Await, Node, Steps, dual_node
from reactgraph.nodes.tool_round.gateway_facts import gateway_facts
from reactgraph.tools import ToolResult, ToolStatus, observations
from reactgraph.tools.injection import ToolInjection


def unparsable_result(call: dict[str, Any]) -> ToolResult:
    """A call whose arguments the provider could not parse never reaches the gateway; the model is told why."""
    return ToolResult(name=call["name"], call_id=call["id"], status=ToolStatus.INVALID_ARGS,
                      content=observations.invalid_args(call["name"] or "<unnamed tool>", call["parse_error"]))


def to_message(result: ToolResult) -> ToolMessage:
    return ToolMessage(
        content=result.content, tool_call_id=result.call_id, name=result.name,
        status="success" if result.ok else "error", artifact=result.artifact,  # the tool's own (content_and_artifact)
        # Kept beside the text so observe can build step records without re-parsing the observation.
        response_metadata=gateway_facts(result.status.value, round(result.latency_ms, 3), result.attempts),
    )


class ToolCallTask(TypedDict):
    """What one `act` task receives: a single tool call of the model's last reply."""

    call: dict[str, Any]
    # Set by the router when a budget does not allow this call: the call is answered with it, never run.
    not_run: NotRequired[str]
    # Set by the router for a call a person approved (or edited) in the approve step.
    approved: NotRequired[bool]
    # What a person changed in the call, put before its result so the model does not retry its own version.
    note: NotRequired[str]
    # The graph state, for a tool that asks for it (InjectedState, ToolRuntime); only then, it is not small.
    state: NotRequired[dict[str, Any]]


def not_run_message(call: dict[str, Any], why: str) -> ToolMessage:
    """The answer to a call a budget did not allow (status "not_run": no tool was called)."""
    return ToolMessage(content=why, tool_call_id=call["id"], name=call["name"], status="error",
                       response_metadata=gateway_facts("not_run", 0.0, 0))


def make_act(services: AgentServices) -> Node:
    """The act node: one task per tool call, fanned out by `Send` from the router.

    One task per call (rather than one task for all calls) is what makes a run durable at the level of
    a single call: LangGraph saves each finished task's writes at once, so after a crash only the calls
    that had not finished run again.
    """

    def act(task: ToolCallTask, runtime: Runtime[Context], config: RunnableConfig) -> Steps:
        call = task["call"]
        if why := task.get("not_run"):
            return {"messages": [not_run_message(call, why)], "usage": {"tool_calls_refused": 1}}
        if "parse_error" in call:
            return {"messages": [to_message(unparsable_result(call))]}
        # The gateway is async: awaited under ainvoke, run on the sync bridge under invoke (see node_driver).
        # Gateway events go to LangGraph's `custom` stream (its writer is a no-op when that is not streamed); the
        # writer is taken here, in the node's context, never looked up on the bridge's loop thread.
        injection = ToolInjection(state=task.get("state"), context=runtime.context, config=config,
                                  store=runtime.store, stream_writer=runtime.stream_writer)
        result = yield from Await(services.gateway.execute(call, services.session(runtime.context, config),
                                                           events=runtime.stream_writer,
                                                           approved=task.get("approved", False), injection=injection))
        if note := task.get("note"):
            result.content = f"{note}\n{result.content}"
        return {"messages": [to_message(result)]}

    return dual_node(act, name="act")
