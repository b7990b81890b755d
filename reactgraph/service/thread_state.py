"""A thread's checkpointed state in the Agent Server's shapes: `ThreadState`, checkpoints, thread status."""

from __future__ import annotations

from typing import Any

from langgraph.types import StateSnapshot

from reactgraph.service.wire import plain

MAX_ROLLED_BACK_STEPS = 500  # checkpoints of one run looked past to find the state before it


def checkpoint_of(config: Any) -> dict[str, Any] | None:
    if not config:
        return None
    configurable = config.get("configurable", {})
    return {"thread_id": configurable.get("thread_id"), "checkpoint_ns": configurable.get("checkpoint_ns", ""),
            "checkpoint_id": configurable.get("checkpoint_id"), "checkpoint_map": configurable.get("checkpoint_map")}


def interrupts_of(interrupts: Any) -> list[dict[str, Any]]:
    """Interrupts as a thread's state and record show them: `{"id", "value"}`, and `response_schema` (the answer
    it waits for) when the graph gave one — as langgraph-api does (its streams carry `response_schema: null`)."""
    return [{"id": i.id, "value": plain(i.value),
             **({"response_schema": plain(i.response_schema)} if getattr(i, "response_schema", None) else {})}
            for i in interrupts]


def thread_state(snapshot: StateSnapshot) -> dict[str, Any]:
    """What `GET /threads/{id}/state` answers (langgraph-sdk's `ThreadState`)."""
    tasks = [{"id": t.id, "name": t.name, "path": plain(list(t.path)), "error": str(t.error) if t.error else None,
              "interrupts": interrupts_of(t.interrupts), "checkpoint": None, "state": None,
              "result": plain(t.result) if getattr(t, "result", None) is not None else None}
             for t in snapshot.tasks]
    checkpoint, parent = checkpoint_of(snapshot.config), checkpoint_of(snapshot.parent_config)
    return {"values": plain(snapshot.values), "next": list(snapshot.next), "tasks": tasks,
            "checkpoint": checkpoint, "metadata": plain(snapshot.metadata or {}),
            "created_at": snapshot.created_at, "parent_checkpoint": parent,
            "interrupts": interrupts_of(snapshot.interrupts),
            # the Agent Server's older flat fields, still read by some clients
            "checkpoint_id": (checkpoint or {}).get("checkpoint_id"),
            "parent_checkpoint_id": (parent or {}).get("checkpoint_id")}


def thread_status_after(snapshot: StateSnapshot, run_status: str) -> str:
    """idle, interrupted (waiting on an interrupt or before a node) or error, once a run has ended."""
    if run_status == "error":
        return "error"
    return "interrupted" if snapshot.next or snapshot.interrupts else "idle"


def interrupts_by_task(snapshot: StateSnapshot) -> dict[str, Any]:
    """The thread record's `interrupts`: each waiting task's, by task id (as langgraph-api keeps them)."""
    return {task.id: interrupts_of(task.interrupts) for task in snapshot.tasks if task.interrupts}


async def thread_after_run(graph: Any, thread_id: str, run_status: str, *, rolled_back: str | None = None
                           ) -> tuple[str, dict[str, Any]]:
    """(the thread's status, its `interrupts`) once a run has ended with `run_status`, from its checkpoints.
    `rolled_back`: as they will be once that run's checkpoints are deleted — its own are passed over."""
    config = {"configurable": {"thread_id": thread_id}}
    snapshot = await graph.aget_state(config)
    if rolled_back is not None and (snapshot.metadata or {}).get("run_id") == rolled_back:
        earlier = None
        async for older in graph.aget_state_history(config, limit=MAX_ROLLED_BACK_STEPS):
            if (older.metadata or {}).get("run_id") != rolled_back:
                earlier = older
                break
        if earlier is None:  # the run made all of them (or more than are looked at): nothing is left
            return ("error" if run_status == "error" else "idle"), {}
        snapshot = earlier
    return thread_status_after(snapshot, run_status), interrupts_by_task(snapshot)
