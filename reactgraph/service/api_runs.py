"""Runs: create (background, streamed, waited on; on a thread or stateless), list, get, delete, join, join the
stream, cancel.

The API process only stores and enqueues runs and reads their events from Redis: a worker (any, anywhere)
executes them. A stream is therefore the same whether the client stays connected or reconnects to another
API process with `Last-Event-ID`.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reactgraph.service.api_assistants import run_assistant
from reactgraph.service.api_common import (
    Service,
    body_of,
    handler,
    int_param,
    json_response,
    service,
    thread_id_of,
)
from reactgraph.service.api_threads import existing_thread, thread_quota, thread_record
from reactgraph.service.assistant_input import with_assistant
from reactgraph.service.auth import authorize, caller_of, matches
from reactgraph.service.events import entry_id, run_mode_filter
from reactgraph.service.quotas import owner_of, quotas_of
from reactgraph.service.records import FINAL_RUN_STATUSES, RUN_STATUSES, create_counted, new_id, now_iso
from reactgraph.service.run_control import (
    cancel_now,
    end_if_abandoned,
    event_stream,
    final_values,
    is_active,
    locations,
    nothing_to_cancel,
    streamed_result,
    wait_for_end,
)
from reactgraph.service.run_request import (
    background,
    channel_values,
    check_checkpoint,
    check_graph_input,
    check_nodes,
    on_completion,
    on_disconnect,
    run_kwargs,
    strategy,
)
from reactgraph.service.wire import BadRequest, field
from reactgraph.service.work_queue import cancel_scheduled, later_iso, schedule_run

_RUN_ID = re.compile(r"[0-9a-fA-F-]{1,64}")
RUN_FIELDS = ("run_id", "thread_id", "assistant_id", "created_at", "updated_at", "status", "metadata", "kwargs",
              "multitask_strategy")


async def create(request: Request, *, stateless: bool = False, body: dict[str, Any] | None = None
                 ) -> tuple[Service, dict[str, Any], dict[str, Any]]:
    """Store and enqueue the body's run (`body`, else the request's): on the path's thread, or (`stateless`) on a
    new thread of its own, which its worker deletes after the run unless the body says `on_completion: keep` (as
    langgraph-api does)."""
    svc, body = service(request), body if body is not None else await body_of(request)
    thread_id, saver = new_id() if stateless else thread_id_of(request), svc.assistants.checkpointer
    assistant = await run_assistant(request, field(body, "assistant_id", str))
    # a created assistant's settings under the run's own, checked together as the run's
    kwargs = run_kwargs(with_assistant(body, assistant.stored), svc.assistants.run_policy, svc.assistants.gateway)
    chosen = strategy(body)
    check_nodes(assistant.graph, kwargs)
    if_not_exists = "create" if stateless else field(body, "if_not_exists", str, "reject")
    if if_not_exists not in ("create", "reject"):
        raise BadRequest(422, f"'if_not_exists' must be create or reject, got {if_not_exists!r}")
    on_disconnect(body)
    if stateless:
        kwargs["temporary"] = on_completion(body) == "delete"
    # `threads.create_run` (else `threads.*`, …): its filter is the thread's; it may write the run's metadata
    value: dict[str, Any] = {
        "thread_id": thread_id, "assistant_id": assistant.assistant_id, "run_id": None, "status": "pending",
        "metadata": dict(field(body, "metadata", dict, {})), "multitask_strategy": chosen,
        "if_not_exists": if_not_exists, "after_seconds": kwargs["after_seconds"], "kwargs": kwargs,
        "prevent_insert_if_inflight": chosen == "reject"}
    allowed = await authorize(request, "threads", "create_run", value)
    metadata = value["metadata"] if isinstance(value.get("metadata"), dict) else {}
    thread = await thread_record(svc, thread_id, with_values=False)
    if thread is not None and not matches(thread.get("metadata"), allowed):
        thread = None  # not the caller's: as if it did not exist, and not to be made either
        if_not_exists = "reject"
    # a refused input creates no thread; a thread not the caller's has no values to read
    await check_graph_input(assistant.graph, kwargs, lambda: channel_values(saver, thread_id, thread is not None))
    if thread is None:
        if if_not_exists != "create":
            raise BadRequest(404, f"thread {thread_id!r} not found")
        thread = await svc.records.create_thread(thread_id, dict(metadata), *thread_quota(request))
    await check_checkpoint(saver, thread_id, kwargs.get("checkpoint_id"))
    if (caller := caller_of(request)) is not None:  # who the graph runs for, never what the client said
        kwargs["config"]["configurable"].update(caller.configurable())
    # which graph runs (a worker finds a created assistant's by it): the service's word, as on the Agent Server
    kwargs["config"]["configurable"].update(graph_id=assistant.graph_id, assistant_id=assistant.assistant_id)
    if not (thread.get("metadata") or {}).get("graph_id"):
        thread["metadata"] = {**(thread.get("metadata") or {}), "graph_id": assistant.graph_id,
                              "assistant_id": assistant.assistant_id}
        await svc.records.put_thread(thread)
    stamp, after = now_iso(), kwargs["after_seconds"]
    run = {"run_id": new_id(), "thread_id": thread_id, "assistant_id": assistant.assistant_id,
           # as langgraph-api: a run that waits `after_seconds` is created that much later
           "created_at": later_iso(after) if after else stamp, "updated_at": stamp, "status": "pending",
           "metadata": metadata, "kwargs": kwargs, "multitask_strategy": chosen,
           "langsmith_session_name": None}
    await _enqueue(request, svc, run, after)
    return svc, thread, run


async def _enqueue(request: Request, svc: Service, run: dict[str, Any], after: float) -> None:
    """Store the run on its thread under the caller's `runs_in_flight` quota and its multitask strategy (the runs it
    interrupts or rolls back stop first), and tell the workers (a scheduled run: once it is due)."""
    thread_id, chosen = run["thread_id"], run["multitask_strategy"]
    await svc.queue.mark(thread_id)  # before the run is stored: see work_queue's docstring
    store = (lambda record: schedule_run(svc.records, record, after)) if after else svc.records.create_run
    created, ahead = await create_counted(svc.records, owner_of(request), quotas_of(request).of("runs_in_flight"),
                                          run, store)
    if not created:
        raise BadRequest(409, f"thread {thread_id!r} is busy with another run (multitask_strategy 'reject')")
    if chosen in ("interrupt", "rollback"):
        for earlier in ahead:  # they stop (and, for rollback, vanish) before this run starts
            await svc.records.cancel(thread_id, earlier, chosen)
    await svc.records.count("created")
    if not after:  # a scheduled run is notified once it is due (scheduled_runs.promote_due)
        await svc.queue.notify(thread_id)


async def _existing_run(request: Request, action: str = "read") -> tuple[Service, str, dict[str, Any]]:
    """The path's run, if its thread is the caller's to `action` (`threads.<action>`): else a 404."""
    svc, thread_id, _thread = await existing_thread(request, action, {"run_id": request.path_params["run_id"]})
    run_id = str(request.path_params["run_id"])
    if not _RUN_ID.fullmatch(run_id):  # ids are the UUIDs this service makes: anything else names no run
        raise BadRequest(404, f"run {run_id[:80]!r} not found on thread {thread_id!r}")
    run = await svc.records.get_run(thread_id, run_id)
    if run is None:
        raise BadRequest(404, f"run {run_id!r} not found on thread {thread_id!r}")
    return svc, thread_id, run


@handler
async def create_run(request: Request) -> Response:
    background(await body_of(request))
    _svc, _thread, run = await create(request)
    return json_response(run, headers={"Content-Location": locations(run)["Content-Location"]})


@handler
async def create_stateless_run(request: Request) -> Response:
    background(await body_of(request))
    _svc, _thread, run = await create(request, stateless=True)
    return json_response(run, headers={"Content-Location": locations(run, stateless=True)["Content-Location"]})


async def _stream(request: Request, stateless: bool) -> Response:
    slots = service(request).streams
    slots.take(owner_of(request))  # before the run exists: a stream refused for the limit creates no run
    try:
        svc, _thread, run = await create(request, stateless=stateless)
        body = await body_of(request)
        cancel_on_disconnect = on_disconnect(body) == "cancel"
        return event_stream(svc, run, "0", cancel_on_disconnect, locations(run, stateless))
    except BaseException:
        slots.give_back()
        raise


@handler
async def stream_run(request: Request) -> Response:
    return await _stream(request, stateless=False)


@handler
async def stream_stateless_run(request: Request) -> Response:
    return await _stream(request, stateless=True)


@handler
async def join_stream(request: Request) -> Response:
    svc, _thread_id, run = await _existing_run(request)
    try:
        after = entry_id(request.headers.get("last-event-id"))
    except ValueError as exc:
        raise BadRequest(422, str(exc)) from None
    cancel = request.query_params.get("cancel_on_disconnect") in ("true", "True", "1")
    keep = run_mode_filter(request.query_params.getlist("stream_mode"), run["kwargs"].get("stream_mode", []))
    svc.streams.take(owner_of(request))
    return event_stream(svc, run, after, cancel, keep=keep)


@handler
async def wait_run(request: Request) -> Response:
    # before the run exists: a wait refused for the limit creates none
    async with service(request).streams.held(owner_of(request)):
        svc, thread, run = await create(request)
        await wait_for_end(svc, run, request if on_disconnect(await body_of(request)) == "cancel" else None)
    return json_response(await final_values(svc, thread, run),
                         headers={"Content-Location": locations(run)["Content-Location"]})


@handler
async def wait_stateless_run(request: Request) -> Response:
    """The answer comes from the run's events: its thread is gone once it has ended (unless kept)."""
    async with service(request).streams.held(owner_of(request)):
        svc, _thread, run = await create(request, stateless=True)
        await wait_for_end(svc, run, request if on_disconnect(await body_of(request)) == "cancel" else None)
        answer = await streamed_result(svc, run)
    return json_response(answer, headers={"Content-Location": locations(run)["Content-Location"]})


