"""A thread's checkpoints as clients see them: its state now or at a checkpoint, updating it, and its history."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reactgraph.service.api_common import body_of, handler, int_param, json_response
from reactgraph.service.api_threads import existing_thread, graph_of
from reactgraph.service.auth_rules import authorize, matches
from reactgraph.service.thread_state import thread_state
from reactgraph.service.wire import BadRequest, field

MAX_HISTORY = 1000


def _state_config(thread_id: str, checkpoint: dict[str, Any] | None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread_id}
    if checkpoint:
        for key in ("checkpoint_id", "checkpoint_ns"):
            if isinstance(checkpoint.get(key), str):
                configurable[key] = checkpoint[key]
    return {"configurable": configurable}


@handler
async def get_state(request: Request) -> Response:
    svc, thread_id, record = await existing_thread(request)
    checkpoint_id = request.path_params.get("checkpoint_id")
    if request.method == "POST":
        checkpoint = field(await body_of(request), "checkpoint", dict, {})
    else:
        checkpoint = {"checkpoint_id": checkpoint_id} if checkpoint_id else {}
    subgraphs = request.query_params.get("subgraphs") in ("true", "True", "1")
    snapshot = await graph_of(svc, record).aget_state(_state_config(thread_id, checkpoint), subgraphs=subgraphs)
    return json_response(thread_state(snapshot))


@handler
async def update_state(request: Request) -> Response:
    svc, thread_id, record = await existing_thread(request)
    # seen (read) but not to be changed (update): a 403, as LangGraph's server answers it
    if not matches(record.get("metadata"), await authorize(request, "threads", "update", {"thread_id": thread_id})):
        raise BadRequest(403, f"Forbidden: thread {thread_id!r} is not yours to update")
    if await svc.records.busy(thread_id):
        raise BadRequest(409, f"thread {thread_id!r} has a run in progress or waiting")
    body = await body_of(request)
    checkpoint = field(body, "checkpoint", dict) or ({"checkpoint_id": body["checkpoint_id"]}
                                                     if isinstance(body.get("checkpoint_id"), str) else {})
    config = await graph_of(svc, record).aupdate_state(_state_config(thread_id, checkpoint), body.get("values"),
                                                       as_node=field(body, "as_node", str))
    await svc.records.put_thread(record)
    return json_response({"checkpoint": config["configurable"]})


@handler
async def history(request: Request) -> Response:
    svc, thread_id, record = await existing_thread(request)
    body = await body_of(request) if request.method == "POST" else dict(request.query_params)
    limit = int_param(body.get("limit"), "limit", 10, 1, MAX_HISTORY)
    before = field(body, "before", dict) or ({"checkpoint_id": body["before"]} if isinstance(body.get("before"), str)
                                             else None)
    states = []
    graph = graph_of(svc, record)
    async for snapshot in graph.aget_state_history(_state_config(thread_id, field(body, "checkpoint", dict)),
                                                   limit=limit, filter=field(body, "metadata", dict),
                                                   before=_state_config(thread_id, before) if before else None):
        states.append(thread_state(snapshot))
    return json_response(states)


ROUTES = [
    Route("/threads/{thread_id}/state", get_state, methods=["GET"]),
    Route("/threads/{thread_id}/state", update_state, methods=["POST"]),
    Route("/threads/{thread_id}/state/checkpoint", get_state, methods=["POST"]),
    Route("/threads/{thread_id}/state/{checkpoint_id}", get_state, methods=["GET"]),
    Route("/threads/{thread_id}/history", history, methods=["GET", "POST"]),
]
