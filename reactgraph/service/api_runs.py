"""The runs API: runs created (in the background, streamed or waited on; on a thread or stateless), listed, read,
joined, cancelled and deleted, and a thread's own streams.

An API process only stores and enqueues a run and reads its events from Redis; a worker, anywhere, executes
it. So a stream is the same whether its client stays or reconnects to another process with `Last-Event-ID`. A
thread's streams — `threads.join_stream` and the thread-centric (v3) protocol of `threads.stream`, with its
`run.start` and `input.respond` commands — read every run of the thread, stay open until the client leaves as
langgraph-api's do, and hold one of the process's stream slots meanwhile.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable
from typing import Any

from sse_starlette import ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reactgraph.service.api_common import Service, body_of, handler, int_param, json_response, service, thread_id_of
from reactgraph.service.api_threads import existing_thread, thread_quota, thread_record
from reactgraph.service.assistants.api import run_assistant
from reactgraph.service.assistants.catalogue import with_assistant
from reactgraph.service.auth import authorize, caller_of, matches
from reactgraph.service.events import END, ProtocolEvents, StreamFilter, ThreadReader, entry_id, run_mode_filter
from reactgraph.service.quotas import owner_of, quotas_of
from reactgraph.service.records import (
    FINAL_RUN_STATUSES,
    RUN_STATUSES,
    RunRecord,
    ThreadRecord,
    create_counted,
    new_id,
    now_iso,
)
from reactgraph.service.run_control import (
    HeldStream,
    cancel_now,
    end_if_abandoned,
    event_stream,
    final_values,
    is_active,
    locations,
    nothing_to_cancel,
    show_thread_dequeued,
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
                 ) -> tuple[Service, ThreadRecord, RunRecord]:
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
    await check_graph_input(assistant.graph, kwargs,
                            lambda: channel_values(saver, assistant.graph, thread_id, thread is not None))
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
    run: RunRecord = {"run_id": new_id(), "thread_id": thread_id, "assistant_id": assistant.assistant_id,
           # as langgraph-api: a run that waits `after_seconds` is created that much later
           "created_at": later_iso(after) if after else stamp, "updated_at": stamp, "status": "pending",
           "metadata": metadata, "kwargs": kwargs, "multitask_strategy": chosen,
           "langsmith_session_name": None}
    await _enqueue(request, svc, run, after)
    return svc, thread, run


async def _enqueue(request: Request, svc: Service, run: RunRecord, after: float) -> None:
    """Store the run on its thread under the caller's `runs_in_flight` quota and its multitask strategy (the runs it
    interrupts or rolls back stop first), and tell the workers (a scheduled run: once it is due)."""
    thread_id, chosen = run["thread_id"], run["multitask_strategy"]
    await svc.queue.mark(thread_id)  # before the run is stored: see work_queue's docstring
    def store(record: RunRecord) -> Awaitable[tuple[bool, list[str]]]:
        return schedule_run(svc.records, record, after) if after else svc.records.create_run(record)

    created, ahead = await create_counted(svc.records, owner_of(request), quotas_of(request).of("runs_in_flight"),
                                          run, store)
    if not created:
        raise BadRequest(409, f"thread {thread_id!r} is busy with another run (multitask_strategy 'reject')")
    if chosen in ("interrupt", "rollback"):
        for earlier in ahead:  # they stop (and, for rollback, vanish) before this run starts
            await svc.records.cancel(thread_id, earlier, chosen)
    await svc.records.count("created")
    if not after:  # a scheduled run is notified once it is due (scheduled_runs.promote_due)
        # busy from now, as on the Agent Server: the run is the thread's work from its creation (a scheduled run's
        # thread reads busy from its start)
        await svc.records.set_thread_status_if(thread_id, run["run_id"], "queued", "busy")
        await svc.queue.notify(thread_id)


async def _existing_run(request: Request, action: str = "read") -> tuple[Service, str, RunRecord]:
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
    return json_response(await final_values(svc, await svc.records.get_thread(thread_id), run))


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
        return json_response([{key: value for key, value in run.items() if key in select} for run in runs])
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
    if run["status"] == "pending":  # it never started: the thread shows its status again if nothing else waits
        await show_thread_dequeued(svc.records, svc.assistants, run)
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


THREAD_STREAM_MODES = ("run_modes", "lifecycle", "state_update")
# What a run started over the protocol streams: its channels that map from LangGraph's modes.
PROTOCOL_RUN_MODES = ["values", "updates", "custom", "tasks", "checkpoints"]
REPLAYED_RUNS = 20  # a new protocol stream replays the newest run and those of the newest that have yet to end


def _thread_modes(request: Request) -> list[str]:
    """langgraph-api reads `stream_modes` (comma-separated); langgraph-sdk sends `stream_mode` (repeated)."""
    given = [m.strip() for v in request.query_params.getlist("stream_modes") for m in v.split(",")]
    modes = [m for m in given + request.query_params.getlist("stream_mode") if m] or ["run_modes"]
    if bad := [m for m in modes if m not in THREAD_STREAM_MODES]:
        raise BadRequest(422, f"'stream_mode' must be among {', '.join(THREAD_STREAM_MODES)}, got {bad[0][:40]!r}")
    if "state_update" in modes:
        raise BadRequest(501, "'stream_mode' state_update (state updates made through the API, as events) is not "
                              "served by reactgraph serve: use run_modes or lifecycle")
    return modes


@handler
async def join_thread_stream(request: Request) -> Response:
    svc, thread_id, _thread = await existing_thread(request)
    modes = _thread_modes(request)
    header = request.headers.get("last-event-id")
    try:
        after = entry_id(header) if header else None  # none: from now on, as langgraph-api joins
    except ValueError as exc:
        raise BadRequest(422, str(exc)) from None
    reader = ThreadReader(svc.streams.client, svc.records.keys, thread_id)

    async def events() -> AsyncIterator[ServerSentEvent]:
        await reader.start(after)
        async for entry, event, data, run_id in reader.events():
            if event == END:
                event, data = "metadata", json.dumps({"status": "run_done", "run_id": run_id})
            elif "run_modes" not in modes and not (event == "metadata" and '"attempt"' in data):
                continue  # `lifecycle` alone: each run's start and end
            yield ServerSentEvent(data=data, event=event, id=entry)

    svc.streams.take()
    return HeldStream(svc.streams, events(), ping=15)


@handler
async def protocol_stream(request: Request) -> Response:
    wanted = StreamFilter(await body_of(request))
    svc, thread_id, _thread = await existing_thread(request)
    header = (request.headers.get("last-event-id") or "").strip()
    if wanted.since is None and header.isascii() and header.isdigit():  # an EventSource reconnecting: its last `seq`
        wanted.since = int(header)
    reader = ThreadReader(svc.streams.client, svc.records.keys, thread_id)
    graphs: dict[str, str] = {}
    protocol = ProtocolEvents(graphs)

    async def events() -> AsyncIterator[ServerSentEvent]:
        since = wanted.since
        await reader.start(f"{since // 1000}-{since % 1000}" if since is not None else None,
                           replay=await _replayed(svc, thread_id, reader) if since is None else ())
        async for entry, event, data, run_id in reader.events():
            run = await svc.records.get_run(thread_id, run_id) if run_id not in graphs or event == END else None
            if run_id not in graphs:
                graphs[run_id] = _graph_id(run)
            for out in protocol.events(entry, event, data, run_id, run["status"] if run is not None else None):
                if wanted.wants(out):
                    yield ServerSentEvent(data=json.dumps(out, ensure_ascii=False), event=out["method"],
                                          id=str(out["seq"]))

    svc.streams.take()
    return HeldStream(svc.streams, events(), ping=15)


def _graph_id(run: RunRecord | None) -> str:
    """The graph a run executes, as api_runs recorded it in its config ('' when it is not known)."""
    kwargs = run.get("kwargs", {}) if run is not None else {}
    return str(kwargs.get("config", {}).get("configurable", {}).get("graph_id") or "")


async def _replayed(svc: Any, thread_id: str, reader: ThreadReader) -> set[str]:
    """The runs a new protocol stream replays from their start: the newest, and those yet to end."""
    newest = (await reader.run_ids())[-REPLAYED_RUNS:]
    going = {run_id for run_id in newest
             if (run := await svc.records.get_run(thread_id, run_id)) and run["status"] not in FINAL_RUN_STATUSES}
    return going | set(newest[-1:])


@handler
async def protocol_command(request: Request) -> Response:
    try:
        payload = await body_of(request)
    except BadRequest as exc:
        return _error(None, "invalid_argument", str(exc), 400)
    command_id, method = payload.get("id"), payload.get("method")
    if not isinstance(command_id, int) or isinstance(command_id, bool) or not isinstance(method, str):
        return _error(None, "invalid_argument", "protocol commands must include an integer id and string method", 400)
    given = payload.get("params")
    params: dict[str, Any] = given if isinstance(given, dict) else {}
    try:
        if method == "run.start":
            body = _run_start_body(params)
        elif method == "input.respond":
            body = await _respond_body(request, params)
        else:
            return _error(command_id, "not_supported", f"protocol command {method[:80]!r} is not served by "
                                                       "reactgraph serve (it serves run.start and input.respond)", 501)
        _svc, _thread, run = await create(request, body=body)
    except BadRequest as exc:
        return _error(command_id, "invalid_argument", str(exc), exc.status)
    return json_response({"type": "success", "id": command_id, "result": {"run_id": run["run_id"]}})


def _run_start_body(params: dict[str, Any]) -> dict[str, Any]:
    known = {"assistant_id", "input", "config", "metadata", "langsmith_tracer"}
    if unknown := sorted(set(params) - known):
        raise BadRequest(422, f"run.start takes {', '.join(sorted(known))}; got {', '.join(unknown[:10])}")
    # the thread is made by its first run, as langgraph-api does for this protocol
    return {**params, "if_not_exists": "create", "stream_mode": PROTOCOL_RUN_MODES, "stream_subgraphs": True}


async def _respond_body(request: Request, params: dict[str, Any]) -> dict[str, Any]:
    """input.respond: a run on the thread's assistant that answers the interrupt by its id (and fails, leaving the
    thread as it was, if no such interrupt waits: strict_resume)."""
    interrupt_id = params.get("interrupt_id")
    if not isinstance(interrupt_id, str) or not interrupt_id:
        raise BadRequest(422, "input.respond needs 'interrupt_id', the id of the interrupt it answers")
    _svc, _thread_id, thread = await existing_thread(request)
    assistant = (thread.get("metadata") or {}).get("assistant_id") or (thread.get("metadata") or {}).get("graph_id")
    return {"assistant_id": assistant or "react", "command": {"resume": {interrupt_id: params.get("response")}},
            "stream_mode": PROTOCOL_RUN_MODES, "stream_subgraphs": True, "strict_resume": True}


def _error(command_id: Any, kind: str, message: str, status: int) -> Response:
    """The protocol's error envelope, with `detail` too (every error of this service carries one)."""
    return json_response({"type": "error", "id": command_id, "error": kind, "message": message, "detail": message},
                         status)


ROUTES += [
    Route("/threads/{thread_id}/stream", join_thread_stream, methods=["GET"]),
    Route("/threads/{thread_id}/commands", protocol_command, methods=["POST"]),
    Route("/threads/{thread_id}/stream/events", protocol_stream, methods=["POST"]),
]
