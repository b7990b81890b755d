"""`GET /openapi.json`: the service's OpenAPI 3.1 document, made from its routes (Starlette's schema generator
walks them: paths, methods, path parameters) and the fields each handler reads from a body or a query string.

Offline and the same on every server: no request, no data of the operator's. It is what a client (or the
schema-driven fuzz test in tests/test_serve_fuzz.py) learns the API from. Bodies are described loosely, as the
handlers read them: each named field with its JSON type; unknown fields are allowed (clients send more than any
one server reads), and what a handler refuses it answers with a 4xx naming the field.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.schemas import BaseSchemaGenerator

from reactgraph._version import __version__
from reactgraph.service.api_common import json_response

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
