"""The /store endpoints on the graphs' long-term store (the service's RedisStore, the one runs use): put, get,
delete and search items, list namespaces — as langgraph-sdk's StoreClient calls them.

Every part of a request is bounded (labels, keys, values, filters, pages) and NUL is refused in names (the
store's keys are built with it). The `@auth.on.store` handler decides as on LangGraph's server: it may rewrite
the namespace, and a filter it returns keeps the caller to items whose values match it (search, get, and the
item a put or delete would replace). With auth handlers that have no rule for the store, the store is closed.
"""

from __future__ import annotations

import json
import math
from typing import Any

from langgraph.store.base import InvalidNamespaceError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reactgraph.memory.redis_store import matches as item_matches
from reactgraph.service.api_common import body_of, handler, int_param, json_response, service
from reactgraph.service.auth import authorize_store
from reactgraph.service.quotas import owner_of, quotas_of
from reactgraph.service.records import OwnedCounts, item_member, store_items
from reactgraph.service.wire import BadRequest, field

MAX_LABELS, MAX_LABEL_CHARS, MAX_KEY_CHARS = 16, 256, 1024
MAX_VALUE_BYTES = 1024 * 1024
MAX_FILTER_BYTES = 16 * 1024
SCAN_PAGE = 100  # items read at a time when the caller's filter must be checked after the auth handler's
MAX_TTL_MINUTES = 10 * 365 * 24 * 60
FILTER_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")  # RedisStore's (reactgraph/memory/redis_store)


def _namespace(value: Any, name: str, *, empty: bool = False) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or (not value and not empty) or len(value) > MAX_LABELS:
        raise BadRequest(422, f"'{name}' must be a list of 1 to {MAX_LABELS} labels")
    for label in value:
        if not isinstance(label, str) or not 0 < len(label) <= MAX_LABEL_CHARS or "." in label or "\0" in label:
            raise BadRequest(422, f"'{name}' label {str(label)[:80]!r} must be a text of 1 to {MAX_LABEL_CHARS} "
                                  "characters without periods")
    return tuple(value)


def _key(value: Any) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_KEY_CHARS or "\0" in value:
        raise BadRequest(422, f"'key' must be a text of 1 to {MAX_KEY_CHARS} characters")
    return value


def _bounded(value: Any, name: str, limit: int) -> Any:
    if value is not None and (size := len(json.dumps(value, ensure_ascii=False).encode())) > limit:
        raise BadRequest(413, f"'{name}' is {size} bytes as JSON, over the limit of {limit}")
    return value


def _checked_filter(value: Any) -> Any:
    """A search filter whose operators the store applies (it would find out only on an item to compare)."""
    if isinstance(value, dict):
        if unknown := sorted(str(k) for k in value if str(k).startswith("$") and k not in FILTER_OPERATORS):
            raise BadRequest(422, f"'filter' uses {', '.join(unknown)[:200]}; supported: {', '.join(FILTER_OPERATORS)}")
        for inner in value.values():
            _checked_filter(inner)
    return value


def _store(request: Request) -> Any:
    return service(request).assistants.store


async def _call(what: str, call: Any) -> Any:
    try:
        return await call
    except (InvalidNamespaceError, ValueError) as exc:  # a namespace the store reserves, an unknown filter operator
        raise BadRequest(422, f"{what}: {str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__}"
                         ) from None


def _keeps(value: Any, allowed: dict[str, Any] | None) -> bool:
    """Whether an item's value is inside the auth handler's filter (one the store cannot apply is the handler's
    fault: a 500 naming it)."""
    try:
        return item_matches(value, allowed)
    except ValueError as exc:
        raise BadRequest(500, f"the auth handler's store filter: {str(exc)[:300]}") from None


async def _allowed_item(request: Request, action: str, value: dict[str, Any]) -> tuple[tuple[str, ...], Any]:
    """(namespace as the handler left it, the item there if the handler's filter lets the caller reach it)."""
    allowed = await authorize_store(request, action, value)
    namespace = tuple(value["namespace"])
    found = await _call("get", _store(request).aget(namespace, value["key"], refresh_ttl=False)) if allowed else None
    if found is not None and not _keeps(found.value, allowed):
        raise BadRequest(404, f"item {value['key'][:80]!r} not found in {'.'.join(namespace)[:200]!r}")
    return namespace, found


@handler
async def put_item(request: Request) -> Response:
    body = await body_of(request)
    value = field(body, "value", dict)
    if value is None:
        raise BadRequest(422, "'value' must be an object")
    _bounded(value, "value", MAX_VALUE_BYTES)
    index = body.get("index")
    if index is not None and index is not False and not (isinstance(index, list) and all(isinstance(i, str)
                                                                                         for i in index)):
        raise BadRequest(422, "'index' must be false or a list of field paths")
    if index:  # fields to embed: the store has no vector index to put them in
        raise BadRequest(501, "'index' (fields to embed for semantic search) is not served: the store has no "
                              "vector index; give index=false or leave it out")
    ttl = field(body, "ttl", (int, float))
    if ttl is not None and not (0 < ttl <= MAX_TTL_MINUTES and math.isfinite(ttl)):
        raise BadRequest(422, f"'ttl' must be minutes, more than 0 and at most {MAX_TTL_MINUTES}")
    request_value = {"namespace": _namespace(body.get("namespace"), "namespace"), "key": _key(body.get("key")),
                     "value": value, "index": index, "ttl": ttl}
    namespace, existing = await _allowed_item(request, "put", request_value)
    counted, owner, member = _counted(request), owner_of(request), item_member(namespace, request_value["key"])
    if existing is None:  # a new item: counted against the caller's quota before it is stored
        await counted.take(owner, quotas_of(request).of("store_items"), member)
    try:
        await _call("put", _store(request).aput(namespace, request_value["key"], value, index=index, ttl=ttl))
    except BaseException:
        if existing is None:
            await counted.give_back(owner, member)
        raise
    return Response(status_code=204)


