"""The Starlette app of `reactgraph serve`: its routes, the service's parts opened at start, health, the OpenAPI
document, and the Agent Server routes it does not serve.

All state lives in Redis, so any number of API processes serve one Redis; `build_app(…, workers=N)` also runs N
in-process workers (0: `reactgraph worker` processes run the runs). `/ok` never calls Redis (a liveness probe
must not restart every process because Redis blinked); `/ok?check_db=1` and `/ready` do. A route the SDKs know
that this server does not serve answers 501 naming what it is, not a 404 a client would take for a missing
thread. `/openapi.json` is made offline from the routes and the fields each handler reads (BODIES, QUERIES):
what a client, or the fuzz test, learns the API from.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.schemas import BaseSchemaGenerator

from reactgraph._version import __version__
from reactgraph.service import api_runs, api_store, api_threads
from reactgraph.service.api_common import Service, error_response, json_response, service
from reactgraph.service.assistants import api as assistants_api
from reactgraph.service.assistants.catalogue import BUILDERS
from reactgraph.service.assistants.records import AssistantRecords, index_own_and_backfill
from reactgraph.service.auth import Authenticated
from reactgraph.service.connections import REDIS_DOWN, service_connections, stream_client
from reactgraph.service.http_guard import LOOPBACK_NAMES, HttpSettings, InternalErrors, http_middleware
from reactgraph.service.keys import ServiceKeys
from reactgraph.service.quotas import Quotas, StreamSlots
from reactgraph.service.records import ServiceRecords
from reactgraph.service.server_config import ServerSettings
from reactgraph.service.threads import backfill
from reactgraph.service.work_queue import WorkQueue
from reactgraph.service.worker import Worker

READY_TIMEOUT_S = 3.0  # langgraph-api's HEALTHCHECK_TIMEOUT_SECONDS


async def ok(request: Request) -> Response:
    check_db = request.query_params.get("check_db", "0")
    if check_db not in ("0", "1"):
        return error_response(422, f"check_db must be 0 or 1, not {check_db[:20]!r}")
    return await ready(request) if check_db == "1" else json_response({"ok": True})


async def ready(request: Request) -> Response:
    """200 once Redis answers a PING within READY_TIMEOUT_S, else 503 naming why."""
    try:
        await asyncio.wait_for(service(request).client.ping(), READY_TIMEOUT_S)
    except TimeoutError:
        return error_response(503, f"not ready: Redis did not answer within {READY_TIMEOUT_S:g} s")
    except REDIS_DOWN as exc:
        reason = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        return error_response(503, f"not ready: cannot reach Redis: {reason}")
    return json_response({"ok": True, "services": {"redis": "healthy"}})


_CRONS = "cron jobs (the /info flags say crons: false)"

NOT_SERVED: list[tuple[str, str, str]] = [
    ("POST", "/runs/batch", "batches of stateless runs (create each: POST /runs)"),
    ("POST", "/runs/cancel", "cancelling many runs at once (cancel each: POST /threads/{id}/runs/{run_id}/cancel)"),
    ("POST", "/runs/crons", _CRONS),
    ("POST", "/runs/crons/search", _CRONS),
    ("POST", "/runs/crons/count", _CRONS),
    ("PATCH", "/runs/crons/{cron_id}", _CRONS),
    ("DELETE", "/runs/crons/{cron_id}", _CRONS),
    ("POST", "/threads/{thread_id}/runs/crons", _CRONS),
    ("POST", "/threads/prune", "pruning threads (retention expires them: `reactgraph serve --retention`)"),
]


def _not_served(method: str, path: str, what: str) -> Route:
    async def answer(_request: Request) -> Response:
        return error_response(501, f"{method} {path}: {what} is not served by reactgraph serve")
    return Route(path, answer, methods=[method])


NOT_SERVED_ROUTES = [_not_served(method, path, what) for method, path, what in NOT_SERVED]


S, INT, N, B, OBJ, L, ANY = "string", "integer", "number", "boolean", "object", "array", "any"
_RUN = {"assistant_id": S, "input": ANY, "command": OBJ, "metadata": OBJ, "config": OBJ, "context": OBJ,
        "checkpoint": OBJ, "checkpoint_id": S, "interrupt_before": ANY, "interrupt_after": ANY, "stream_mode": ANY,
        "stream_subgraphs": B, "stream_resumable": B, "multitask_strategy": S, "if_not_exists": S,
        "on_completion": S, "on_disconnect": S, "webhook": S, "after_seconds": N, "durability": S, "feedback_keys": L}
_THREAD_SEARCH = {"ids": L, "metadata": OBJ, "values": OBJ, "status": S, "limit": INT, "offset": INT, "sort_by": S,
                  "sort_order": S, "select": L}
_ASSISTANT_SEARCH = {"graph_id": S, "name": S, "metadata": OBJ, "limit": INT, "offset": INT, "sort_by": S,
                     "sort_order": S, "select": L}
_ASSISTANT = {"assistant_id": S, "graph_id": S, "config": OBJ, "context": OBJ, "metadata": OBJ, "name": S,
              "description": S, "if_exists": S}
# The body fields each handler reads (POST, PUT, PATCH), by handler name.
BODIES: dict[str, dict[str, str]] = {
    "create_thread": {"thread_id": S, "metadata": OBJ, "if_exists": S, "supersteps": L},
    "search_threads": _THREAD_SEARCH, "count_threads": _THREAD_SEARCH,
    "patch_thread": {"metadata": OBJ},
    "get_state": {"checkpoint": OBJ, "subgraphs": B},
    "update_state": {"values": ANY, "as_node": S, "checkpoint": OBJ, "checkpoint_id": S},
    "history": {"limit": INT, "before": ANY, "metadata": OBJ, "checkpoint": OBJ},
    "search_assistants": _ASSISTANT_SEARCH, "count_assistants": _ASSISTANT_SEARCH,
    "get_versions": {"metadata": OBJ, "limit": INT, "offset": INT},
    "create_assistant": _ASSISTANT, "update_assistant": _ASSISTANT, "set_latest": {"version": INT},
    "put_item": {"namespace": L, "key": S, "value": OBJ, "index": ANY, "ttl": N},
    "delete_item": {"namespace": L, "key": S},
    "search_items": {"namespace_prefix": L, "filter": OBJ, "limit": INT, "offset": INT, "query": S, "refresh_ttl": B},
    "list_namespaces": {"prefix": L, "suffix": L, "max_depth": INT, "limit": INT, "offset": INT},
    "create_stateless_run": _RUN, "stream_stateless_run": _RUN, "wait_stateless_run": _RUN,
    "create_run": _RUN, "stream_run": _RUN, "wait_run": _RUN,
    "cancel_run": {}, "copy_thread": {}, "answer": {},
}
# The query parameters each handler reads (GET and DELETE; and cancel's POST), by handler name.
QUERIES: dict[str, dict[str, str]] = {
    "ready": {"check_db": S}, "get_state": {"subgraphs": S}, "history": {"limit": INT, "before": S},
    "get_assistant_graph": {"xray": S},
    "delete_assistant": {"delete_threads": S},
    "get_item": {"namespace": S, "key": S, "refresh_ttl": S},
    "list_runs": {"limit": INT, "offset": INT, "status": S},
    "join_stream": {"cancel_on_disconnect": S},
    "cancel_run": {"wait": S, "action": S},
}
_ERROR = {"type": "object", "properties": {"detail": {"type": "string"}, "request_id": {"type": "string"}},
          "required": ["detail"]}
_PATH_PARAM = re.compile(r"{(\w+)}")


def _schema(kind: str) -> dict[str, Any]:
    return {} if kind == ANY else {"type": kind}


def _operation(path: str, method: str, func: Any) -> dict[str, Any]:
    name = func.__name__
    summary = ((func.__doc__ or "").strip().splitlines() or [name.replace("_", " ")])[0]
    parameters = [{"name": p, "in": "path", "required": True, "schema": {"type": "string"}}
                  for p in _PATH_PARAM.findall(path)]
    if method in ("get", "delete") or (method == "post" and name == "cancel_run"):
        parameters += [{"name": q, "in": "query", "required": False, "schema": _schema(kind)}
                       for q, kind in QUERIES.get(name, {}).items()]
    operation: dict[str, Any] = {
        "operationId": f"{method}_{path.strip('/').replace('/', '_').replace('{', '').replace('}', '') or 'root'}",
        "summary": summary, "parameters": parameters,
        "responses": {"200": {"description": "the answer"},
                      "default": {"description": "an error, one line naming its cause",
                                  "content": {"application/json": {"schema": _ERROR}}}}}
    if method in ("post", "put", "patch") or (method == "delete" and name in BODIES):
        fields = BODIES.get(name, {})
        operation["requestBody"] = {"required": False, "content": {"application/json": {"schema": {
            "type": "object", "properties": {f: _schema(kind) for f, kind in fields.items()}}}}}
    return operation


def document(routes: list[Any]) -> dict[str, Any]:
    """The OpenAPI document of these routes (this one included)."""
    paths: dict[str, dict[str, Any]] = {}
    for endpoint in BaseSchemaGenerator().get_endpoints(routes):
        paths.setdefault(endpoint.path, {})[endpoint.http_method] = _operation(endpoint.path, endpoint.http_method,
                                                                                endpoint.func)
    return {"openapi": "3.1.0", "info": {"title": "reactgraph serve", "version": __version__,
                                         "description": "The LangGraph Agent Server API as reactgraph serves it"},
            "paths": paths}


async def openapi(request: Request) -> Response:
    """The service's OpenAPI document."""
    state = request.app.state
    if getattr(state, "openapi", None) is None:  # the routes never change: made once per process
        state.openapi = document(request.app.routes)
    return json_response(state.openapi)


