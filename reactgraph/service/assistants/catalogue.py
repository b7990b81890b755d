"""The assistants the service offers: one per graph (react, plan_solve, reflexion), compiled once per process on
the service's saver and store, and what a client may set on an assistant it creates.

A graph's own assistant has the id `langgraph dev` derives from the graph name, so a client that hard-codes it
finds it here too. A created assistant is one of these graphs with its own settings (Settings) and description
(Described), each bounded; its settings pass the operator's run policy when it is made and again, under the
run's own (`with_assistant`), whenever a run uses it. As in the Agent Server, `config.configurable` and
`context` mirror each other.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, TypedDict, overload

from langgraph.store.base import BaseStore

from reactgraph.graph.plan_solve import build_plan_solve_graph
from reactgraph.graph.react import build_react_graph
from reactgraph.graph.reflexion import build_reflexion_graph
from reactgraph.graph.sessions import AnyGraph
from reactgraph.memory.redis_checkpoint import AsyncRedisSaver
from reactgraph.service.records import RunRecord
from reactgraph.service.run_request import RunPolicy, run_kwargs
from reactgraph.service.wire import BadRequest, field
from reactgraph.tools import ToolGateway

if TYPE_CHECKING:  # records.py reads the catalogue: the type only, so no import cycle
    from reactgraph.service.assistants.records import AssistantRecord, AssistantRecords

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
    stored: AssistantRecord | None = None  # a created assistant's record; None: the graph's own assistant

    @property
    def assistant_id(self) -> str:
        return str(self.stored["assistant_id"]) if self.stored is not None else assistant_id(self.graph_id)

    def record(self) -> AssistantRecord:
        if self.stored is not None:
            return self.stored.copy()
        return {"assistant_id": self.assistant_id, "graph_id": self.graph_id, "config": {}, "context": {},
                "created_at": _STARTED, "updated_at": _STARTED, "metadata": {"created_by": "system"},
                "version": 1, "name": self.graph_id, "description": DESCRIPTIONS.get(self.graph_id)}


class Assistants:
    """Every graph, compiled once per process on the given gateway, saver and store."""

    def __init__(self, gateway: ToolGateway, checkpointer: AsyncRedisSaver, store: BaseStore | None, *,
                 run_policy: RunPolicy | None = None, created: AssistantRecords | None = None) -> None:
        self.gateway, self.checkpointer, self.store = gateway, checkpointer, store
        self.run_policy = run_policy  # the operator's; None: its defaults
        self.created = created  # in an API process: the assistants clients created (a worker has none)
        self._by_id: dict[str, Assistant] = {}
        for graph_id, build in BUILDERS.items():
            entry = Assistant(graph_id, build(gateway, checkpointer=checkpointer, store=store, name=graph_id))
            self._by_id[entry.assistant_id] = entry

    def all(self) -> list[Assistant]:
        return list(self._by_id.values())

    def find(self, key: str) -> Assistant | None:
        """By assistant id, or by graph name (langgraph-sdk accepts either)."""
        return self._by_id.get(key) or self._by_id.get(assistant_id(key)) if key else None

    def of_record(self, record: AssistantRecord) -> Assistant:
        """A created assistant (its record read back from Redis names one of the served graphs)."""
        graph_id = str(record["graph_id"])
        return Assistant(graph_id, self._by_id[assistant_id(graph_id)].graph, record)

    def for_run(self, run: RunRecord) -> Assistant:
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


MAX_NAME_CHARS = 200
MAX_DESCRIPTION_CHARS = 2000
MAX_SETTINGS_BYTES = 16 * 1024  # each of config, context and metadata, as JSON (a search reads them all)
MAX_TAGS, MAX_TAG_CHARS = 32, 100
CONFIG_KEYS = ("configurable", "recursion_limit", "tags")
IF_EXISTS = ("raise", "do_nothing")
_BOTH = ("give 'context' or 'config.configurable', not both: they are the same settings (context is what "
         "LangGraph 0.6 and later use)")


def uuid_of(value: Any, name: str = "assistant_id") -> str:
    """A UUID as the canonical text it is stored under (any spelling the uuid module reads), else a 422."""
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise BadRequest(422, f"{name!r} must be a UUID, got {str(value)[:80]!r}") from None


@overload
def graph_of(body: Mapping[str, Any], graphs: tuple[str, ...], *, required: Literal[True]) -> str: ...


@overload
def graph_of(body: Mapping[str, Any], graphs: tuple[str, ...], *, required: bool) -> str | None: ...


def graph_of(body: Mapping[str, Any], graphs: tuple[str, ...], *, required: bool) -> str | None:
    """The body's `graph_id`, one of `graphs` (404 if not; 422 if absent and `required`)."""
    graph_id = field(body, "graph_id", str)
    if graph_id is None and required:
        raise BadRequest(422, f"'graph_id' is required: one of {', '.join(graphs)}")
    if graph_id is not None and graph_id not in graphs:
        raise BadRequest(404, f"graph {graph_id[:80]!r} not found; this server serves {', '.join(graphs)}")
    return graph_id


