"""The tool round every paradigm shares, after a model reply with tool calls: `act` runs the calls through the
tool gateway, `observe` records their results, and the loop guard judges the records.

`act` is one task per tool call, fanned out by `Send` from the router, so the calls of a reply run concurrently
and each finished call is checkpointed at once. Each result becomes a ToolMessage that keeps how the gateway
ended the call (status, latency, attempts; `approval: "edited"` for a call a person edited) in
`response_metadata["gateway"]`, so `observe` records the step without re-parsing the observation; the message's
`artifact` stays the tool's own. `observe` cuts each result to
the observation budget and records it as an `ExecutionStep`. The loop guard's checks are deterministic, read from
the step records alone: repeated calls (same tool, same arguments, same result), failures, empty findings; on a
repeat they are authoritative over a model's reflection. Asking a person before a call runs is approval.py's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NotRequired, TypedDict

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from langgraph.types import Command

from reactgraph.nodes import tool_commands
from reactgraph.nodes.context import Context, context_of
from reactgraph.nodes.conversation import last_ai, latest_tool_messages, pending_calls, tokens_of
from reactgraph.nodes.driver import AgentServices, Node, Steps, ToolRun, dual_node
from reactgraph.nodes.state import AgentState, ExecutionStep, ReflectionVerdict, iteration_of, make_step
from reactgraph.nodes.tool_commands import CommandRules
from reactgraph.tools import ToolResult, ToolStatus, untrusted
from reactgraph.tools.langchain_adapter import ToolInjection

# --- the gateway's facts on a result message ----------------------------------------------------------------

def gateway_facts(status: str, latency_ms: float, attempts: int) -> dict[str, Any]:
    """How the gateway ended a call, as a ToolMessage's `response_metadata` carries it (`facts_of` reads it)."""
    return {"gateway": {"status": status, "latency_ms": latency_ms, "attempts": attempts}}


def facts_of(message: ToolMessage) -> dict[str, Any]:
    """The gateway's facts of a result message ({} for one the gateway did not answer)."""
    facts = (message.response_metadata or {}).get("gateway")
    return facts if isinstance(facts, dict) else {}



# --- act ----------------------------------------------------------------------------------------------------

def unparsable_result(call: dict[str, Any]) -> ToolResult:
    """A call whose arguments the provider could not parse never reaches the gateway; the model is told why."""
    return ToolResult(name=call["name"], call_id=call["id"], status=ToolStatus.INVALID_ARGS,
                      content=untrusted.invalid_args(call["name"] or "<unnamed tool>", call["parse_error"]))


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


def make_act(services: AgentServices, rules: CommandRules) -> Node:
    """The act node: one task per tool call, fanned out by `Send` from the router.

    One task per call (rather than one task for all calls) is what makes a run durable at the level of
    a single call: LangGraph saves each finished task's writes at once, so after a crash only the calls
    that had not finished run again. `rules`: what a tool's `Command` may do in this graph (tool_commands.py).
    """

    def act(task: ToolCallTask, runtime: Runtime[Context], config: RunnableConfig) -> Steps:
        call = task["call"]
        if why := task.get("not_run"):
            return {"messages": [not_run_message(call, why)], "usage": {"tool_calls_refused": 1}}
        if "parse_error" in call:
            return {"messages": [to_message(unparsable_result(call))]}
        # Awaited under ainvoke, run on this node's thread under invoke (see driver.py). Gateway events go to
        # LangGraph's `custom` stream (its writer is a no-op when that is not streamed); the writer is taken here,
        # in the node's context, never looked up on another thread.
        injection = ToolInjection(state=task.get("state"), context=runtime.context, config=config,
                                  store=runtime.store, stream_writer=runtime.stream_writer)
        result = yield from ToolRun(services.gateway, call, services.session(runtime.context, config), {
            "events": runtime.stream_writer, "approved": task.get("approved", False), "injection": injection,
            "wraps": services.tool_wraps})
        if note := task.get("note"):
            result.content = f"{note}\n{result.content}"
        message = to_message(result)
        if note:  # the decision as a fact beside the note, as a rejected call's status is (approval.py)
            message.response_metadata["gateway"]["approval"] = "edited"
        if result.command is not None:  # refused in one line, or its update carried to observe on the message
            message = tool_commands.with_command(message, result, rules)
        return {"messages": [message]}

    return dual_node(act, name="act")



# --- observe ------------------------------------------------------------------------------------------------

def truncate(text: str, budget: int) -> str:
    """Cut an observation to the budget, saying how much was left out so the model knows it is partial."""
    if len(text) <= budget:
        return text
    return f"{text[:budget]}\n…[truncated: showing {budget} of {len(text)} characters]"


