"""The threads API: threads created, read, searched, counted, patched, copied and deleted, and their state read,
updated and listed as history.

A thread's checkpoints are the CLI's session checkpoints, so a CLI session is a thread here (it gets a record
the first time it is looked up) and the other way round. What LangGraph refuses of a state update is the
client's: a 422 with its one line. A checkpoint that cannot be read back is the service's: a 500 naming the
thread (DamagedThread), since the service's saver never passes over a damaged latest checkpoint to an older one.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reactgraph.graph.sessions import adrop_session_items
from reactgraph.memory.redis_checkpoint.reading import UnreadableCheckpoint
from reactgraph.memory.redis_checkpoint.serde import RefusedPayload
from reactgraph.memory.session_id import InvalidSessionId, check_session_id
from reactgraph.service.api_common import Service, body_of, handler, int_param, json_response, service, thread_id_of
from reactgraph.service.auth import authorize, matches
from reactgraph.service.connections import REDIS_DOWN
from reactgraph.service.index import Query, count, ms_of, search
from reactgraph.service.quotas import owner_of, quotas_of
from reactgraph.service.records import THREAD_STATUSES, ThreadRecord, new_id
from reactgraph.service.threads import (
    THREAD_FIELDS,
    apply_supersteps,
    cli_sessions,
    extract_paths,
    extracted,
    refuse_include,
    refuse_ttl,
    selected_fields,
    supersteps,
    thread_after_run,
    thread_query,
    thread_source,
    thread_state,
    values_match,
)
from reactgraph.service.titles import Titles, text_of
from reactgraph.service.wire import BadRequest, dumps, field, plain

log = logging.getLogger("reactgraph.service")
MAX_IDS = 1000  # ids a search or count may name


class DamagedThread(BadRequest):
    """A thread whose record or checkpoint cannot be read back: 500 with one line naming it (the CLI's
    UNREADABLE); a search or count passes over it with a log record instead."""

    def __init__(self, thread_id: str, reason: str) -> None:
        super().__init__(500, f"thread {thread_id!r} is unreadable: {reason}")


async def thread_record(svc: Service, thread_id: str, *, with_values: bool = True) -> ThreadRecord | None:
    """The thread's record (made from its checkpoints if only the CLI knew it), with its current values."""
    try:
        record = await svc.records.get_thread(thread_id, strict=True)
    except BadRequest as exc:
        raise DamagedThread(thread_id, str(exc)) from None
    graph = graph_of(svc, record)
    if record is None:
        snapshot, values = await current_state(graph, thread_id)
        if values is None:
            return None
        record = await svc.records.create_thread(thread_id, {"source": "cli"},
                                                 written=await _written(svc, thread_id, snapshot))
        if with_values:
            record["values"] = values  # just read: not read again
        return record
    if with_values:
        record["values"] = await current_values(graph, thread_id)
    return record


async def _written(svc: Service, thread_id: str, snapshot: Any) -> tuple[str, str] | None:
    """(when a CLI session's first checkpoint was written, when its newest was): the session's record tells its
    own times, not when the service first saw it. None (the record says now) when they cannot be read."""
    saver = svc.assistants.checkpointer
    try:
        first = await saver.acheckpoint_ids({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}},
                                            limit=1, oldest_first=True)
        found = await saver.aget_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": "",
                                                         "checkpoint_id": first[0]}})
        created = found.checkpoint.get("ts") if found is not None else None
    except REDIS_DOWN:
        raise
    except Exception:  # noqa: BLE001 - Redis content is input: a damaged first checkpoint only costs the times
        return None
    newest = snapshot.created_at
    # ISO times of a sane length (Redis content is input: a record holds no megabyte "time")
    if all(isinstance(s, str) and len(s) <= 40 and ms_of(s) for s in (created, newest)):
        return str(created), str(newest)
    return None


async def current_values(graph: Any, thread_id: str) -> Any:
    """The thread's current values as plain JSON (None: it has none), or DamagedThread when its checkpoint cannot
    be read back or holds what JSON cannot carry (NaN, nesting deeper than the encoder goes)."""
    return (await current_state(graph, thread_id))[1]


async def current_state(graph: Any, thread_id: str) -> tuple[Any, Any]:
    """(the thread's state snapshot, its values as in `current_values`), from one read of its checkpoint."""
    try:
        snapshot = await graph.aget_state({"configurable": {"thread_id": thread_id}})
        values = plain(snapshot.values) if snapshot.values else None
        dumps(values)
    except REDIS_DOWN:
        raise
    except Exception as exc:  # noqa: BLE001 - Redis content is input: whatever its decoding raises names the thread
        reason = (str(exc).splitlines() or [type(exc).__name__])[0][:300]
        raise DamagedThread(thread_id, reason) from None
    return snapshot, values


def graph_of(svc: Service, record: ThreadRecord | None) -> Any:
    graph_id = ((record.get("metadata") if record is not None else None) or {}).get("graph_id") or "react"
    return (svc.assistants.find(str(graph_id)) or svc.assistants.default()).graph


