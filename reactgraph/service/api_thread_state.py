"""A thread's state: get (the latest, or at a checkpoint), update (a checkpoint written as if by a node), history.

What LangGraph refuses of an update — a node the graph has not, `__end__`, values that are no update of this
state, messages LangChain cannot read, a subgraph the graph has not — is the client's: a 422 with its one line. A
checkpoint that cannot be read back is a 500 naming the thread and the damage (DamagedThread): the service's saver
raises for a damaged latest checkpoint instead of passing over it to an older one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reactgraph.memory.redis_checkpoint.reading import UnreadableCheckpoint
from reactgraph.memory.redis_checkpoint.serde import RefusedPayload
from reactgraph.service.api_common import body_of, handler, int_param, json_response
from reactgraph.service.api_threads import DamagedThread, existing_thread, graph_of
from reactgraph.service.auth import authorize, matches
from reactgraph.service.connections import REDIS_DOWN
from reactgraph.service.threads import thread_state
from reactgraph.service.wire import BadRequest, field

MAX_HISTORY = 1000
STATE_FIELDS = ("values", "next", "tasks", "checkpoint", "metadata", "created_at", "parent_checkpoint", "interrupts")


def _state_config(thread_id: str, checkpoint: dict[str, Any] | None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread_id}
    if checkpoint:
        for key in ("checkpoint_id", "checkpoint_ns"):
            if isinstance(checkpoint.get(key), str):
                configurable[key] = checkpoint[key]
    return {"configurable": configurable}


def _line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}"


@contextmanager
def _checkpoints_of(thread_id: str, *, update: bool = False) -> Iterator[None]:
    """A damaged checkpoint met in the block: DamagedThread. `update`: whatever else LangGraph raises applying the
    client's values (its reducers and message coercion raise ValueError, TypeError, KeyError, …) is a 422."""
    try:
        yield
    except (BadRequest, *REDIS_DOWN):
        raise
    except (UnreadableCheckpoint, RefusedPayload) as exc:
        raise DamagedThread(thread_id, str(exc)) from None
    except Exception as exc:
        if not update:
            raise
        raise BadRequest(422, f"the state update cannot be applied: {_line(exc)}") from None


@handler
async def get_state(request: Request) -> Response:
    svc, thread_id, record = await existing_thread(request)
    checkpoint_id = request.path_params.get("checkpoint_id")
    body = await body_of(request) if request.method == "POST" else {}
    checkpoint = field(body, "checkpoint", dict, {}) if body else {"checkpoint_id": checkpoint_id} if checkpoint_id \
        else {}
    subgraphs = body.get("subgraphs") is True or request.query_params.get("subgraphs") in ("true", "True", "1")
    select = field(body, "select", list) or request.query_params.getlist("select")
    with _checkpoints_of(thread_id):
        snapshot = await graph_of(svc, record).aget_state(_state_config(thread_id, checkpoint), subgraphs=subgraphs)
    return json_response(selected_state(thread_state(snapshot), select))


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
    values = field(body, "values", (dict, list))
    with _checkpoints_of(thread_id, update=True):
        config = await graph_of(svc, record).aupdate_state(_state_config(thread_id, checkpoint), values,
                                                           as_node=field(body, "as_node", str))
    await svc.records.put_thread(record)
    return json_response({"checkpoint": config["configurable"]})


@handler
async def history(request: Request) -> Response:
    svc, thread_id, record = await existing_thread(request)
    body = await body_of(request) if request.method == "POST" else dict(request.query_params)
    limit = int_param(body.get("limit"), "limit", 10, 1, MAX_HISTORY)
    select = field(body, "select", list) if request.method == "POST" else request.query_params.getlist("select")
    before = field(body, "before", dict) or ({"checkpoint_id": body["before"]} if isinstance(body.get("before"), str)
                                             else None)
    states = []
    graph = graph_of(svc, record)
    with _checkpoints_of(thread_id):
        async for snapshot in graph.aget_state_history(_state_config(thread_id, field(body, "checkpoint", dict)),
                                                       limit=limit, filter=field(body, "metadata", dict),
                                                       before=_state_config(thread_id, before) if before else None):
            states.append(selected_state(thread_state(snapshot), select))
    return json_response(states)


def selected_state(state: dict[str, Any], select: list[Any] | None) -> dict[str, Any]:
    """`state` with only the `select`ed fields (all when none); `values.<key>` keeps that key of the values."""
    if not select:
        return state
    if bad := [f for f in select if not isinstance(f, str) or (f.split(".")[0] not in STATE_FIELDS)
               or ("." in f and not f.startswith("values."))]:
        raise BadRequest(422, f"'select' takes {', '.join(STATE_FIELDS)} or values.<key>; got {str(bad[0])[:80]!r}")
    chosen = {key: value for key, value in state.items() if key in select}
    if "values" not in select and (keys := [f[len("values."):] for f in select if f.startswith("values.")]):
        values: dict[str, Any] = state["values"] if isinstance(state.get("values"), dict) else {}
        chosen["values"] = {key: values[key] for key in keys if key in values}
    return chosen


ROUTES = [
    Route("/threads/{thread_id}/state", get_state, methods=["GET"]),
    Route("/threads/{thread_id}/state", update_state, methods=["POST"]),
    Route("/threads/{thread_id}/state/checkpoint", get_state, methods=["POST"]),
    Route("/threads/{thread_id}/state/{checkpoint_id}", get_state, methods=["GET"]),
    Route("/threads/{thread_id}/history", history, methods=["GET", "POST"]),
]