@handler
async def join_run(request: Request) -> Response:
    svc, thread_id, run = await _existing_run(request)
    async with svc.streams.held(owner_of(request)):
        await wait_for_end(svc, run)
    thread = await svc.records.get_thread(thread_id) or {"thread_id": thread_id}
    return json_response(await final_values(svc, thread, run))


@handler
async def list_runs(request: Request) -> Response:
    svc, thread_id, thread = await existing_thread(request)
    if not matches(thread.get("metadata"), await authorize(request, "threads", "search", {"thread_id": thread_id})):
        raise BadRequest(404, f"thread {thread_id!r} not found")
    status = request.query_params.get("status")
    if status is not None and status not in RUN_STATUSES:
        raise BadRequest(422, f"'status' must be one of {', '.join(RUN_STATUSES)}, got {status!r}")
    runs = await svc.records.list_runs(thread_id, limit=int_param(request.query_params.get("limit"), "limit", 10, 1),
                                       offset=int_param(request.query_params.get("offset"), "offset", 0, 0, 10**6),
                                       status=status)
    if select := [name for name in request.query_params.getlist("select") if name]:  # runs.list(select=[…])
        if unknown := sorted(set(select) - set(RUN_FIELDS)):
            raise BadRequest(422, f"'select' takes {', '.join(RUN_FIELDS)}; got {', '.join(unknown[:5])}")
        runs = [{key: value for key, value in run.items() if key in select} for run in runs]
    return json_response(runs)


