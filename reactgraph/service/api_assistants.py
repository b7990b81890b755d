"""Assistants, read: search, count, get, versions, and a graph's drawing, schemas and subgraphs.

The served graphs' own assistants and those clients created (reactgraph/service/api_assistant_changes.py) are
found alike, each inside what the `assistants.read` / `assistants.search` auth handler lets the caller see.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import TypeAdapter, create_model
from pydantic.errors import PydanticInvalidForJsonSchema, PydanticSchemaGenerationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reactgraph.service.api_common import Service, body_of, handler, int_param, json_response, service
from reactgraph.service.assistant_records import version_of
from reactgraph.service.assistant_search import assistant_query, assistant_source, contains
from reactgraph.service.assistants import Assistant
from reactgraph.service.auth import authorize, matches
from reactgraph.service.index import count, search
from reactgraph.service.threads import selected_fields
from reactgraph.service.wire import BadRequest, field

# The fields of an assistant a search may `select` (the Agent Server's AssistantSelectField), and its sort keys.
ASSISTANT_FIELDS = ("assistant_id", "graph_id", "name", "description", "config", "context", "created_at",
                    "updated_at", "metadata", "version")
SORT_KEYS = ("assistant_id", "graph_id", "name", "created_at", "updated_at")


async def lookup(svc: Service, key: str) -> Assistant | None:
    """By assistant id or graph name: a graph's own assistant, else a created one (ids are UUIDs)."""
    found = svc.assistants.find(key)
    if found is not None or svc.assistants.created is None:
        return found
    from reactgraph.service.assistant_input import uuid_of

    try:
        assistant_id = uuid_of(key)
    except BadRequest:
        return None
    record = await svc.assistants.created.get(assistant_id)
    return None if record is None else svc.assistants.of_record(record)


async def visible_assistant(request: Request, key: str, action: str = "read", value: Any = None,
                            assistant: Assistant | None = None) -> Assistant:
    """The assistant `key` names if the `assistants.<action>` handler lets the caller see it (else a 404)."""
    assistant = assistant or await lookup(service(request), key)
    if assistant is None:
        raise BadRequest(404, f"assistant {key[:80]!r} not found")
    allowed = await authorize(request, "assistants", action, value or {"assistant_id": assistant.assistant_id})
    if not matches(assistant.record()["metadata"], allowed):
        raise BadRequest(404, f"assistant {key[:80]!r} not found")
    return assistant


async def run_assistant(request: Request, key: str | None) -> Assistant:
    """The assistant a run names: a graph's own, or a created one the caller may read (its settings are the
    run's defaults, so another owner's is as absent as a missing one)."""
    assistant = await lookup(service(request), key or "")
    if assistant is None:
        raise BadRequest(404, f"assistant {key!r} not found")
    return assistant if assistant.stored is None else await visible_assistant(request, str(key), assistant=assistant)


async def readable_assistant(request: Request) -> Assistant:
    return await visible_assistant(request, str(request.path_params["assistant_id"]))


async def _query(request: Request, body: dict[str, Any], limit: int, offset: int) -> Any:
    """The Query (reactgraph/service/index.py) of a search or count, inside the handler's filter."""
    graph_id, name = field(body, "graph_id", str), field(body, "name", str)
    metadata = field(body, "metadata", dict, {})
    allowed = await authorize(request, "assistants", "search",
                              {"graph_id": graph_id, "metadata": metadata, "limit": limit, "offset": offset})
    sort_by = field(body, "sort_by", str, "created_at").lower()
    order = field(body, "sort_order", str, "desc").lower()
    if sort_by not in SORT_KEYS or order not in ("asc", "desc"):
        raise BadRequest(422, f"'sort_by' must be one of {', '.join(SORT_KEYS)} and 'sort_order' asc or desc")
    return assistant_query(allowed, graph_id, name, metadata, sort_by, order == "desc")


def _source(request: Request) -> Any:
    svc = service(request)
    if svc.assistants.created is None:  # only an API process has them; never the case on a served route
        raise BadRequest(503, "this process keeps no assistants")
    return assistant_source(svc.assistants.created, svc.assistants)


@handler
async def search_assistants(request: Request) -> Response:
    body = await body_of(request)
    limit = int_param(body.get("limit"), "limit", 10, 1, 1000)
    offset = int_param(body.get("offset"), "offset", 0, 0, 10**6)
    select = selected_fields(body, ASSISTANT_FIELDS, "assistant")
    query = await _query(request, body, limit, offset)
    found = await search(_source(request), query, offset, limit + 1)  # one more: is there a next page?
    page = [r if select is None else {k: v for k, v in r.items() if k in select} for r in found[:limit]]
    more = len(found) > limit
    headers = {"X-Pagination-Total": str(offset + limit + 1 if more else offset + len(page))}
    if more:
        headers["X-Pagination-Next"] = str(offset + limit)
    return json_response(page, headers=headers)