API_VERSION = "0.1"


async def metrics(request: Request) -> Response:
    from reactgraph.service.metrics import CONTENT_TYPE, render

    svc = service(request)
    return Response(await render(svc.records, svc.assistants.gateway), media_type=CONTENT_TYPE)


async def info(_request: Request) -> Response:
    return json_response({"version": API_VERSION, "server": "reactgraph",
                          "flags": {"assistants": True, "crons": False, "langsmith": False}})


ROUTES = [
    Route("/ok", ok, methods=["GET"]),
    Route("/ready", ready, methods=["GET"]),
    Route("/info", info, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
    Route("/openapi.json", openapi, methods=["GET"]),
    *assistants_api.ROUTES,
    *api_store.ROUTES,
    *api_threads.ROUTES,
    *api_runs.ROUTES,
    *NOT_SERVED_ROUTES,  # last: a served route on the same path and method wins
]


def _routes(settings: ServerSettings) -> tuple[list[BaseRoute], str | None]:
    """The app's routes, and the folder open without auth: the debugger page's (reactgraph/ui) when it is served,
    imported only then."""
    if not settings.ui:
        return list(ROUTES), None
    from reactgraph.ui.comparisons import Comparisons, comparison_routes
    from reactgraph.ui.page import PREFIX, page_routes

    # the comparisons are data: API routes, behind auth (only the page's own files are open)
    return [*page_routes(), *comparison_routes(Comparisons(settings.ui_results)), *ROUTES], PREFIX


def build_app(redis_url: str, gateway: Any, *, workers: int = 1, worker_options: dict[str, Any] | None = None,
              settings: ServerSettings | None = None) -> Starlette:
    settings = settings or ServerSettings()
    # without the operator's HTTP settings: the loopback names only, and the default limits
    http = settings.http or HttpSettings(allowed_hosts=LOOPBACK_NAMES)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        quotas, keys = settings.quotas or Quotas(), ServiceKeys()

        def created(client: Any) -> AssistantRecords:
            return AssistantRecords(client, keys, tuple(BUILDERS), quotas.of("versions"))

        async with service_connections(redis_url, gateway, run_policy=settings.run_policy, created=created) as (
                client, assistants):
            records = ServiceRecords(client, keys)
            await backfill(records)  # threads written before the index was kept: indexed once
            if assistants.created is not None:  # always, in an API process (made by `created` above)
                await index_own_and_backfill(assistants.created, assistants)  # and assistants
            queue = WorkQueue(client, records.keys)
            await queue.ensure_group()
            readers = stream_client(redis_url, http.max_streams)
            slots = StreamSlots(readers, http.max_streams, quotas.of("stream_slots"))
            app.state.service = Service(client, records, assistants, queue, slots)
            running = [Worker(client, assistants, **(worker_options or {})) for _ in range(workers)]
            tasks = [asyncio.create_task(w.run(install_signals=False)) for w in running]
            try:
                yield
            finally:
                for worker in running:
                    worker.stop()
                await asyncio.gather(*tasks, return_exceptions=True)
                await readers.aclose()

    async def redis_down(_request: Request, exc: Exception) -> Response:
        # one line, no traceback; a 503 is what clients (langgraph-sdk's reconnects included) retry
        reason = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        return error_response(503, f"cannot reach Redis: {reason}")

    async def http_error(request: Request, exc: Exception) -> Response:
        # an unknown route or method in the Agent Server's error shape, not Starlette's bare text, naming it
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
        if status in (404, 405) and detail in ("Not Found", "Method Not Allowed"):
            detail = f"{detail}: {request.method} {request.url.path} is not a route of reactgraph serve"
        response = error_response(status, str(detail))
        response.headers.update((exc.headers or {}) if isinstance(exc, HTTPException) else {})
        return response

    handlers: dict[Any, Any] = {**dict.fromkeys(REDIS_DOWN, redis_down), HTTPException: http_error}
    routes, open_folder = _routes(settings)
    # any exception unanswered below: a 500 with a request id; then the HTTP checks (Host, body, limits), then
    # who is calling: every route but the open ones
    middleware = [Middleware(InternalErrors), *http_middleware(http),
                  *([Middleware(Authenticated, settings=settings.auth, open_folder=open_folder)]
                    if settings.auth is not None else [])]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers=handlers, middleware=middleware)
    app.state.auth = settings.auth
    app.state.quotas = settings.quotas or Quotas()
    return app
