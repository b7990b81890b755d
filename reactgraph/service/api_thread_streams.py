"""A thread's own streams: `threads.join_stream` (GET /threads/{id}/stream: every run's events as they come,
each run's end as `metadata {"status": "run_done"}`), and the thread-centric (v3) protocol of langgraph-sdk's
`threads.stream` — commands (POST /threads/{id}/commands: `run.start`, `input.respond`) and the event stream
(POST /threads/{id}/stream/events, SSE, resumed from `since` or `Last-Event-ID`). Both stay open until the
client leaves, as langgraph-api's do; both hold one of the process's stream slots meanwhile."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reactgraph.service.api_common import body_of, handler, json_response
from reactgraph.service.api_runs import create
from reactgraph.service.api_threads import existing_thread
from reactgraph.service.events import END, ProtocolEvents, StreamFilter, ThreadReader, entry_id
from reactgraph.service.records import FINAL_RUN_STATUSES
from reactgraph.service.run_control import HeldStream
from reactgraph.service.wire import BadRequest

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
    if wanted.since is None and header.isdigit():  # an EventSource reconnecting: the `seq` it had last
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
                graphs[run_id] = str(((run or {}).get("kwargs", {}).get("config", {}).get("configurable", {})
                                      .get("graph_id")) or "")
            for out in protocol.events(entry, event, data, run_id, (run or {}).get("status")):
                if wanted.wants(out):
                    yield ServerSentEvent(data=json.dumps(out, ensure_ascii=False), event=out["method"],
                                          id=str(out["seq"]))

    svc.streams.take()
    return HeldStream(svc.streams, events(), ping=15)


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


ROUTES = [
    Route("/threads/{thread_id}/stream", join_thread_stream, methods=["GET"]),
    Route("/threads/{thread_id}/commands", protocol_command, methods=["POST"]),
    Route("/threads/{thread_id}/stream/events", protocol_stream, methods=["POST"]),
]
