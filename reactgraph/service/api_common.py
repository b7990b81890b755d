"""What every API handler shares: the service's parts on `app.state`, JSON answers, and error answers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any

import redis.asyncio
from starlette.requests import Request
from starlette.responses import Response

from reactgraph.memory.session_id import InvalidSessionId, check_session_id
from reactgraph.service.assistants.catalogue import Assistants
from reactgraph.service.quotas import StreamSlots
from reactgraph.service.records import ServiceRecords
from reactgraph.service.wire import BadRequest, dumps, read_body
from reactgraph.service.work_queue import WorkQueue

Handler = Callable[[Request], Awaitable[Response]]


@dataclass
class Service:
    client: redis.asyncio.Redis
    records: ServiceRecords
    assistants: Assistants
    queue: WorkQueue
    streams: StreamSlots  # the process's event readers and their Redis client


def service(request: Request) -> Service:
    return request.app.state.service


def json_response(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    try:
        text = dumps(value)
    except (ValueError, RecursionError) as exc:  # stored state JSON cannot carry (NaN an older server accepted)
        raise BadRequest(500, f"the answer holds a value JSON cannot carry: {str(exc)[:200] or type(exc).__name__}"
                         ) from None
    return Response(text, status_code=status, media_type="application/json", headers=headers)


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return json_response({"detail": message}, status, headers)


def handler(fn: Handler) -> Handler:
    """A handler whose BadRequest becomes its status with `{"detail": message}` (the Agent Server's shape)."""
    @wraps(fn)
    async def wrapped(request: Request) -> Response:
        try:
            return await fn(request)
        except BadRequest as exc:
            return error_response(exc.status, str(exc), exc.headers)
    return wrapped


async def body_of(request: Request) -> dict[str, Any]:
    return read_body(await request.body())


def thread_id_of(request: Request, name: str = "thread_id") -> str:
    try:
        return check_session_id(request.path_params[name])
    except InvalidSessionId as exc:
        raise BadRequest(422, str(exc)) from None


def int_param(value: Any, name: str, default: int, low: int = 0, high: int = 1000) -> int:
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise BadRequest(422, f"{name!r} must be an integer, got {value!r}") from None
    if not low <= number <= high:
        raise BadRequest(422, f"{name!r} must be from {low} to {high}, got {number}")
    return number