def _as_input(args: Any) -> dict[str, Any] | None:
    if args is None or isinstance(args, dict):
        return args
    return {"raw": str(args)[:500]}


def observe(state: AgentState, runtime: Runtime[Context]) -> dict[str, Any] | list[Any]:
    """Record one step per tool call of this round; over-budget results are replaced by truncated copies; the
    state updates of the tools that returned a `Command` are applied (one write each, through the reducers)."""
    update, writes, _ = observe_round(state, runtime)
    return [update, *writes] if writes else update


def observe_round(state: AgentState, runtime: Runtime[Context]) -> tuple[dict[str, Any], list[Command], set[str]]:
    """observe's update, the round's Command updates to write after it (in the reply's call order), and the nodes
    the round's accepted Commands name as the next (`tool_commands.tool_goto`)."""
    budget = context_of(runtime).observation_budget
    messages = state["messages"]
    reply = last_ai(messages)
    calls = {c["id"]: c for c in pending_calls(reply)}
    iteration = iteration_of(state)
    thought = reply.text.strip() if reply is not None else ""
    steps: list[ExecutionStep] = []
    shortened: list[ToolMessage] = []
    arrived = latest_tool_messages(messages)
    settled, writes = tool_commands.apply_round(arrived, list(calls))
    for position, (message, before) in enumerate(zip(settled, arrived, strict=True)):
        text = str(message.text)  # a plain str: the record is checkpointed
        shown = truncate(text, budget)
        if shown != text or message is not before:  # same id: add_messages replaces it
            shortened.append(message.model_copy(update={"content": shown}) if shown != text else message)
        facts = facts_of(message)
        steps.append(make_step(
            step=iteration, node="act", thought=thought, action=message.name,
            action_input=_as_input(calls.get(message.tool_call_id, {}).get("args")), observation=shown,
            status=facts.get("status") or ("ok" if message.status == "success" else "error"),
            latency_ms=facts.get("latency_ms", 0.0),
            tokens=tokens_of(reply) if position == 0 else 0,  # the model's tokens belong to the round, once
        ))
    update = {"steps": steps, "messages": shortened} if shortened else {"steps": steps}
    return update, writes, tool_commands.tool_goto(settled)



# --- the loop guard -----------------------------------------------------------------------------------------

def _call_key(step: ExecutionStep) -> str:
    return f"{step['action']}:{json.dumps(step['action_input'], sort_keys=True, ensure_ascii=False, default=str)}"


def tool_steps(steps: Sequence[ExecutionStep], iteration: int | None = None) -> list[ExecutionStep]:
    return [s for s in steps if s["node"] == "act" and (iteration is None or s["step"] == iteration)]


def repeated_calls(steps: Sequence[ExecutionStep], iteration: int) -> list[str]:
    """Calls of this round that repeat an earlier round's call (same tool, same arguments, same result)."""
    latest = tool_steps(steps, iteration)
    # Only an earlier call of the same tool with the same result can be a repeat: only those arguments are read.
    outcomes = {(s["action"], s["observation"]) for s in latest}
    earlier = {(_call_key(s), s["observation"]) for s in tool_steps(steps)
               if s["step"] < iteration and (s["action"], s["observation"]) in outcomes}
    return [s["action"] or "" for s in latest if (_call_key(s), s["observation"]) in earlier] if earlier else []


def found_nothing(step: ExecutionStep) -> bool:
    """A successful call whose result says it found nothing (the built-in tools answer `"found": false`)."""
    observation = step["observation"]
    if not isinstance(observation, str) or not observation.lstrip().startswith("{"):
        return False  # not a JSON object: no need to parse it to know
    try:
        data = json.loads(observation)
    except (ValueError, RecursionError):  # a tool's output, nested deeper than the parser goes, is no finding
        return False
    return isinstance(data, dict) and data.get("found") is False


def rules_verdict(steps: Sequence[ExecutionStep], iteration: int) -> ReflectionVerdict:
    """A verdict from the records alone: no model call, fully predictable."""
    latest = tool_steps(steps, iteration)
    failed = [s["action"] or "" for s in latest if s["status"] != "ok"]
    empty = [s["action"] or "" for s in latest if s["status"] == "ok" and found_nothing(s)]
    repeated = repeated_calls(steps, iteration)
    notes = []
    if repeated:
        notes.append(f"Repeated call to {', '.join(sorted(set(repeated)))} with no new information: stop repeating.")
    if failed:
        notes.append(f"{', '.join(failed)} failed: use another tool or different arguments.")
    if empty:
        notes.append(f"{', '.join(empty)} found nothing: rephrase the query or try another tool.")
    return ReflectionVerdict(enough_information=False, tool_error=bool(failed),
                             need_other_tool=bool(failed or empty), repeated_call=bool(repeated),
                             note=" ".join(notes))
