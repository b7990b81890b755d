"""The Agent Server routes the SDKs know that `reactgraph serve` does not serve: each answers 501 with one line
naming what it is, so a program written for `langgraph dev` fails where it can see why instead of on a 404 it
would take for a missing thread or assistant. (Taken from langgraph-sdk's client, Python and JS.)"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reactgraph.service.api_common import error_response

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


ROUTES = [_not_served(method, path, what) for method, path, what in NOT_SERVED]