async def existing_thread(request: Request, action: str = "read", value: dict[str, Any] | None = None,
                          *, with_values: bool = False) -> tuple[Service, str, ThreadRecord]:
    """The path's thread if the caller may `action` it (`threads.<action>` handler, given `value`). A thread
    outside the handler's filter is a 404 like one that does not exist: its existence is not revealed."""
    svc, thread_id = service(request), thread_id_of(request)
    allowed = await authorize(request, "threads", action, {"thread_id": thread_id, **(value or {})})
    record = await thread_record(svc, thread_id, with_values=with_values)
    if record is None or not matches(record.get("metadata"), allowed):
        raise BadRequest(404, f"thread {thread_id!r} not found")
    return svc, thread_id, record


@handler
async def create_thread(request: Request) -> Response:
    svc, body = service(request), await body_of(request)
    raw_id = field(body, "thread_id", str) or new_id()
    try:
        thread_id = check_session_id(raw_id)
    except InvalidSessionId as exc:
        raise BadRequest(422, str(exc)) from None
    if_exists = field(body, "if_exists", str, "raise")
    refuse_ttl(body)
    steps = supersteps(body)
    # the handler may write metadata (an owner, say) into `value` before the thread is made with it
    value = {"thread_id": thread_id, "metadata": dict(field(body, "metadata", dict, {})), "if_exists": if_exists}
    allowed = await authorize(request, "threads", "create", value)
    existing = await thread_record(svc, thread_id)
    if existing is not None:
        if if_exists == "do_nothing" and matches(existing.get("metadata"), allowed):
            return json_response(existing)
        raise BadRequest(409, f"thread {thread_id!r} already exists")
    record = await svc.records.create_thread(thread_id, value["metadata"] if isinstance(value["metadata"], dict)
                                             else {}, *thread_quota(request))
    record["values"] = None
    if steps:  # as langgraph-api: the new thread starts from these updates (none of them: no thread)
        record = await _with_supersteps(svc, record, steps)
    return json_response(record)


async def _with_supersteps(svc: Service, record: ThreadRecord, steps: list[Any]) -> ThreadRecord:
    graph, thread_id = graph_of(svc, record), record["thread_id"]
    try:
        await apply_supersteps(graph, thread_id, steps)
    except BadRequest:
        await remove_thread(svc, thread_id)
        raise
    status, interrupts = await thread_after_run(graph, thread_id, "success")
    record = await svc.records.set_thread_status(thread_id, status, interrupts=interrupts) or record
    record["values"] = await current_values(graph, thread_id)
    return record


@handler
async def get_thread(request: Request) -> Response:
    refuse_include(request.query_params.get("include"))
    return json_response((await existing_thread(request, with_values=True))[2])


def thread_quota(request: Request) -> tuple[str, int | None]:
    """(whose quota a thread the request creates counts against, its `threads` limit)."""
    return owner_of(request), quotas_of(request).of("threads")


async def _query(request: Request, body: dict[str, Any]) -> Query[ThreadRecord]:
    """The search's or count's Query (reactgraph/service/index.py), inside the handler's filter."""
    svc = service(request)
    wanted_ids = field(body, "ids", list)
    metadata = field(body, "metadata", dict, {})
    values = field(body, "values", dict, {})
    status = field(body, "status", str)
    if status is not None and status not in THREAD_STATUSES:
        raise BadRequest(422, f"'status' must be one of {', '.join(THREAD_STATUSES)}, got {status!r}")
    sort_by = field(body, "sort_by", str, "updated_at")
    if sort_by not in ("thread_id", "status", "created_at", "updated_at", "state_updated_at"):
        raise BadRequest(422, f"'sort_by' cannot be {sort_by!r}")
    if wanted_ids is not None and len(wanted_ids) > MAX_IDS:
        raise BadRequest(422, f"'ids' may name at most {MAX_IDS} threads, got {len(wanted_ids)}")
    allowed = await authorize(request, "threads", "search",
                              {"metadata": metadata, "values": field(body, "values", dict, {}), "status": status,
                               "limit": body.get("limit"), "offset": body.get("offset")})
    if allowed is None:  # every thread is the caller's: the CLI's sessions too
        await cli_sessions(svc.records, svc.assistants.checkpointer, lambda i: _record_or_none(svc, i))
    # no index holds a thread's values or its title: checked record by record (titles read a batch at a time)
    titles = titles_of(svc) if (text := text_of(body)) else None
    checks = [titles.matcher(text)] if titles and text else []
    if values:
        checks.append(lambda record: _values_match(svc, record, values))
    return thread_query(allowed, metadata, status, None if wanted_ids is None else [str(i) for i in wanted_ids],
                        sort_by, field(body, "sort_order", str, "desc") != "asc", _every(checks),
                        titles.prepare if titles else None)


