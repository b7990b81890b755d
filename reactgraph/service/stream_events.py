"""What a worker streams for a run: LangGraph's chunks as the events of the Agent Server, named and shaped as
langgraph-api sends them (so langgraph-sdk, `RemoteGraph` and Studio read them unchanged).

- a mode the client asked for is an event of its name, `mode|ns…` for a subgraph's when it asked for subgraphs;
- `messages-tuple`: LangGraph's `messages` chunks, `[message, metadata]`, as the event `messages`;
- `messages`: each message's metadata once (`messages/metadata`), then the message so far on each chunk
  (`messages/partial`) or whole (`messages/complete`) — never namespaced, as langgraph-api sends them;
- `events`: the graph run through `astream_events(version="v2")`; every callback event but the root graph's own
  stream chunks (which are the other modes' events) is an `events` event.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from langchain_core.messages import BaseMessage, BaseMessageChunk, message_chunk_to_message

HIDDEN_TAG = "langsmith:hidden"  # callback events LangChain marks as not for clients (langgraph-api drops them too)


class EventNames:
    """Turns one run's (namespace, mode, chunk) into its events, keeping what `messages` mode accumulates."""

    def __init__(self, requested: set[str], subgraphs: bool) -> None:
        self.requested, self.subgraphs = requested, subgraphs
        self._messages: dict[str, BaseMessage] = {}

    def events(self, namespace: tuple[str, ...], mode: str, chunk: Any) -> list[tuple[str, Any]]:
        if namespace and not self.subgraphs:
            return []
        if mode == "messages":
            if "messages-tuple" in self.requested:  # what langgraph-api prefers when both are asked for
                return [(_named("messages", namespace), list(chunk))]
            return self._whole_messages(chunk) if "messages" in self.requested else []
        return [(_named(mode, namespace), chunk)] if mode in self.requested else []

    def _whole_messages(self, chunk: Any) -> list[tuple[str, Any]]:
        message, metadata = chunk
        if not isinstance(message, BaseMessage) or not message.id:
            return []
        found: list[tuple[str, Any]] = []
        earlier = self._messages.get(message.id)
        if earlier is None:
            self._messages[message.id] = message
            found.append(("messages/metadata", {message.id: {"metadata": metadata}}))
        elif isinstance(earlier, BaseMessageChunk) and isinstance(message, BaseMessageChunk):
            self._messages[message.id] = earlier + message
        else:  # a whole message after its chunks (a node's output): it is the message now
            self._messages[message.id] = message
        kind = "messages/partial" if isinstance(message, BaseMessageChunk) else "messages/complete"
        found.append((kind, [message_chunk_to_message(self._messages[message.id])]))
        return found


def _named(mode: str, namespace: tuple[str, ...]) -> str:
    return f"{mode}|{'|'.join(namespace)}" if namespace else mode


def graph_modes(requested: list[str]) -> list[str]:
    """LangGraph's stream modes for the requested ones: both message modes are LangGraph's `messages`;
    `events` is no LangGraph mode (it is how the graph is run)."""
    modes = {"messages" if m in ("messages", "messages-tuple") else m for m in requested} - {"events"}
    return sorted(modes or {"values"})  # a run that asked only for `events` still runs its graph to the end


async def run_events(graph: Any, graph_input: Any, config: Mapping[str, Any], run_id: str, requested: list[str],
                     subgraphs: bool, **options: Any) -> AsyncIterator[tuple[str, Any]]:
    """(event name, data) for each event of the run `run_id`, in order."""
    names = EventNames(set(requested), subgraphs)
    modes = graph_modes(requested)
    if "events" not in requested:
        async for part in graph.astream(graph_input, dict(config), stream_mode=modes, subgraphs=subgraphs, **options):
            for event in names.events(*_split(part, subgraphs)):
                yield event
        return
    root = _uuid(run_id)  # the root graph's callback run id is the run's, as langgraph-api has it
    async for raw in graph.astream_events(graph_input, {**config, "run_id": root}, version="v2", stream_mode=modes,
                                          subgraphs=subgraphs, **options):
        if HIDDEN_TAG in (raw.get("tags") or []):
            continue
        if raw["event"] == "on_chain_stream" and str(raw.get("run_id")) == str(root):
            for event in names.events(*_split(raw["data"]["chunk"], subgraphs)):
                yield event
        else:
            yield "events", raw


def _split(part: Any, subgraphs: bool) -> tuple[tuple[str, ...], str, Any]:
    """LangGraph's stream part as (namespace, mode, chunk), with or without subgraphs."""
    if subgraphs:
        namespace, mode, chunk = part
        return tuple(namespace), mode, chunk
    mode, chunk = part
    return (), mode, chunk


def _uuid(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:  # a run id from Redis is input like any other: a run without one still streams
        return uuid.uuid4()
