"""Tools that return a `Command`: what the graph does with its `update` and `goto` (the gateway's side, which
keeps the Command on the call's record, is tools/commands.py).

As LangGraph's `ToolNode` applies them: the update goes through the state's reducers, the updates of the calls of
one reply combined, and the update's `ToolMessage` for the call is the call's answer (the observation, shown to
the model framed as tool output like any other). Where ours differ, for the loop's sake (docs/tools-and-gateway.md):
- `act` checks the Command against the graph (`CommandRules`) and refuses it whole, in one line the model reads
  (an `error` observation), when it names a field the state does not have, one of the graph's own bookkeeping
  fields (`PROTECTED`), a message other than its own ToolMessage, a `goto` that is no node of ours, a parent
  graph (`Command.PARENT`) or a `resume`. Nothing of a refused Command is applied; the run goes on.
- `act` does not write the update itself: it rides on the call's ToolMessage (its gateway facts) to `observe`,
  the round's one join, which applies every call's update at once, in the reply's call order. A field without a
  reducer takes one value per step: where LangGraph's ToolNode then fails the run (InvalidUpdateError), a second
  call setting it is refused in one line and the first call's value stands.
- `goto` names where the loop goes after the round (`tool_goto`, read by the routers after observe), within the
  budgets and the iteration limit; the round itself (observe, its step records) always completes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage
from langgraph.channels import LastValue
from langgraph.constants import END
from langgraph.types import Command, Send

from reactgraph.tools import ToolResult
from reactgraph.tools.commands import update_messages

# The fields a tool's Command may not set, and why: they are the graph's own record of the turn, which its routers
# and closing step read to decide the loop and the honest status. A tool's output is untrusted data; a tool that
# could write them would lift a budget (usage, budget, stop_reason), skip the iteration limit (iteration), forge
# the record or the answer (steps, status, final_answer, coverage, reflection, structured_response), approve its
# own calls (approvals), swap the model (active_model), rewrite what the session remembers (summary, turn_id),
# or move Plan-and-Solve's plan and Reflexion's trials under their nodes' feet. What is left of our schemas is
# `messages` (the call's own ToolMessage only) and `lessons` (the caller's input the prompt shows as notes);
# a user's own state fields are settable.
PROTECTED = frozenset({
    # every graph (nodes/state.py AgentState)
    "turn_id", "iteration", "steps", "reflection", "final_answer", "status", "stop_reason", "coverage", "usage",
    "budget", "approvals", "structured_response", "active_model", "summary",
    # Plan-and-Solve (nodes/plan_solve_state.py)
    "plan", "cursor", "step_rounds", "step_results", "avoid_tools", "replans", "plan_parts",
    # Reflexion (nodes/reflexion.py)
    "expected", "checker", "checker_params", "criteria", "trial", "evaluation", "trajectory",
})

# Where a tool's goto may lead, per graph: our nodes by name, and LangChain's names for them ("model" and
# create_react_agent's "agent" are the model's turn, "end" and END the closing step: the turn still ends with its
# answer, status and memory). Going to act again (LangChain's "tools") would run the same reply's calls twice.
REACT_GOTO: Mapping[str, str] = {"think": "think", "model": "think", "agent": "think", "reflect": "reflect",
                                 "finalize": "finalize", "end": "finalize", END: "finalize"}
PLAN_SOLVE_GOTO: Mapping[str, str] = {"execute_step": "execute_step", "model": "execute_step",
                                      "agent": "execute_step", "solve": "solve", "end": "solve", END: "solve"}


@dataclass(frozen=True, slots=True)
class CommandRules:
    """What a tool's Command may do in one graph: its state's fields, which of them take one value per step
    (no reducer), and the names its goto may give."""

    fields: frozenset[str]
    once: frozenset[str]
    goto: Mapping[str, str]

    @classmethod
    def of(cls, channels: Mapping[str, Any], goto: Mapping[str, str]) -> CommandRules:
        """The rules of a graph from its builder's channels (`StateGraph.channels`)."""
        return cls(fields=frozenset(channels), goto=goto,
                   once=frozenset(name for name, channel in channels.items() if isinstance(channel, LastValue)))

    @property
    def settable(self) -> list[str]:
        return sorted(self.fields - PROTECTED)


def _refused(name: str, why: str) -> str:
    return f"Tool {name}'s Command was refused ({why}): nothing of its update or goto was applied."


def _goto_refusal(goto: Any, rules: CommandRules) -> str | None:
    given = [goto] if isinstance(goto, (str, Send)) else list(goto or ())
    targets = [t for t in given if isinstance(t, str)]
    if len(targets) < len(given):
        return "its goto sends a Send: a tool's goto may only name the node the loop goes to next"
    unknown = [t for t in targets if t not in rules.goto]
    if unknown:
        return f"its goto {unknown[0]!r} names no node of this graph; it may name {', '.join(sorted(rules.goto))}"
    if len({rules.goto[t] for t in targets}) > 1:
        return f"its goto names several nodes ({', '.join(targets)}); the loop goes to one"
    return None


