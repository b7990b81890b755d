"""Tools that return LangGraph's `Command`: the gateway's side.

A LangChain tool may return `Command(update={…, "messages": [ToolMessage(…, tool_call_id=…)]}, goto=…)` to change
the graph's state (the pattern with `InjectedToolCallId`). The gateway runs it like any tool (approval, breaker,
timeout, retries, result limit) and answers its record with what LangGraph's `ToolNode` reads from it: the
observation is the text of the update's `ToolMessage` for this call, and the Command itself rides on the record
(`ToolResult.command`), never turned into text. What the update may change, and where `goto` may lead, is the
graph's to decide (nodes/tool_commands.py); under a host `ToolNode` (`GatewayTool`) the host applies it.

As `ToolNode` requires, a Command for the current graph must carry the call's `ToolMessage` in `update["messages"]`:
without it the conversation would hold a call with no answer, which every provider refuses. `ToolNode` raises
then; the gateway answers the call `error` with a line saying how to fix the tool (a broken tool, like one that
raised), and the loop goes on.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, ToolMessage, convert_to_messages

from reactgraph.tools import untrusted

if TYPE_CHECKING:
    from langgraph.types import Command

    from reactgraph.tools.call import ToolResult


def is_command(value: Any) -> bool:
    # Read from sys.modules: a tool can only have made a Command once langgraph was imported, and the CLI's
    # commands that run tools without a graph (`reactgraph tools`, `ingest`) must not import it (its start-up cost).
    types = sys.modules.get("langgraph.types")
    return types is not None and isinstance(value, types.Command)


def update_messages(command: Command[Any]) -> list[BaseMessage] | None:
    """The messages of a Command's dict update, as message objects (dicts converted, as ToolNode converts them);
    [] when it has none, None when they are not messages at all."""
    update = command.update
    raw = update.get("messages") if isinstance(update, Mapping) else None
    if raw is None:
        return []
    try:
        return convert_to_messages(raw if isinstance(raw, (list, tuple)) else [raw])
    except (TypeError, ValueError, NotImplementedError):  # the graph's check refuses them in one line
        return None


def own_message(command: Command[Any], call_id: str) -> ToolMessage | None:
    """The update's ToolMessage answering this call (None: the update has none, or no dict update at all)."""
    messages = update_messages(command) or []
    return next((m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == call_id), None)


def message_text(message: ToolMessage) -> str:
    """A ToolMessage's content as the text the model reads (content blocks: their text, else JSON)."""
    content = message.content
    if isinstance(content, str):
        return content
    return message.text or untrusted.render_value(content)


def missing_message(name: str, call_id: str) -> str:
    """The answer to a Command for this graph without the call's ToolMessage (ToolNode's rule, in one line)."""
    return (f"Tool {name} failed: it returned a Command whose update has no ToolMessage for this call "
            f"(tool_call_id {call_id!r}); every tool call needs one: return Command(update={{'messages': "
            f"[ToolMessage(..., tool_call_id=tool_call_id)], ...}}) with an InjectedToolCallId argument.")


def answer_command(call: ToolResult, command: Command[Any]) -> ToolResult:
    """Answer `call` with the tool's Command: its ToolMessage's text is the observation (status "error" when the
    tool's message says so: the tool reported its own failure), the Command is kept whole on the record."""
    from reactgraph.tools.call import ToolStatus

    if command.update is not None and not isinstance(command.update, Mapping):
        # ToolNode takes a list update only as the list of messages of a list-of-messages state; ours are dicts
        return call.answer(ToolStatus.ERROR, f"Tool {call.name} failed: its Command's update is a "
                                             f"{type(command.update).__name__}; this graph's state takes a dict "
                                             "update ({'messages': [ToolMessage(...)], 'field': value}).",
                           reason="command update not a dict")
    message = own_message(command, call.call_id)
    if message is None and command.graph is None:
        return call.answer(ToolStatus.ERROR, missing_message(call.name, call.call_id),
                           reason="command without its ToolMessage")
    text = message_text(message) if message is not None else ""
    status = ToolStatus.ERROR if message is not None and message.status == "error" else ToolStatus.OK
    call.answer(status, text, artifact=message.artifact if message is not None else None)
    call.command = command
    return call


def with_observation(command: Command[Any], call_id: str, content: str) -> Command[Any]:
    """The Command with its ToolMessage's content replaced by the observation the gateway settled (cut to the
    result limit), for a host `ToolNode` to apply."""
    message = own_message(command, call_id)
    if not isinstance(command.update, Mapping) or message is None or message_text(message) == content:
        return command
    messages = [m.model_copy(update={"content": content}) if isinstance(m, ToolMessage) and m.tool_call_id == call_id
                else m for m in update_messages(command) or []]
    from langgraph.types import Command

    return Command(graph=command.graph, update={**command.update, "messages": messages}, resume=command.resume,
                   goto=command.goto)
