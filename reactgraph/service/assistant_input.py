"""A client's assistant (the body of `assistants.create` and `assistants.update`) → the fields stored with it:
each one bounded, and its settings checked exactly as a run's are. An assistant's context goes through the
operator's run policy when it is made (a model off the list is refused then, not when a run on it starts), and
again, merged with the run's own, whenever a run uses it.

As in the Agent Server, `config.configurable` and `context` mirror each other (give one of them); a run's
settings go over its assistant's (`with_assistant`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from reactgraph.service.run_request import run_kwargs
from reactgraph.service.wire import BadRequest, field

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


def graph_of(body: Mapping[str, Any], graphs: tuple[str, ...], *, required: bool) -> str | None:
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


def described(body: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata, name and description the body gives (absent ones left out)."""
    given = {"metadata": _bounded_mapping(body, "metadata"), "name": _bounded_text(body, "name", MAX_NAME_CHARS),
             "description": _bounded_text(body, "description", MAX_DESCRIPTION_CHARS)}
    return {name: value for name, value in given.items() if value is not None}


def settings(body: Mapping[str, Any], policy: Any, gateway: Any) -> dict[str, Any]:
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
    return {"config": {**config, "configurable": context}, **({"context": context} if given else {})}


def with_assistant(body: Mapping[str, Any], record: Mapping[str, Any] | None) -> dict[str, Any]:
    """A run's body with its created assistant's settings under the run's own (each key of the run's context and
    configurable over the assistant's, as the Agent Server merges them); a graph's own assistant has none."""
    if record is None:
        return dict(body)
    config = field(body, "config", dict, {})
    mine = record.get("config") or {}
    configurable = {**(mine.get("configurable") or {}), **field(config, "configurable", dict, {})}
    return {**body, "config": {**mine, **config, "configurable": configurable},
            "context": {**(record.get("context") or {}), **field(body, "context", dict, {})}}