def _message_refusal(command: Command[Any], call_id: str) -> str | None:
    messages = update_messages(command)
    if messages is None:
        return "its update's messages are not messages"
    others = [m for m in messages if not (isinstance(m, ToolMessage) and m.tool_call_id == call_id)]
    if others or len(messages) > 1:
        # another message would speak in the conversation as the user, the model or the system (or answer another
        # call, or remove the history), and a tool's output is untrusted data
        return "its update may add only its own ToolMessage to messages"
    return None


def refusal(result: ToolResult, rules: CommandRules) -> str | None:
    """Why this call's Command cannot be applied in this graph, in one line (None: it can)."""
    command = result.command
    if command.graph is not None:
        return _refused(result.name, "Command.PARENT: this graph's tools update this graph's state, and a handoff "
                                     "out of the round would leave the turn without its answer and status")
    if command.resume is not None:
        return _refused(result.name, "a resume value answers an interrupt, not a tool call")
    update = dict(command.update or {})
    for key in update:
        if key not in rules.fields:
            return _refused(result.name, f"the graph's state has no field {key!r}; a tool may set: "
                                         f"{', '.join(rules.settable)}")
        if key in PROTECTED:
            return _refused(result.name, f"{key!r} is the graph's own bookkeeping, which a tool may not set")
    why = _message_refusal(command, result.call_id) if "messages" in update else None
    why = why or (_goto_refusal(command.goto, rules) if command.goto else None)
    return _refused(result.name, why) if why else None


def stash(result: ToolResult, rules: CommandRules) -> dict[str, Any]:
    """The accepted Command as it rides on the call's ToolMessage to observe: the update (its ToolMessage is the
    message itself), which of its fields take one value per step, and the node its goto names."""
    command = result.command
    update = {key: value for key, value in (command.update or {}).items() if key != "messages"}
    kept: dict[str, Any] = {}
    if update:
        kept["update"], kept["once"] = update, sorted(rules.once.intersection(update))
    if command.goto:
        targets = [command.goto] if isinstance(command.goto, str) else list(command.goto)
        kept["goto"] = rules.goto[targets[0]]
    return kept


def refused_message(message: ToolMessage, why: str) -> ToolMessage:
    """The call's answer when its Command is refused: the refusal as an error observation (the call itself ran)."""
    facts = {key: value for key, value in message.response_metadata.get("gateway", {}).items() if key != "command"}
    return message.model_copy(update={"content": why, "status": "error",
                                      "response_metadata": {**message.response_metadata,
                                                            "gateway": {**facts, "status": "error"}}})


def with_command(message: ToolMessage, result: ToolResult, rules: CommandRules) -> ToolMessage:
    """act's answer to a call whose tool returned a Command: refused in one line, or carrying it to observe."""
    if why := refusal(result, rules):
        return refused_message(message, why)
    if not (kept := stash(result, rules)):
        return message
    facts = {**message.response_metadata.get("gateway", {}), "command": kept}
    return message.model_copy(update={"response_metadata": {**message.response_metadata, "gateway": facts}})


def _command_of(message: BaseMessage) -> dict[str, Any] | None:
    facts = (message.response_metadata or {}).get("gateway")
    command = facts.get("command") if isinstance(facts, dict) else None
    return command if isinstance(command, dict) else None


def apply_round(messages: Sequence[ToolMessage], order: Sequence[str]) -> tuple[list[ToolMessage], list[Command]]:
    """observe's part: the round's messages with each Command's update taken off (or the call refused, when a field
    that takes one value per step was set by an earlier call of the round), and the updates to write, in the reply's
    call order. Messages not changed are returned as they are (the same objects)."""
    position = {call_id: index for index, call_id in enumerate(order)}
    settled = list(messages)
    writes: list[Command] = []
    taken: dict[str, str] = {}  # a field that takes one value per step → the call that set it
    for index in sorted(range(len(settled)), key=lambda i: position.get(settled[i].tool_call_id, len(order))):
        message = settled[index]
        command = _command_of(message)
        if command is None or "update" not in command:
            continue
        clash = [key for key in command.get("once", ()) if key in taken]
        if clash:
            settled[index] = refused_message(message, _refused(message.name or "tool", (
                f"{clash[0]!r} takes one value per step and call {taken[clash[0]]} of this round already set it")))
            continue
        taken.update(dict.fromkeys(command.get("once", ()), message.tool_call_id))
        writes.append(Command(update=command["update"]))
        rest = {key: value for key, value in command.items() if key == "goto"}
        facts = {**message.response_metadata["gateway"], "command": rest} if rest else \
            {k: v for k, v in message.response_metadata["gateway"].items() if k != "command"}
        settled[index] = message.model_copy(update={"response_metadata": {**message.response_metadata,
                                                                          "gateway": facts}})
    return settled, writes


def tool_goto(messages: Iterable[BaseMessage]) -> set[str]:
    """The nodes the round's accepted Commands name as the next (empty: the loop goes its usual way)."""
    return {str(command["goto"]) for message in messages
            if (command := _command_of(message)) is not None and command.get("goto")}
