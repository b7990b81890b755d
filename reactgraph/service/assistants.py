"""The assistants the service offers: one per graph (react, plan_solve, reflexion), compiled on the service's
Redis saver and store, with ids derived from the graph name exactly as the LangGraph server derives them (so
a client that hard-codes an assistant id of `langgraph dev` finds the same one here); and those clients
created (kept in Redis: reactgraph/service/assistant_records.py), each one of these graphs with its own
settings."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
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
    stored: Mapping[str, Any] | None = None  # a created assistant's record; None: the graph's own assistant

    @property
    def assistant_id(self) -> str:
        return str(self.stored["assistant_id"]) if self.stored is not None else assistant_id(self.graph_id)

    def record(self) -> dict[str, Any]:
        if self.stored is not None:
            return dict(self.stored)
        return {"assistant_id": self.assistant_id, "graph_id": self.graph_id, "config": {}, "context": {},
                "created_at": _STARTED, "updated_at": _STARTED, "metadata": {"created_by": "system"},
                "version": 1, "name": self.graph_id, "description": DESCRIPTIONS.get(self.graph_id)}


class Assistants:
    """Every graph, compiled once per process on the given gateway, saver and store."""

    def __init__(self, gateway: ToolGateway, checkpointer: AsyncRedisSaver, store: BaseStore | None) -> None:
        self.gateway, self.checkpointer, self.store = gateway, checkpointer, store
        self.run_policy: Any = None  # the operator's RunPolicy (reactgraph/service/run_request.py); None: its defaults
        self.created: Any = None  # AssistantRecords, in an API process: the assistants clients created
        self._by_id: dict[str, Assistant] = {}
        for graph_id, build in BUILDERS.items():
            entry = Assistant(graph_id, build(gateway, checkpointer=checkpointer, store=store, name=graph_id))
            self._by_id[entry.assistant_id] = entry

    def all(self) -> list[Assistant]:
        return list(self._by_id.values())

    def find(self, key: str) -> Assistant | None:
        """By assistant id, or by graph name (langgraph-sdk accepts either)."""
        return self._by_id.get(key) or self._by_id.get(assistant_id(key)) if key else None

    def of_record(self, record: Mapping[str, Any]) -> Assistant:
        """A created assistant (its record read back from Redis names one of the served graphs)."""
        graph_id = str(record["graph_id"])
        return Assistant(graph_id, self._by_id[assistant_id(graph_id)].graph, record)

    def for_run(self, run: Mapping[str, Any]) -> Assistant:
        """The graph a stored run executes: its assistant's, or for a created assistant's run the graph recorded
        in its config (api_runs puts it there), else the default one."""
        kwargs = run.get("kwargs")
        config = kwargs.get("config") if isinstance(kwargs, Mapping) else None
        configurable = config.get("configurable") if isinstance(config, Mapping) else None
        graph_id = configurable.get("graph_id") if isinstance(configurable, Mapping) else None
        return (self.find(str(run.get("assistant_id") or ""))
                or (self.find(graph_id) if isinstance(graph_id, str) and graph_id in BUILDERS else None)
                or self.default())

    def default(self) -> Assistant:
        return self._by_id[assistant_id("react")]
