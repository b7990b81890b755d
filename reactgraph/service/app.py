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

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reactgraph.service import (
    api_runs,
    api_store,
    api_threads,
    health,
    not_served,
    openapi,
)
from reactgraph.service.api_common import (
    Service,
    error_response,
    json_response,
    service,
)
from reactgraph.service.assistants import api as assistants_api
from reactgraph.service.assistants.catalogue import BUILDERS
from reactgraph.service.assistants.records import AssistantRecords, index_own_and_backfill
from reactgraph.service.auth import Authenticated
from reactgraph.service.connections import REDIS_DOWN, service_connections, stream_client
from reactgraph.service.http_guard import LOOPBACK_NAMES, HttpSettings, InternalErrors, http_middleware
from reactgraph.service.quotas import Quotas, StreamSlots
from reactgraph.service.records import ServiceRecords
from reactgraph.service.server_config import ServerSettings
from reactgraph.service.threads import backfill
from reactgraph.service.work_queue import WorkQueue
from reactgraph.service.worker import Worker

API_VERSION = "0.1"


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
    Route("/openapi.json", openapi.openapi, methods=["GET"]),
    *assistants_api.ROUTES,
    *api_store.ROUTES,
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
            quotas = settings.quotas or Quotas()
            records = ServiceRecords(client)
            assistants.created = AssistantRecords(client, records.keys, tuple(BUILDERS))
            assistants.created.versions_limit = quotas.of("versions")
            await backfill(records)  # threads written before the index was kept: indexed once
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
    # any exception unanswered below: a 500 with a request id; then the HTTP checks (Host, body, limits), then
    # who is calling: every route but the open ones
    middleware = [Middleware(InternalErrors), *http_middleware(http),
                  *([Middleware(Authenticated, settings=settings.auth)] if settings.auth is not None else [])]
    app = Starlette(routes=ROUTES, lifespan=lifespan, exception_handlers=handlers, middleware=middleware)
    app.state.auth = settings.auth
    app.state.quotas = settings.quotas or Quotas()
    return app
