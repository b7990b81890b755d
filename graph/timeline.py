"""The timeline of one turn of a session, from its checkpoints and step records: which nodes ran in what order,
when each started and how long it took, the model calls (tokens) and tool calls (status, latency) each made,
and how the turn ended. For users without a tracing backend (`reactgraph trace`).

Each checkpoint is written when a super-step ends, so a node's start is the previous checkpoint's time and
its duration the gap to its own (checkpoint writes included). A turn starts at an `input` checkpoint; the
turns are counted along the session's current lineage (parent links from the newest checkpoint), so a fork's
abandoned branch is not counted.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from itertools import pairwise
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig

from reactgraph.errors import ReactGraphError
from reactgraph.tools.telemetry import redact  # arguments as logs show them (masked, cut)

MAX_CHECKPOINTS = 5000  # a session's checkpoints read at most: bounds the time and memory one trace takes


class TraceError(ReactGraphError, LookupError):
    """No such session in the store, or no such turn in it; the message is the one line to show."""


def turn_timeline(graph: Any, session: str, turn: int | None = None) -> dict[str, Any]:
    """Turn `turn` (1-based; default the last) of `session` as a JSON-ready dict (see the README's example)."""
    config: RunnableConfig = {"configurable": {"thread_id": session}}
    snapshots = list(graph.get_state_history(config, limit=MAX_CHECKPOINTS))
    if not snapshots:
        raise TraceError(f"session {session!r} has no checkpoints in this store")
    turns = _turns(_lineage(snapshots))
    if not turns:
        raise TraceError(f"session {session!r} has no turn yet")
    if turn is None:
        turn = len(turns)
    if not 1 <= turn <= len(turns):
        raise TraceError(f"session {session!r} has {len(turns)} turn(s); --turn must be 1..{len(turns)}, not {turn}")
    return _timeline(session, turn, len(turns), turns[turn - 1])


def _lineage(snapshots: list[Any]) -> list[Any]:
    """The checkpoints from the newest back through its parents, oldest first."""
    by_id = {s.config["configurable"]["checkpoint_id"]: s for s in snapshots}
    chain: list[Any] = []
    current = snapshots[0]
    while current is not None and len(chain) < len(by_id):
        chain.append(current)
        parent = (current.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        current = by_id.get(parent) if parent else None
    return chain[::-1]


def _turns(chain: list[Any]) -> list[list[Any]]:
    turns: list[list[Any]] = []
    for snapshot in chain:
        if (snapshot.metadata or {}).get("source") == "input" or not turns:
            turns.append([])
        turns[-1].append(snapshot)
    return [t for t in turns if len(t) > 1 or (t[0].metadata or {}).get("source") == "input"]


def _time(snapshot: Any) -> float:
    return datetime.fromisoformat(snapshot.created_at).timestamp() if snapshot.created_at else 0.0


def _timeline(session: str, number: int, total: int, checkpoints: list[Any]) -> dict[str, Any]:
    start, last = _time(checkpoints[0]), checkpoints[-1]
    values = last.values or {}
    nodes = []
    for before, after in pairwise(checkpoints):
        names = [task.name for task in before.tasks] or list(before.next)
        if names == ["__start__"]:
            continue  # the input being written: not a node of the graph
        counted = Counter(names)
        node = ", ".join(name if n == 1 else f"{name} ×{n}" for name, n in counted.items())
        nodes.append({"node": node, "step": (after.metadata or {}).get("step"),
                      "start_ms": round((_time(before) - start) * 1000, 1),
                      "duration_ms": round((_time(after) - _time(before)) * 1000, 1),
                      **_made(before.values or {}, after.values or {})})
    _to_their_nodes(nodes)
    tools = [call for node in nodes for call in node["tool_calls"]]
    return {
        "session": session, "turn": number, "turns": total, "question": _question(values),
        "status": values.get("status"), "coverage": values.get("coverage"), "unfinished": bool(last.next),
        "next": list(last.next),
        "answer": values.get("final_answer"), "started_at": checkpoints[0].created_at,
        "duration_ms": round((_time(last) - start) * 1000, 1),
        "model_calls": sum(len(node["model_calls"]) for node in nodes), "tool_calls": len(tools),
        "usage": dict(values.get("usage") or {}), "nodes": nodes,
    }


def _made(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What one super-step added: model replies (its model calls), tool step records, other step records."""
    seen = {m.id for m in before.get("messages", [])}
    replies = [m for m in after.get("messages", []) if isinstance(m, AIMessage) and m.id not in seen]
    old, new = before.get("steps", []), after.get("steps", [])
    added = new[len(old):] if new[:len(old)] == old else new  # a new turn replaces the records
    model_calls = []
    for reply in replies:
        usage: dict[str, Any] = dict(reply.usage_metadata or {})
        model_calls.append({"model": (reply.response_metadata or {}).get("model_name"),
                            "input_tokens": usage.get("input_tokens"), "output_tokens": usage.get("output_tokens"),
                            "tool_calls": [call["name"] for call in reply.tool_calls]})
    tool_calls = [{"node": s["node"], "tool": s["action"], "status": s["status"], "latency_ms": s["latency_ms"],
                   "args": redact(s.get("action_input"))} for s in added if s.get("action")]
    records = [{"node": s["node"], "status": s["status"], "latency_ms": s["latency_ms"], "tokens": s["tokens"]}
               for s in added if not s.get("action")]
    return {"model_calls": model_calls, "tool_calls": tool_calls, "records": records}


def _to_their_nodes(nodes: list[dict[str, Any]]) -> None:
    """Move each step record to the node it names: `observe` settles the tool calls `act` made, and writes
    their records (named act) in its own super-step."""
    for index, entry in enumerate(nodes):
        for kind in ("tool_calls", "records"):
            kept: list[dict[str, Any]] = []
            for item in entry[kind]:
                owner = next((earlier for earlier in reversed(nodes[:index + 1])
                              if item.get("node", "act") in earlier["node"].replace(" ×", ",").split(", ")), entry)
                (kept if owner is entry else owner[kind]).append(item)
            entry[kind] = kept


def _question(values: dict[str, Any]) -> str | None:
    turn_id = values.get("turn_id")
    for message in values.get("messages", []):
        if isinstance(message, HumanMessage) and message.id == turn_id:
            return message.text
    return None