@handler
async def count_assistants(request: Request) -> Response:
    return json_response(await count(_source(request), await _query(request, await body_of(request), 0, 0)))


@handler
async def get_assistant(request: Request) -> Response:
    return json_response((await readable_assistant(request)).record())


@handler
async def get_versions(request: Request) -> Response:
    assistant = await readable_assistant(request)
    body = await body_of(request)
    limit = int_param(body.get("limit"), "limit", 10, 1, 1000)
    offset = int_param(body.get("offset"), "offset", 0, 0, 10**6)
    metadata = field(body, "metadata", dict, {})
    allowed = await authorize(request, "assistants", "read", {"assistant_id": assistant.assistant_id})
    created = service(request).assistants.created
    versions = (await created.versions(assistant.assistant_id) if assistant.stored is not None and created
                else [version_of(assistant.record())])
    kept = [v for v in versions if contains(v["metadata"], metadata) and matches(v["metadata"], allowed)]
    return json_response(kept[offset:offset + limit])


# Drawn once per (graph, xray) and process, on a worker thread: drawing a graph and building its schemas is
# synchronous CPU work that would otherwise hold every other request and run of the loop. An assistant's
# settings do not change its graph's drawing or schemas.
_DRAWN: dict[tuple[str, str, bool | int], Any] = {}


async def _drawn(assistant: Assistant, what: str, xray: bool | int, draw: Any) -> Any:
    key = (assistant.graph_id, what, xray)
    if key not in _DRAWN:
        _DRAWN[key] = await asyncio.to_thread(draw)
    return _DRAWN[key]


@handler
async def get_assistant_graph(request: Request) -> Response:
    assistant = await readable_assistant(request)
    raw = request.query_params.get("xray") or "false"  # langgraph-sdk sends a bool or a depth
    if raw not in ("true", "True", "false", "False") and not (raw.isdigit() and int(raw) <= 100):
        raise BadRequest(422, f"'xray' must be true, false or a depth from 0 to 100, got {raw[:20]!r}")
    xray: bool | int = int(raw) if raw.isdigit() else raw in ("true", "True")
    return json_response(await _drawn(assistant, "graph", xray, lambda: assistant.graph.get_graph(xray=xray).to_json()))


@handler
async def get_assistant_schemas(request: Request) -> Response:
    assistant = await readable_assistant(request)
    graph = assistant.graph
    return json_response(await _drawn(assistant, "schemas", False, lambda: {
        "graph_id": assistant.graph_id, "input_schema": graph.get_input_jsonschema(),
        "output_schema": graph.get_output_jsonschema(), "state_schema": _state_schema(graph),
        "config_schema": None, "context_schema": graph.get_context_jsonschema()}))


def _state_schema(graph: Any) -> dict[str, Any]:
    """Each state channel by the type its updates take (what Studio's state editor renders); a type that has no
    JSON schema is shown as any value."""
    fields: dict[str, Any] = {}
    for name in graph.stream_channels_list:
        kind = graph.channels[name].UpdateType
        try:
            TypeAdapter(kind).json_schema()
        except (PydanticSchemaGenerationError, PydanticInvalidForJsonSchema, TypeError):  # e.g. a callable
            kind = Any
        fields[name] = (kind, None)
    return create_model(graph.get_name("State"), **fields).model_json_schema()


@handler
async def get_subgraphs(request: Request) -> Response:
    """The served graphs have no subgraphs: none, under any namespace."""
    await readable_assistant(request)
    return json_response({})


ROUTES = [
    Route("/assistants/search", search_assistants, methods=["POST"]),
    Route("/assistants/count", count_assistants, methods=["POST"]),
    Route("/assistants/{assistant_id}", get_assistant, methods=["GET"]),
    Route("/assistants/{assistant_id}/versions", get_versions, methods=["POST"]),
    Route("/assistants/{assistant_id}/graph", get_assistant_graph, methods=["GET"]),
    Route("/assistants/{assistant_id}/schemas", get_assistant_schemas, methods=["GET"]),
    Route("/assistants/{assistant_id}/subgraphs", get_subgraphs, methods=["GET"]),
    Route("/assistants/{assistant_id}/subgraphs/{namespace}", get_subgraphs, methods=["GET"]),
]
