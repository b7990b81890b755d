"""The assistants the service offers: one per graph (react, plan_solve, reflexion), compiled on the service's
Redis saver and store, with ids derived from the graph name exactly as the LangGraph server derives them (so
a client that hard-codes an assistant id of `langgraph dev` finds the same one here)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import BaseStore

from reactgraph.graph.plan_solve import build_plan_solve_graph
from reactgraph.graph.react import build_react_graph
from reactgraph.graph.reflexion import build_reflexion_graph
from reactgraph.graph.sessions import AnyGraph
from reactgraph.memory.redis_checkpoint import AsyncRedisSaver
from reactgraph.tools import ToolGateway

# langgraph-api's namespace for assistant ids: uuid5(NAMESPACE_GRAPH, graph_id)
NAMESPACE_GRAPH = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
BUILDERS: dict[str, Callable[..., AnyGraph]] = {
    "react": build_react_graph, "plan_solve": build_plan_solve_graph, "reflexion": build_reflexion_graph}
DESCRIPTIONS = {"react": "ReAct: think → act → observe → reflect, until it can answer",
                "plan_solve": "Plan-and-Solve: plan the steps, run each, solve",
                "reflexion": "Reflexion: ReAct trials, each failed one followed by a lesson"}
_STARTED = datetime.now(UTC).isoformat()


def assistant_id(graph_id: str) -> str:
    return str(uuid.uuid5(NAMESPACE_GRAPH, graph_id))


@dataclass(frozen=True)
class Assistant:
    graph_id: str
    graph: AnyGraph

    @property
    def assistant_id(self) -> str:
        return assistant_id(self.graph_id)

    def record(self) -> dict[str, Any]:
        return {"assistant_id": self.assistant_id, "graph_id": self.graph_id, "config": {}, "context": {},
                "created_at": _STARTED, "updated_at": _STARTED, "metadata": {"created_by": "system"},
                "version": 1, "name": self.graph_id, "description": DESCRIPTIONS.get(self.graph_id)}


class Assistants:
    """Every graph, compiled once per process on the given gateway, saver and store."""

    def __init__(self, gateway: ToolGateway, checkpointer: AsyncRedisSaver, store: BaseStore | None) -> None:
        self.gateway, self.checkpointer, self.store = gateway, checkpointer, store
        self.run_policy: Any = None  # the operator's RunPolicy (reactgraph/service/run_policy.py); None: its defaults
        self._by_id: dict[str, Assistant] = {}
        for graph_id, build in BUILDERS.items():
            entry = Assistant(graph_id, build(gateway, checkpointer=checkpointer, store=store, name=graph_id))
            self._by_id[entry.assistant_id] = entry

    def all(self) -> list[Assistant]:
        return list(self._by_id.values())

    def find(self, key: str) -> Assistant | None:
        """By assistant id, or by graph name (langgraph-sdk accepts either)."""
        return self._by_id.get(key) or self._by_id.get(assistant_id(key)) if key else None

    def default(self) -> Assistant:
        return self._by_id[assistant_id("react")]