def _every(checks: list[Callable[[ThreadRecord], Awaitable[bool]]]
           ) -> Callable[[ThreadRecord], Awaitable[bool]] | None:
    """One check of a record that passes when each of `checks` does (None: no check), the cheaper first."""
    if not checks:
        return None

    async def passes(record: ThreadRecord) -> bool:
        for check in checks:
            if not await check(record):
                return False
        return True

    return passes


def titles_of(svc: Service) -> Titles:
    return Titles(svc.records.client, svc.records.keys, svc.assistants.checkpointer,
                  lambda record: graph_of(svc, record))


async def _record_or_none(svc: Service, thread_id: str) -> None:
    try:
        await thread_record(svc, thread_id, with_values=False)
    except DamagedThread as exc:
        log.warning("search passes over a thread: %s", exc)


async def _values_match(svc: Service, record: ThreadRecord, values: dict[str, Any]) -> bool:
    try:
        return values_match(await current_values(graph_of(svc, record), record["thread_id"]), values)
    except DamagedThread as exc:
        log.warning("search passes over a thread: %s", exc)
        return False


@handler
async def search_threads(request: Request) -> Response:
    svc, body = service(request), await body_of(request)
    limit = int_param(body.get("limit"), "limit", 10, 1, 1000)
    offset = int_param(body.get("offset"), "offset", 0, 0, 1_000_000)
    found = await search(thread_source(svc.records), await _query(request, body), offset, limit)
    select, extract = selected_fields(body, (*THREAD_FIELDS, "title")), extract_paths(body)
    if select is not None and "title" in select:  # ours (titles.py): the first question, read once and kept
        for record, title in zip(found, await titles_of(svc).of(found), strict=True):
            record["title"] = title
    page: list[Mapping[str, Any]] = []
    for record in found:
        # the checkpoint is read only when the values are asked for (or a path in them)
        if select is None or "values" in select or any(p.startswith("values") for p in (extract or {}).values()):
            try:
                record["values"] = await current_values(graph_of(svc, record), record["thread_id"])
            except DamagedThread as exc:
                log.warning("search passes over a thread: %s", exc)
                continue
        if extract:
            record["extracted"] = extracted(record, extract)
        page.append(record if select is None else {key: value for key, value in record.items()
                                                   if key in select or (extract and key == "extracted")})
    return json_response(page)


@handler
async def count_threads(request: Request) -> Response:
    svc, body = service(request), await body_of(request)
    return json_response(await count(thread_source(svc.records), await _query(request, body)))


@handler
async def patch_thread(request: Request) -> Response:
    body = await body_of(request)
    refuse_ttl(body)
    svc, _thread_id, record = await existing_thread(request, "update", {"metadata": field(body, "metadata", dict, {})})
    record["metadata"] = {**(record.get("metadata") or {}), **field(body, "metadata", dict, {})}
    await svc.records.put_thread(record)
    if "return=minimal" in request.headers.get("prefer", ""):  # threads.update(return_minimal=True)
        return Response(status_code=204)
    return json_response(record)


@handler
async def delete_thread(request: Request) -> Response:
    svc, thread_id, _record = await existing_thread(request, "delete")
    if await svc.records.busy(thread_id):
        raise BadRequest(409, f"thread {thread_id!r} has a run in progress or waiting: cancel it first")
    await remove_thread(svc, thread_id)
    return Response(status_code=204)


async def remove_thread(svc: Service, thread_id: str) -> None:
    """Delete a thread (with no run in progress or waiting): its checkpoints, its session's long-term items (the
    Q&A log and lessons go with it) and its records."""
    await svc.assistants.checkpointer.adelete_thread(thread_id)
    await adrop_session_items(svc.assistants.store, thread_id)
    await svc.records.delete_thread(thread_id)


@handler
async def copy_thread(request: Request) -> Response:
    svc, thread_id, record = await existing_thread(request)
    copy_id = new_id()
    await authorize(request, "threads", "create", {"thread_id": copy_id})  # the caller may make a thread at all
    await svc.assistants.checkpointer.acopy_thread(thread_id, copy_id)
    copied = await svc.records.create_thread(copy_id, dict(record.get("metadata") or {}), *thread_quota(request))
    return json_response(copied)


ROUTES = [
    Route("/threads", create_thread, methods=["POST"]),
    Route("/threads/search", search_threads, methods=["POST"]),
    Route("/threads/count", count_threads, methods=["POST"]),
    Route("/threads/{thread_id}", get_thread, methods=["GET"]),
    Route("/threads/{thread_id}", patch_thread, methods=["PATCH"]),
    Route("/threads/{thread_id}", delete_thread, methods=["DELETE"]),
    Route("/threads/{thread_id}/copy", copy_thread, methods=["POST"]),
]


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


ROUTES += [
    Route("/threads/{thread_id}/state", get_state, methods=["GET"]),
    Route("/threads/{thread_id}/state", update_state, methods=["POST"]),
    Route("/threads/{thread_id}/state/checkpoint", get_state, methods=["POST"]),
    Route("/threads/{thread_id}/state/{checkpoint_id}", get_state, methods=["GET"]),
    Route("/threads/{thread_id}/history", history, methods=["GET", "POST"]),
]