@handler
async def get_run(request: Request) -> Response:
    _svc, _thread_id, run = await _existing_run(request)
    return json_response(run)


@handler
async def delete_run(request: Request) -> Response:
    svc, thread_id, run = await _existing_run(request, "delete")
    if run["status"] not in FINAL_RUN_STATUSES and run["status"] != "pending":
        raise BadRequest(409, f"run {run['run_id']!r} is {run['status']}: cancel it first")
    if await is_active(svc, thread_id, run["run_id"]):
        if not await end_if_abandoned(svc.records, svc.assistants, run):  # its thread's worker is stopping it
            raise BadRequest(409, f"run {run['run_id']!r} is being stopped: delete it once it has (runs.join)")
        if await svc.records.busy(thread_id):  # runs that waited behind the abandoned one: a worker takes them
            await svc.queue.notify(thread_id)
    await svc.records.delete_run(thread_id, run["run_id"])
    return Response(status_code=204)


@handler
async def cancel_run(request: Request) -> Response:
    svc, _thread_id, run = await _existing_run(request, "update")
    action = request.query_params.get("action", "interrupt")
    if action not in ("interrupt", "rollback"):
        raise BadRequest(422, f"'action' must be interrupt or rollback, got {action!r}")
    if run["status"] in FINAL_RUN_STATUSES:  # as langgraph-api: only a pending or running run can be cancelled
        raise nothing_to_cancel(run)
    # from here the run reads `interrupted` (or, for rollback, is gone); its worker stops it within a moment
    where = await cancel_now(svc.records, svc.assistants, run, action)
    if where == "done" and await cancel_scheduled(svc.records, run, action):
        where = "pending"  # it was waiting for its time (after_seconds): it never starts
    if where == "done":
        raise nothing_to_cancel(run)
    if request.query_params.get("wait") in ("true", "True", "1"):  # until its worker has stopped it
        if where != "active":
            return json_response({})
        async with svc.streams.held(owner_of(request)):
            return json_response(await streamed_result(svc, run))
    return Response(status_code=202)


ROUTES = [
    Route("/runs", create_stateless_run, methods=["POST"]),
    Route("/runs/stream", stream_stateless_run, methods=["POST"]),
    Route("/runs/wait", wait_stateless_run, methods=["POST"]),
    Route("/threads/{thread_id}/runs", create_run, methods=["POST"]),
    Route("/threads/{thread_id}/runs", list_runs, methods=["GET"]),
    Route("/threads/{thread_id}/runs/stream", stream_run, methods=["POST"]),
    Route("/threads/{thread_id}/runs/wait", wait_run, methods=["POST"]),
    Route("/threads/{thread_id}/runs/{run_id}", get_run, methods=["GET"]),
    Route("/threads/{thread_id}/runs/{run_id}", delete_run, methods=["DELETE"]),
    Route("/threads/{thread_id}/runs/{run_id}/join", join_run, methods=["GET"]),
    Route("/threads/{thread_id}/runs/{run_id}/stream", join_stream, methods=["GET"]),
    Route("/threads/{thread_id}/runs/{run_id}/cancel", cancel_run, methods=["POST"]),
]
