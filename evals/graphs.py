"""The graphs an eval can compare, by name; a new graph joins with one `register_graph` call.

An entry builds a compiled graph from a gateway and a chat model (a fresh one per run, so circuit breakers
and other per-graph state never leak from one task into the next) and may set `Context` fields for its runs
(e.g. plan_solve with replanning on). Builders are looked up in `graph` at build time, so a graph that is not
part of this installation is listed as unavailable instead of breaking the import.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import reactgraph.graph as graph_api
from reactgraph.errors import ReactGraphError
from reactgraph.evals.baselines import build_create_agent
from reactgraph.graph import Context

Builder = Callable[..., Any]  # (gateway, checkpointer=None, store=None, *, model=...) -> compiled graph


class UnknownGraphError(ReactGraphError, ValueError):
    """A graph name that is not registered, or whose builder this installation does not have."""


@dataclass(frozen=True)
class GraphEntry:
    """How to build one graph for an eval run."""

    name: str
    description: str
    builder: str | Builder  # a builder, or the name of one exported by `graph`
    builder_options: dict[str, Any] = field(default_factory=dict)  # e.g. {"replan": True}
    context: dict[str, Any] = field(default_factory=dict)  # Context fields for its runs
    requires: str = ""  # a package the builder needs beyond the core install (e.g. "langchain")

    def resolve(self) -> Builder | None:
        if self.requires and importlib.util.find_spec(self.requires) is None:
            return None
        return getattr(graph_api, self.builder, None) if isinstance(self.builder, str) else self.builder

    @property
    def available(self) -> bool:
        return self.resolve() is not None

    def build(self, gateway: Any, model: Any) -> Any:
        builder = self.resolve()
        if builder is None:
            missing = f"the {self.requires!r} package" if self.requires else f"graph.{self.builder}"
            raise UnknownGraphError(f"graph {self.name!r} is not available in this installation ({missing} is missing)")
        # A checkpointer of its own, so a run that pauses for approval can be resumed (evals/runner.py).
        from langgraph.checkpoint.memory import InMemorySaver

        return builder(gateway, InMemorySaver(), model=model, **self.builder_options)

    def make_context(self, **fields: Any) -> Context:
        """A Context with the run's fields plus this graph's own (fields Context does not have are skipped)."""
        known = {f.name for f in dataclasses.fields(Context)}
        merged = {**fields, **self.context}
        return Context(**{k: v for k, v in merged.items() if k in known})


GRAPHS: dict[str, GraphEntry] = {}


def register_graph(entry: GraphEntry) -> GraphEntry:
    """Add (or replace) a graph the evals can run."""
    GRAPHS[entry.name] = entry
    return entry


register_graph(GraphEntry("react", "ReAct: think → act → observe → reflect loop", "build_react_graph"))
register_graph(GraphEntry("plan_solve", "Plan-and-Solve: plan, execute each step, solve", "build_plan_solve_graph"))
register_graph(GraphEntry("plan_solve_replan", "Plan-and-Solve with replanning after a failed step",
                          "build_plan_solve_graph", context={"replan": True}))
register_graph(GraphEntry("reflexion", "Reflexion: attempt, self-evaluate, retry with a lesson",
                          "build_reflexion_graph"))
# Baselines: ReAct with the reflection verdict carried by its think replies (no extra call), plain ReAct (no
# reflection), and LangChain's create_agent with the same model, tools and limits (evals/baselines.py).
register_graph(GraphEntry("react_inline", "ReAct, the reflection verdict carried by each think reply (no extra call)",
                          "build_react_graph", context={"reflection": "inline"}))
register_graph(GraphEntry("react_plain", "Plain ReAct: think → act → observe → think, no reflection",
                          "build_react_graph", context={"reflection": "off"}))
register_graph(GraphEntry("create_agent", "LangChain's create_agent: same model, gateway tools and limits",
                          build_create_agent, requires="langchain"))


def available_graphs() -> list[str]:
    return [name for name, entry in GRAPHS.items() if entry.available]


def resolve_graphs(names: list[str] | str) -> list[GraphEntry]:
    """The entries for comma-separated or listed names, or UnknownGraphError naming what is available."""
    if isinstance(names, str):
        names = names.split(",")
    names = [n.strip() for n in names if n.strip()]
    if not names:
        raise UnknownGraphError(f"no graph given: choose from {', '.join(available_graphs())}")
    entries: dict[str, GraphEntry] = {}
    for name in names:
        entry = GRAPHS.get(name)
        if entry is None:
            raise UnknownGraphError(f"unknown graph {name!r}: choose from {', '.join(available_graphs())}")
        if not entry.available:
            raise UnknownGraphError(f"graph {name!r} is not available in this installation "
                                    f"(available: {', '.join(available_graphs())})")
        entries.setdefault(name, entry)
    return list(entries.values())
