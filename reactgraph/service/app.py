"""`reactgraph serve`: the part of the LangGraph Agent Server API that langgraph-sdk, `RemoteGraph` and Studio
use, as a Starlette app whose state all lives in Redis (so any number of API processes can serve one Redis).

`build_app(redis_url, gateway, workers=N)` also runs N in-process workers (`reactgraph serve` alone is a whole
service); with `workers=0` it only serves, and `reactgraph worker` processes execute the runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from pydantic import TypeAdapter, create_model
from pydantic.errors import PydanticInvalidForJsonSchema, PydanticSchemaGenerationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reactgraph.service import api_runs, api_threads, health, not_served
from reactgraph.service.api_common import (
    Service,
    assistant_of,
    body_of,
    error_response,
    handler,
    int_param,
    json_response,
    service,
)
from reactgraph.service.assistants import Assistant
from reactgraph.service.auth import Authenticated
from reactgraph.service.auth_rules import authorize, matches
from reactgraph.service.connections import REDIS_DOWN, service_connections, stream_client
from reactgraph.service.http_guard import LOOPBACK_NAMES, HttpSettings, http_middleware
from reactgraph.service.records import ServiceRecords
from reactgraph.service.server_config import ServerSettings
from reactgraph.service.stream_slots import StreamSlots
from reactgraph.service.wire import BadRequest, field
from reactgraph.service.work_queue import WorkQueue
from reactgraph.service.worker import Worker

API_VERSION = "0.1"


async def _searched_assistants(request: Request) -> list[dict[str, Any]]:
    """The assistants a search or count finds, inside the `assistants.search` handler's filter."""
    svc, body = service(request), await body_of(request)
    graph_id = field(body, "graph_id", str)
    limit = int_param(body.get("limit"), "limit", 10, 1, 1000)
    offset = int_param(body.get("offset"), "offset", 0, 0, 10**6)
    allowed = await authorize(request, "assistants", "search",
                              {"graph_id": graph_id, "metadata": field(body, "metadata", dict, {}),
                               "limit": limit, "offset": offset})
    return [a.record() for a in svc.assistants.all()
            if graph_id in (None, a.graph_id) and matches(a.record()["metadata"], allowed)]


async def readable_assistant(request: Request) -> Assistant:
    """The path's assistant if the `assistants.read` handler lets the caller see it (else 404)."""
    assistant = assistant_of(request, request.path_params["assistant_id"])
    allowed = await authorize(request, "assistants", "read", {"assistant_id": assistant.assistant_id})
    if not matches(assistant.record()["metadata"], allowed):
        raise BadRequest(404, f"assistant {request.path_params['assistant_id']!r} not found")
    return assistant


@handler
async def search_assistants(request: Request) -> Response:
    body = await body_of(request)
    limit = int_param(body.get("limit"), "limit", 10, 1, 1000)
    offset = int_param(body.get("offset"), "offset", 0, 0, 10**6)
    return json_response((await _searched_assistants(request))[offset:offset + limit])


@handler
async def count_assistants(request: Request) -> Response:
    return json_response(len(await _searched_assistants(request)))


@handler
async def get_assistant(request: Request) -> Response:
    return json_response((await readable_assistant(request)).record())


# Drawn once per (assistant, xray) and process, on a worker thread: drawing a graph and building its schemas
# is synchronous CPU work that would otherwise hold every other request and run of the loop.
_DRAWN: dict[tuple[str, str, bool], Any] = {}


async def _drawn(assistant: Any, what: str, xray: bool, draw: Any) -> Any:
    key = (assistant.assistant_id, what, xray)
    if key not in _DRAWN:
        _DRAWN[key] = await asyncio.to_thread(draw)
    return _DRAWN[key]


@handler
async def get_assistant_graph(request: Request) -> Response:
    assistant = await readable_assistant(request)
    xray = request.query_params.get("xray") in ("true", "True", "1")
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
    await readable_assistant(request)
    return json_response({})


async def metrics(request: Request) -> Response:
    from reactgraph.service.metrics import CONTENT_TYPE, render

    svc = service(request)
    return Response(await render(svc.records, svc.assistants.gateway), media_type=CONTENT_TYPE)


async def info(_request: Request) -> Response:
    return json_response({"version": API_VERSION, "server": "reactgraph",
                          "flags": {"assistants": True, "crons": False, "langsmith": False}})


ROUTES = [
    Route("/ok", health.ok, methods=["GET"]),
    Route("/ready", health.ready, methods=["GET"]),
    Route("/info", info, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
    Route("/assistants/search", search_assistants, methods=["POST"]),
    Route("/assistants/count", count_assistants, methods=["POST"]),
    Route("/assistants/{assistant_id}", get_assistant, methods=["GET"]),
    Route("/assistants/{assistant_id}/graph", get_assistant_graph, methods=["GET"]),
    Route("/assistants/{assistant_id}/schemas", get_assistant_schemas, methods=["GET"]),
    Route("/assistants/{assistant_id}/subgraphs", get_subgraphs, methods=["GET"]),
    *api_threads.ROUTES,
    *api_runs.ROUTES,
    *not_served.ROUTES,  # last: a served route on the same path and method wins
]


def build_app(redis_url: str, gateway: Any, *, workers: int = 1, worker_options: dict[str, Any] | None = None,
              settings: ServerSettings | None = None) -> Starlette:
    settings = settings or ServerSettings()
    # without the operator's HTTP settings: the loopback names only, and the default limits
    http = settings.http or HttpSettings(allowed_hosts=LOOPBACK_NAMES)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with service_connections(redis_url, gateway) as (client, assistants):
            assistants.run_policy = settings.run_policy
            records = ServiceRecords(client)
            queue = WorkQueue(client, records.keys)
            await queue.ensure_group()
            readers = stream_client(redis_url, http.max_streams)
            app.state.service = Service(client, records, assistants, queue, StreamSlots(readers, http.max_streams))
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
    # the HTTP checks first (Host, body, limits), then who is calling: every route but the open ones
    middleware = [*http_middleware(http), *([Middleware(Authenticated, settings=settings.auth)]
                                            if settings.auth is not None else [])]
    app = Starlette(routes=ROUTES, lifespan=lifespan, exception_handlers=handlers, middleware=middleware)
    app.state.auth = settings.auth
    return app
