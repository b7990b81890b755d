"""Assistants, changed: create, update (a new version), set the latest version, delete — kept in Redis.

A created assistant is one of the served graphs with its own settings (config, context) and description
(name, description, metadata). Its settings pass the checks a run's settings pass (the operator's run policy:
a model off the list is refused). The `assistants.create/update/delete` auth handlers decide as for threads:
what a create handler writes into the metadata (an owner) is kept, and a filter one returns hides what is
outside it (404). The graphs' own assistants are the operator's: they are read, never changed. Deleting an
assistant cancels its pending and running runs, as langgraph-api does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reactgraph.service.api_assistants import lookup, visible_assistant
from reactgraph.service.api_common import body_of, handler, json_response, service
from reactgraph.service.api_threads import remove_thread
from reactgraph.service.assistant_input import IF_EXISTS, described, graph_of, settings, uuid_of
from reactgraph.service.assistants import BUILDERS, Assistant
from reactgraph.service.auth import authorize, matches
from reactgraph.service.quotas import owner_of, quotas_of
from reactgraph.service.records import new_id, now_iso
from reactgraph.service.run_control import cancel_runs_of_assistant
from reactgraph.service.wire import BadRequest, field

GRAPHS = tuple(BUILDERS)


def _changeable(assistant: Assistant) -> None:
    if assistant.stored is None:
        raise BadRequest(409, f"assistant {assistant.assistant_id!r} is this server's own for graph "
                              f"{assistant.graph_id!r}: its settings are the operator's; create an assistant of "
                              f"graph {assistant.graph_id!r} to choose others")


def _records(request: Request) -> Any:
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
    chosen = {"config": {}, "context": {}, **settings(body, svc.assistants.run_policy, svc.assistants.gateway)}
    about = {"metadata": {}, "name": "Untitled", "description": None, **described(body)}
    # the create handler may write into the metadata (an owner, say) before the assistant is made with it
    value = {"assistant_id": assistant_id, "graph_id": graph_id, "config": chosen["config"],
             "context": chosen["context"], "metadata": dict(about["metadata"]), "name": about["name"]}
    allowed = await authorize(request, "assistants", "create", value)
    metadata = value["metadata"] if isinstance(value.get("metadata"), dict) else {}
    existing = await lookup(svc, assistant_id)
    if existing is None:
        stamp = now_iso()
        record = {"assistant_id": assistant_id, "graph_id": graph_id, **chosen, "metadata": metadata,
                  "name": about["name"], "description": about["description"], "created_at": stamp,
                  "updated_at": stamp, "version": 1}
        stored = await _records(request).create(record, owner_of(request), quotas_of(request).of("assistants"))
        if stored is None:
            return json_response(record)
        existing = svc.assistants.of_record(stored) if stored else None
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
    value = {"assistant_id": key, "graph_id": graph_id, "config": chosen.get("config"),
             "context": chosen.get("context"), "metadata": dict(about.get("metadata") or {}), "name": about.get("name")}
    assistant = await visible_assistant(request, key, "update", value)
    _changeable(assistant)
    if isinstance(value.get("metadata"), dict):  # as the handler left it (a key it removed is not merged in)
        about["metadata"] = value["metadata"]

    def change(current: dict[str, Any], version: int) -> dict[str, Any]:
        changed = {**current, **({"graph_id": graph_id} if graph_id else {}), **chosen, **about,
                   "metadata": {**current["metadata"], **about.get("metadata", {})},
                   "updated_at": now_iso(), "version": version}
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

    def change(current: dict[str, Any], _next: int) -> dict[str, Any]:
        return {**current, **{k: chosen[k] for k in ("graph_id", "config", "context", "metadata", "name",
                                                      "description", "version")}, "updated_at": now_iso()}

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


ROUTES = [
    Route("/assistants", create_assistant, methods=["POST"]),
    Route("/assistants/{assistant_id}", update_assistant, methods=["PATCH"]),
    Route("/assistants/{assistant_id}", delete_assistant, methods=["DELETE"]),
    Route("/assistants/{assistant_id}/latest", set_latest, methods=["POST"]),
]