def _counted(request: Request) -> OwnedCounts:
    svc = service(request)
    return store_items(svc.client, svc.records.keys.prefix, svc.assistants.store)


@handler
async def get_item(request: Request) -> Response:
    params = request.query_params
    refresh = params.get("refresh_ttl")
    if refresh is not None and refresh.lower() not in ("true", "false"):
        raise BadRequest(422, f"'refresh_ttl' must be true or false, got {refresh[:20]!r}")
    value: dict[str, Any] = {"namespace": _namespace(params.get("namespace", "").split("."), "namespace"),
                             "key": _key(params.get("key") or None),
                             "refresh_ttl": None if refresh is None else refresh == "true"}
    allowed = await authorize_store(request, "get", value)
    namespace = tuple(value["namespace"])
    found = await _call("get", _store(request).aget(namespace, value["key"], refresh_ttl=value["refresh_ttl"]))
    if found is None or not _keeps(found.value, allowed):
        return json_response(None)
    return json_response(found.dict())


@handler
async def delete_item(request: Request) -> Response:
    body = await body_of(request)
    value = {"namespace": _namespace(body.get("namespace"), "namespace"), "key": _key(body.get("key"))}
    namespace, _existing = await _allowed_item(request, "delete", value)
    await _call("delete", _store(request).adelete(namespace, value["key"]))
    await _counted(request).give_back(owner_of(request), item_member(namespace, str(value["key"])))
    return Response(status_code=204)


def _combined(asked: dict[str, Any] | None, allowed: dict[str, Any] | None) -> tuple[dict[str, Any] | None, bool]:
    """(the store's filter, whether the caller's must be applied again afterwards): both filters' conditions,
    the auth handler's winning on a field both name — then the caller's own is checked on what is found."""
    if not allowed:
        return asked, False
    asked = asked or {}
    return {**asked, **allowed}, any(name in allowed and asked[name] != allowed[name] for name in asked)


@handler
async def search_items(request: Request) -> Response:
    body = await body_of(request)
    limit = int_param(body.get("limit"), "limit", 10, 1, 1000)
    offset = int_param(body.get("offset"), "offset", 0, 0, 10**6)
    query = field(body, "query", str)
    if query:  # the store has no vector index: a query would be ignored, so it is refused instead
        raise BadRequest(501, "'query' (semantic search) is not served: the store has no vector index; search "
                              "with 'filter' and 'namespace_prefix'")
    value = {"namespace": _namespace(body.get("namespace_prefix", []), "namespace_prefix", empty=True),
             "filter": _checked_filter(_bounded(field(body, "filter", dict), "filter", MAX_FILTER_BYTES)),
             "limit": limit, "offset": offset, "query": query, "refresh_ttl": field(body, "refresh_ttl", bool)}
    asked = value["filter"]
    wanted, again = _combined(asked, await authorize_store(request, "search", value))
    store, namespace = _store(request), tuple(value["namespace"])
    options = {"query": query, "refresh_ttl": value["refresh_ttl"]}
    if not again:
        items = await _call("search", store.asearch(namespace, filter=wanted, limit=limit, offset=offset, **options))
    else:  # the caller's own filter is checked on the items the handler's lets through, a page at a time
        items, start = [], 0
        while len(items) < offset + limit:
            found = await _call("search", store.asearch(namespace, filter=wanted, limit=SCAN_PAGE, offset=start,
                                                        **options))
            items += [item for item in found if item_matches(item.value, asked)]
            start += SCAN_PAGE
            if len(found) < SCAN_PAGE:
                break
        items = items[offset:offset + limit]
    return json_response({"items": [item.dict() for item in items]})


@handler
async def list_namespaces(request: Request) -> Response:
    body = await body_of(request)
    prefix, suffix = body.get("prefix"), body.get("suffix")
    max_depth = body.get("max_depth")
    value: dict[str, Any] = {"namespace": None if prefix is None else _namespace(prefix, "prefix", empty=True),
                             "suffix": None if suffix is None else _namespace(suffix, "suffix", empty=True),
                             "max_depth": None if max_depth is None else int_param(max_depth, "max_depth", 1, 1,
                                                                                   MAX_LABELS),
                             "limit": int_param(body.get("limit"), "limit", 100, 1, 1000),
                             "offset": int_param(body.get("offset"), "offset", 0, 0, 10**6)}
    await authorize_store(request, "list_namespaces", value)
    found = await _call("list_namespaces", _store(request).alist_namespaces(
        prefix=None if value["namespace"] is None else tuple(value["namespace"]) or None,
        suffix=None if value["suffix"] is None else tuple(value["suffix"]) or None,
        max_depth=value["max_depth"], limit=value["limit"], offset=value["offset"]))
    return json_response({"namespaces": [list(namespace) for namespace in found]})


ROUTES = [
    Route("/store/items", put_item, methods=["PUT"]),
    Route("/store/items", get_item, methods=["GET"]),
    Route("/store/items", delete_item, methods=["DELETE"]),
    Route("/store/items/search", search_items, methods=["POST"]),
    Route("/store/namespaces", list_namespaces, methods=["POST"]),
]
