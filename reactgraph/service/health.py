"""Liveness and readiness: `/ok` says the process answers (no Redis call: a load balancer's liveness probe must
not restart every API process because Redis blinked); `/ok?check_db=1` and `/ready` also ask Redis, as
langgraph-api's `/ok?check_db=1` asks its database, and answer 503 in one line when it does not answer."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response

from reactgraph.service.api_common import error_response, json_response, service
from reactgraph.service.connections import REDIS_DOWN

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
