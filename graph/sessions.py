"""Running a question on a session: a new turn, the resumption of an interrupted one, or a fork; one turn
at a time per session (the session lease)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, cast

from langchain_core.messages import AIMessageChunk, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import RunControl
from langgraph.types import Command, Overwrite, StreamMode

from reactgraph.graph import GRAPH_METADATA
from reactgraph.graph.run_context import run_scope
from reactgraph.memory.session_id import check_session_id
from reactgraph.memory.session_lease import DEFAULT_WAIT_S, SessionLease, WaitNotice, session_lease
from reactgraph.nodes.approval import is_approval_request
from reactgraph.nodes.context import Context
from reactgraph.nodes.conversation import check_question, current_question

AnyGraph = CompiledStateGraph[Any, Any, Any, Any]  # any of the compiled graphs
UpdateSink = Callable[[str, dict[str, Any]], None]
# (node, text, reply id): a streamed model token; a new reply id means a new model call (another attempt).
TokenSink = Callable[[str, str, str], None]
EventSink = Callable[[dict[str, Any]], None]  # the gateway's events (retry, breaker, timeout, waiting)
# Asked when the run pauses for approval: given the interrupt's value (LangChain's HITL request, batched or per
# call: nodes/approval.py), returns the answer to resume with (`answer_with` builds it).
Approver = Callable[[dict[str, Any]], Any]
MAX_APPROVAL_ROUNDS = 100  # pauses answered within one turn (each model reply asking may pause once or twice)


@dataclass(frozen=True)
class RunPlan:
    """What `ask` will do on a session: start a turn, resume an unfinished one, or fork from a checkpoint."""

    config: RunnableConfig
    graph_input: dict[str, Any] | Command | None  # None resumes from the last checkpoint
    mode: str  # "new" | "resume" | "fork"


def plan_run(graph: AnyGraph, question: str, session: str, from_checkpoint: str | None = None) -> RunPlan:
    """Resume when the session's unfinished turn asked this same question; otherwise start (or fork) a turn.
    A session id that `check_session_id` refuses raises `InvalidSessionId`, an empty or whitespace-only question
    `EmptyQuestion` (both ValueErrors), before any read or write."""
    question = check_question(question)
    session = check_session_id(session)
    configurable: dict[str, Any] = {"thread_id": session}
    config: RunnableConfig = {"configurable": configurable}
    new_turn: dict[str, Any] = {"messages": [HumanMessage(question)]}
    if from_checkpoint:
        configurable["checkpoint_id"] = from_checkpoint
        if not graph.get_state(config).values:
            raise LookupError(f"session {session!r} has no checkpoint {from_checkpoint!r}; "
                              f"see `reactgraph history --session {session}`")
        return RunPlan(config, new_turn, "fork")
    snapshot = graph.get_state(config)
    # `tasks` too: a step whose tasks all finished (their writes saved) before the process stopped has no `next`
    # left, yet the turn has not moved past it
    unfinished = bool(snapshot.next or snapshot.tasks)
    pending = current_question(snapshot.values.get("messages", [])) if unfinished else None
    if pending is not None and pending.text.strip() == question.strip():
        return RunPlan(config, None, "resume")
    return RunPlan(config, new_turn, "new")


def run(graph: AnyGraph, plan: RunPlan, context: Context, on_update: UpdateSink | None = None,
        on_token: TokenSink | None = None, *, wait_s: float = DEFAULT_WAIT_S,
        on_wait: WaitNotice | None = None, on_event: EventSink | None = None,
        approver: Approver | None = None, control: RunControl | None = None) -> dict:
    """Stream the run node by node (to `on_update`; a nested graph's nodes too, by their own names), model tokens
    as they arrive (to `on_token`, with the id of the reply they belong to; only from providers that stream) and
    gateway events (to `on_event`), then return the session's final state values.

    When the run pauses for approval, `approver` is asked and the run resumed with its answer, under the same
    lease; without one (or after MAX_APPROVAL_ROUNDS) the session stays paused: its values have no status,
    and `pending_approval` tells what it waits for.

    The turn holds the session's lease (`session_lease`): another turn on it waits up to `wait_s` (`on_wait`
    is told), else `SessionBusy`; a caller that already holds the lease (to plan under it too) shares it.

    `control` (LangGraph's `RunControl`) stops the turn cooperatively: after `control.request_drain()` (from a
    signal handler, another thread…) the run ends at the next step boundary with every finished step saved and
    raises LangGraph's `GraphDrained`; the same question asked again on the session (`plan_run`) resumes it from
    there, without running a finished tool call again."""
    session = check_session_id((plan.config.get("configurable") or {})["thread_id"])
    thread: RunnableConfig = {"configurable": {"thread_id": session}}
    with session_lease(graph, session, wait_s=wait_s, on_wait=on_wait) as lease, run_scope(session) as run_id:
        # The log records' run id is the root run's id in LangChain callbacks (LangSmith, tracers) too. The
        # graph's name goes into every checkpoint's metadata: history, trace and the next turn rebuild it by name.
        metadata = {**(plan.config.get("metadata") or {}), GRAPH_METADATA: graph.name}
        plan = replace(plan, config={**plan.config, "run_id": uuid.UUID(run_id), "metadata": metadata})
        _stream(graph, plan, context, lease, on_update, on_token, on_event, control)
        for _ in range(MAX_APPROVAL_ROUNDS if approver else 0):
            paused = pending_approval(graph, session)
            if paused is None:
                break
            resume = RunPlan(thread, Command(resume=approver(paused)) if approver else None, "resume")
            _stream(graph, resume, context, lease, on_update, on_token, on_event, control)
        return graph.get_state(thread).values


def pending_approval(graph: AnyGraph, session: str) -> dict[str, Any] | None:
    """The approval request the session's run is paused on (the interrupt's value), or None."""
    snapshot = graph.get_state({"configurable": {"thread_id": session}})
    for pause in snapshot.interrupts:
        if is_approval_request(pause.value):
            return pause.value
    return None


def _stream(graph: AnyGraph, plan: RunPlan, context: Context, lease: SessionLease, on_update: UpdateSink | None,
            on_token: TokenSink | None, on_event: EventSink | None = None, control: RunControl | None = None) -> None:
    modes: list[StreamMode] = ["updates", "messages"] if on_token else ["updates"]
    if on_event:
        modes.append("custom")
    # durability="sync": each step's checkpoint and each finished tool call's writes are in the store before
    # the next step starts. With LangGraph's default ("async") they are saved while the next step runs, so a
    # store lost mid-run could drop a finished call's result and the resumed run would call the tool again.
    # subgraphs=True: the steps of a graph run inside a node (Reflexion's actor, one ReAct run per trial) are
    # streamed as they happen too, under their own node names (think, act, observe…), not only as the trial's end.
    parts = graph.stream(plan.graph_input, config=plan.config, context=context, stream_mode=modes,
                         durability="sync", subgraphs=True, control=control)
    for part in parts:
        lease.check()  # a lease lost mid-turn (renewals failed) stops the turn before another step is saved
        _namespace, mode, payload = cast(tuple[tuple[str, ...], str, Any], part)  # each: (namespace, mode, payload)
        if mode == "messages":
            chunk, metadata = payload
            # Only chunks are streamed tokens; a whole message is a non-streaming model's reply, shown as a step.
            if on_token and isinstance(chunk, AIMessageChunk) and isinstance(chunk.content, str) and chunk.content:
                on_token(metadata.get("langgraph_node", ""), chunk.content, chunk.id or "")
            continue
        if mode == "custom":  # only the gateway's own events; anything else a node might write is not ours to show
            if on_event and isinstance(payload, dict) and payload.get("type") == "gateway":
                on_event(payload)
            continue
        for node, update in payload.items():
            if on_update and isinstance(update, dict):
                on_update(node, public_update(update))


def public_update(update: dict[str, Any]) -> dict[str, Any]:
    """A node's update as its values: LangGraph's `Overwrite(value)` (how think resets the step records at a
    new turn, the only way to replace a reducer channel's value) is an instruction to the channel, not data."""
    return {key: value.value if isinstance(value, Overwrite) else value for key, value in update.items()}


def history(graph: AnyGraph, session: str, limit: int = 50) -> Iterator[dict[str, Any]]:
    """The session's checkpoints, newest first: id, step, the node that produced it, time and a summary.

    Each checkpoint is read on its own, so one that cannot be read (`unreadable` says why) is a row of its
    own and the others can still be forked from.
    """
    # One more than shown: the node that wrote the oldest shown checkpoint is named by the one before it.
    ids = _checkpoint_ids(graph, session, limit + 1)
    snapshots = [_snapshot(graph, session, checkpoint_id) for checkpoint_id in ids]
    shown = snapshots[:limit]
    for checkpoint_id, newer, older in zip(ids, shown, [*snapshots[1:], None][: len(shown)], strict=False):
        if isinstance(newer, Exception):
            yield {"checkpoint": checkpoint_id, "step": None, "node": "-", "next": [], "time": None, "iteration": None,
                   "status": "unreadable", "summary": "", "unreadable": getattr(newer, "reason", str(newer))}
            continue
        values = newer.values or {}
        messages = values.get("messages", [])
        last = messages[-1].text.strip().replace("\n", " ") if messages else ""
        yield {
            "checkpoint": checkpoint_id,
            "step": newer.metadata.get("step") if newer.metadata else None,
            "node": _written_by(older),
            "next": list(newer.next),
            "time": newer.created_at,
            "iteration": values.get("iteration", 0),
            "status": values.get("status"),
            "summary": last[:80],
            "unreadable": None,
        }


def _written_by(older: Any) -> str:
    """The node that produced a checkpoint is what its predecessor had next ("input" for the first one)."""
    if older is None:
        return "input"
    if isinstance(older, Exception):
        return "?"
    return ",".join(older.next) if older.next else "-"


def _checkpoint_ids(graph: AnyGraph, session: str, limit: int) -> list[str]:
    """Newest first; from the Redis savers' index, readable or not (`list` would skip the unreadable ones)."""
    config: RunnableConfig = {"configurable": {"thread_id": session, "checkpoint_ns": ""}}
    saver = graph.checkpointer
    if saver is None or isinstance(saver, bool):
        raise ValueError("the graph has no checkpointer, so no history")
    if hasattr(saver, "checkpoint_ids"):
        return saver.checkpoint_ids(config, limit)
    return [t.config["configurable"]["checkpoint_id"] for t in saver.list(config, limit=limit)]


def _snapshot(graph: AnyGraph, session: str, checkpoint_id: str) -> Any:
    """The state at one checkpoint, or the UnreadableCheckpoint that says why it cannot be read."""
    from reactgraph.memory.redis_checkpoint.reading import UnreadableCheckpoint

    try:
        return graph.get_state({"configurable": {"thread_id": session, "checkpoint_id": checkpoint_id}})
    except UnreadableCheckpoint as exc:
        return exc


def session_namespaces(session: str) -> list[tuple[str, ...]]:
    """The store namespaces that belong to a session: its Q&A log (and anything under it), its lessons."""
    from reactgraph.nodes.reflexion import lessons_namespace
    from reactgraph.nodes.turn_memory import qa_namespace

    return [qa_namespace(session)[:2], lessons_namespace(session)]


async def adrop_session_items(store: Any, session: str) -> int:
    """Delete a session's long-term store items (what deleting its thread must not leave behind); how many.

    On a worker thread: the walk and the deletes are the store's synchronous API, kept off the event loop."""
    import asyncio

    from reactgraph.memory.retention import drop_items, session_items

    def drop() -> int:
        items = session_items(store, session_namespaces(session))
        drop_items(store, items)
        return len(items)

    return 0 if store is None else await asyncio.to_thread(drop)