def _bounded_mapping(body: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    value = field(body, name, dict)
    if value is not None and (size := len(json.dumps(value, ensure_ascii=False).encode())) > MAX_SETTINGS_BYTES:
        raise BadRequest(413, f"'{name}' is {size} bytes as JSON, over the limit of {MAX_SETTINGS_BYTES}")
    return value


def _bounded_text(body: Mapping[str, Any], name: str, limit: int) -> str | None:
    value = field(body, name, str)
    if value is not None and len(value) > limit:
        raise BadRequest(422, f"'{name}' is {len(value)} characters, over the limit of {limit}")
    return value


class Described(TypedDict, total=False):
    """What describes a client's assistant (an absent one is left as it was)."""

    metadata: dict[str, Any]
    name: str
    description: str | None


class Settings(TypedDict, total=False):
    """What a client's assistant runs with (an absent one is left as it was)."""

    config: dict[str, Any]
    context: dict[str, Any]


def described(body: Mapping[str, Any]) -> Described:
    """The metadata, name and description the body gives (absent ones left out)."""
    found: Described = {}
    if (metadata := _bounded_mapping(body, "metadata")) is not None:
        found["metadata"] = metadata
    if (name := _bounded_text(body, "name", MAX_NAME_CHARS)) is not None:
        found["name"] = name
    if (description := _bounded_text(body, "description", MAX_DESCRIPTION_CHARS)) is not None:
        found["description"] = description
    return found


def settings(body: Mapping[str, Any], policy: RunPolicy | None, gateway: Any) -> Settings:
    """The config and context the body gives (absent: left out; a config without `configurable` leaves the context
    as it was), mirrored and checked as a run's would be."""
    config, context = _bounded_mapping(body, "config"), _bounded_mapping(body, "context")
    if config is None and context is None:
        return {}
    config = dict(config or {})
    if unknown := sorted(map(str, set(config) - set(CONFIG_KEYS))):
        raise BadRequest(422, f"'config' takes {', '.join(CONFIG_KEYS)}; got {', '.join(unknown)}")
    configurable = field(config, "configurable", dict, {})
    if configurable and context:
        raise BadRequest(400, _BOTH)
    given = bool(configurable) or context is not None
    context = dict(configurable or context or {})
    tags = field(config, "tags", list, [])
    if len(tags) > MAX_TAGS or not all(isinstance(t, str) and 0 < len(t) <= MAX_TAG_CHARS for t in tags):
        raise BadRequest(422, f"'config.tags' must be at most {MAX_TAGS} texts of 1 to {MAX_TAG_CHARS} characters")
    run_kwargs({"config": config, "context": context}, policy, gateway)  # the checks a run's settings get
    chosen: Settings = {"config": {**config, "configurable": context}}
    if given:
        chosen["context"] = context
    return chosen


def with_assistant(body: Mapping[str, Any], record: AssistantRecord | None) -> dict[str, Any]:
    """A run's body with its created assistant's settings under the run's own (each key of the run's context and
    configurable over the assistant's, as the Agent Server merges them); a graph's own assistant has none."""
    if record is None:
        return dict(body)
    config = field(body, "config", dict, {})
    mine = record.get("config") or {}
    configurable = {**(mine.get("configurable") or {}), **field(config, "configurable", dict, {})}
    return {**body, "config": {**mine, **config, "configurable": configurable},
            "context": {**(record.get("context") or {}), **field(body, "context", dict, {})}}
