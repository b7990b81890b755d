"""The assistants API: assistants read (get, search, count, versions, a graph's drawing, schemas and subgraphs)
and changed (create, update as a new version, set the latest, delete).

The graphs' own assistants and those clients created are found alike, each inside what the `assistants.*`
auth handler lets the caller see: a filter hides the rest as 404, and what a create handler writes into the
metadata is kept. The graphs' own are the operator's, read and never changed. A created assistant's settings
pass the checks a run's pass, and deleting one cancels its pending and running runs, as langgraph-api does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import TypeAdapter, create_model
from pydantic.errors import PydanticInvalidForJsonSchema, PydanticSchemaGenerationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reactgraph.service.api_common import Service, body_of, handler, int_param, json_response, service
from reactgraph.service.api_threads import remove_thread
from reactgraph.service.assistants.catalogue import (
    BUILDERS,
    IF_EXISTS,
    Assistant,
    Described,
    Settings,
    described,
    graph_of,
    settings,
    uuid_of,
)
from reactgraph.service.assistants.records import (
    AssistantRecord,
    AssistantRecords,
    assistant_query,
    assistant_source,
    contains,
    version_of,
)
from reactgraph.service.auth import authorize, matches
from reactgraph.service.index import Query, Source, count, search
from reactgraph.service.quotas import owner_of, quotas_of
from reactgraph.service.records import new_id, now_iso
from reactgraph.service.run_control import cancel_runs_of_assistant
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
    from reactgraph.service.assistants.catalogue import uuid_of

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


async def _query(request: Request, body: dict[str, Any], limit: int, offset: int) -> Query[AssistantRecord]:
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


def _source(request: Request) -> Source[AssistantRecord]:
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
    # ASCII digits only: str.isdigit() also takes "¹" or "٣", which int() refuses or reads as another number
    depth = raw.isascii() and raw.isdigit()
    if raw not in ("true", "True", "false", "False") and not (depth and int(raw) <= 100):
        raise BadRequest(422, f"'xray' must be true, false or a depth from 0 to 100, got {raw[:20]!r}")
    xray: bool | int = int(raw) if depth else raw in ("true", "True")
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


GRAPHS = tuple(BUILDERS)


def _changeable(assistant: Assistant) -> None:
    if assistant.stored is None:
        raise BadRequest(409, f"assistant {assistant.assistant_id!r} is this server's own for graph "
                              f"{assistant.graph_id!r}: its settings are the operator's; create an assistant of "
                              f"graph {assistant.graph_id!r} to choose others")


def _records(request: Request) -> AssistantRecords:
    created = service(request).assistants.created
    if created is None:  # only an API process has them; never the case on a served route
        raise BadRequest(503, "this process keeps no assistants")
    return created


@handler
async def create_assistant(request: Request) -> Response:
    svc, body = service(request), await body_of(request)
    graph_id = graph_of(body, GRAPHS, required=True)
    assistant_id = uuid_of(body["assistant_id"]) if body.get("assistant_id") is not None else new_id()
    if_exists = field(body, "if_exists", str, "raise")
    if if_exists not in IF_EXISTS:
        raise BadRequest(422, f"'if_exists' must be one of {', '.join(IF_EXISTS)}, got {if_exists[:40]!r}")
    chosen: Settings = {"config": {}, "context": {}, **settings(body, svc.assistants.run_policy,
                                                                 svc.assistants.gateway)}
    about: Described = {"metadata": {}, "name": "Untitled", "description": None, **described(body)}
    # the create handler may write into the metadata (an owner, say) before the assistant is made with it
    value: dict[str, Any] = {"assistant_id": assistant_id, "graph_id": graph_id, "config": chosen["config"],
             "context": chosen["context"], "metadata": dict(about["metadata"]), "name": about["name"]}
    allowed = await authorize(request, "assistants", "create", value)
    metadata = value["metadata"] if isinstance(value.get("metadata"), dict) else {}
    existing = await lookup(svc, assistant_id)
    if existing is None:
        stamp = now_iso()
        record: AssistantRecord = {
            "assistant_id": assistant_id, "graph_id": graph_id, "config": chosen["config"],
            "context": chosen["context"], "metadata": metadata, "name": about["name"],
            "description": about["description"], "created_at": stamp, "updated_at": stamp, "version": 1}
        made, stored = await _records(request).create(record, owner_of(request), quotas_of(request).of("assistants"))
        if made:
            return json_response(record)
        existing = svc.assistants.of_record(stored) if stored is not None else None
    if existing is None or if_exists == "raise" or not matches(existing.record()["metadata"], allowed):
        raise BadRequest(409, f"assistant {assistant_id!r} already exists")
    return json_response(existing.record())


@handler
async def update_assistant(request: Request) -> Response:
    svc, body = service(request), await body_of(request)
    graph_id = graph_of(body, GRAPHS, required=False)
    chosen = settings(body, svc.assistants.run_policy, svc.assistants.gateway)
    about = described(body)
    key = str(request.path_params["assistant_id"])
    value: dict[str, Any] = {"assistant_id": key, "graph_id": graph_id, "config": chosen.get("config"),
             "context": chosen.get("context"), "metadata": dict(about.get("metadata") or {}), "name": about.get("name")}
    assistant = await visible_assistant(request, key, "update", value)
    _changeable(assistant)
    if isinstance(value.get("metadata"), dict):  # as the handler left it (a key it removed is not merged in)
        about["metadata"] = value["metadata"]

    def change(current: AssistantRecord, version: int) -> AssistantRecord:
        changed = current.copy()
        if graph_id:
            changed["graph_id"] = graph_id
        changed.update(chosen)
        changed.update(about)
        changed["metadata"] = {**current["metadata"], **about.get("metadata", {})}
        changed["updated_at"], changed["version"] = now_iso(), version
        if "context" not in chosen and "config" in chosen:  # a new config, the same context
            changed["config"] = {**chosen["config"], "configurable": current["context"]}
        return changed

    updated = await _records(request).replace(assistant.assistant_id, change, new_version=True)
    if updated is None:
        raise BadRequest(404, f"assistant {key[:80]!r} not found")
    return json_response(updated)


@handler
async def set_latest(request: Request) -> Response:
    body = await body_of(request)
    version = field(body, "version", int)
    if version is None or version < 1:
        raise BadRequest(422, "'version' must be a version number (1 or more)")
    key = str(request.path_params["assistant_id"])
    assistant = await visible_assistant(request, key, "update", {"assistant_id": key, "version": version})
    if assistant.stored is None:
        if version != 1:
            raise BadRequest(404, f"version {version} not found for assistant {assistant.assistant_id!r}")
        return json_response(assistant.record())
    records = _records(request)
    chosen = next((v for v in await records.versions(assistant.assistant_id) if v["version"] == version), None)
    if chosen is None:
        raise BadRequest(404, f"version {version} not found for assistant {assistant.assistant_id!r}")

    def change(current: AssistantRecord, _next: int) -> AssistantRecord:
        return {**current, "graph_id": chosen["graph_id"], "config": chosen["config"], "context": chosen["context"],
                "metadata": chosen["metadata"], "name": chosen["name"], "description": chosen["description"],
                "version": chosen["version"], "updated_at": now_iso()}

    updated = await records.replace(assistant.assistant_id, change, new_version=False)
    if updated is None:
        raise BadRequest(404, f"assistant {key[:80]!r} not found")
    return json_response(updated)


@handler
async def delete_assistant(request: Request) -> Response:
    key = str(request.path_params["assistant_id"])
    assistant = await visible_assistant(request, key, "delete")
    _changeable(assistant)
    if request.query_params.get("delete_threads", "").lower() == "true":
        await _delete_threads(request, assistant.assistant_id)
    # as langgraph-api does: its runs still waiting or going are cancelled (`interrupt`), on the threads the
    # caller may update; a running one stops within a moment, under the settings it started with
    svc = service(request)
    await cancel_runs_of_assistant(svc.records, svc.assistants, assistant.assistant_id, _may_update(request))
    await _records(request).delete(assistant.assistant_id)
    return Response(status_code=204)


def _may_update(request: Request) -> Callable[[str], Awaitable[bool]]:
    """Whether the `threads.update` handler lets the caller change the thread (cancel its runs)."""
    async def allowed(thread_id: str) -> bool:
        try:
            rule = await authorize(request, "threads", "update", {"thread_id": thread_id})
        except BadRequest:
            return False
        record = await service(request).records.get_thread(thread_id)
        return record is not None and matches(record.get("metadata"), rule)
    return allowed


async def _delete_threads(request: Request, assistant_id: str) -> None:
    """The threads whose metadata names the assistant, each one the `threads.delete` handler lets the caller
    delete (the others are left, as the Agent Server leaves them); none is deleted if one has a run going."""
    svc = service(request)
    doomed = []
    for thread_id in await svc.records.indexed.ids_where("assistant_id", assistant_id):
        record = await svc.records.get_thread(thread_id)
        if record is None or (record.get("metadata") or {}).get("assistant_id") != assistant_id:
            continue
        try:
            allowed = await authorize(request, "threads", "delete", {"thread_id": thread_id})
        except BadRequest:
            continue
        if matches(record.get("metadata"), allowed):
            doomed.append(thread_id)
    for thread_id in doomed:
        if await svc.records.busy(thread_id):
            raise BadRequest(409, f"thread {thread_id!r} of assistant {assistant_id!r} has a run in progress or "
                                  "waiting: cancel it first (nothing was deleted)")
    for thread_id in doomed:
        await remove_thread(svc, thread_id)


ROUTES += [
    Route("/assistants", create_assistant, methods=["POST"]),
    Route("/assistants/{assistant_id}", update_assistant, methods=["PATCH"]),
    Route("/assistants/{assistant_id}", delete_assistant, methods=["DELETE"]),
    Route("/assistants/{assistant_id}/latest", set_latest, methods=["POST"]),
]
