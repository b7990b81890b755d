"""The `@auth.on…` handlers' verdict on one action, and whether a record's metadata is inside the filter it
returned — with langgraph-api's resolution order and filter operators ($eq, $contains, $and, $or).

An unknown operator fails closed (500 naming it), where langgraph-api's in-memory server ignores it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.requests import Request

from reactgraph.service.auth import MAX_FILTER_DEPTH, Caller, caller_of
from reactgraph.service.wire import BadRequest

Filter = dict[str, Any]


def _handler(handlers: Any, resource: str, action: str) -> Any:
    for key in ((resource, action), (resource, "*"), ("*", action), ("*", "*")):
        if key in handlers._handlers:
            return handlers._handlers[key][-1]
    return handlers._global_handlers[-1] if handlers._global_handlers else None


async def verdict(handlers: Any, caller: Caller, resource: str, action: str, value: Any) -> Filter | None:
    """The filter the most specific handler returned (None: allowed as is); a refusal is a BadRequest."""
    from langgraph_sdk import Auth

    handler = _handler(handlers, resource, action)
    if handler is None:
        return None
    ctx = Auth.types.AuthContext(user=caller.user, permissions=list(caller.permissions),
                                 resource=resource, action=action)  # type: ignore[arg-type]
    try:
        result = await handler(ctx=ctx, value=value)
    except Auth.exceptions.HTTPException as exc:
        raise BadRequest(exc.status_code, str(exc.detail)) from None
    except AssertionError as exc:
        raise BadRequest(403, str(exc) or "Forbidden") from None
    if result is None or result is True:
        return None
    if result is False:
        raise BadRequest(403, f"Forbidden: {resource}.{action} refused by the auth handler")
    if not isinstance(result, dict):
        raise BadRequest(500, f"the auth handler for {resource}.{action} returned {type(result).__name__}; "
                              "expected a filter dict, None or a bool")
    check_filter(result)
    return result


async def authorize(request: Request, resource: str, action: str, value: Any) -> Filter | None:
    """`verdict` for this request's caller; None when the service runs without an Auth object."""
    settings = request.app.state.auth
    caller = caller_of(request)
    if settings is None or settings.handlers is None or caller is None:
        return None
    return await verdict(settings.handlers, caller, resource, action, value)


async def authorize_store(request: Request, action: str, value: dict[str, Any]) -> Filter | None:
    """`@auth.on.store` for a store action (put, get, search, delete, list_namespaces): the handler may rewrite
    `value["namespace"]`, and for search its filter is added to the item filter. Handlers without a rule that
    covers the store close it (403): the store holds every thread's long-term memory, which an auth file written
    for threads alone must not open to every caller."""
    settings = request.app.state.auth
    if (settings is not None and settings.handlers is not None and caller_of(request) is not None
            and _handler(settings.handlers, "store", action) is None):
        raise BadRequest(403, f"Forbidden: the auth handlers have no rule for store.{action} (@auth.on.store), "
                              "so the /store endpoints are closed")
    found = await authorize(request, "store", action, value)
    namespace = value.get("namespace")
    if namespace is not None and (not isinstance(namespace, list | tuple)
                                  or not all(isinstance(part, str) and part and "." not in part for part in namespace)):
        raise BadRequest(422, "the auth handler left an invalid store namespace")
    return found


def matches(metadata: Mapping[str, Any] | None, found: Filter | None, depth: int = 0) -> bool:
    """Whether `metadata` is inside the handler's filter (no filter: everything is)."""
    if not found:
        return True
    metadata = metadata or {}
    for key, wanted in found.items():
        if key == "$or":
            if not any(matches(metadata, group, depth + 1) for group in wanted):
                return False
        elif key == "$and":
            if not all(matches(metadata, group, depth + 1) for group in wanted):
                return False
        elif isinstance(wanted, dict):
            ((op, operand),) = wanted.items()
            if op == "$eq":
                if key not in metadata or metadata[key] != operand:
                    return False
            elif op == "$contains":
                held = metadata.get(key)
                if not isinstance(held, list) or not all(v in held for v in
                                                         (operand if isinstance(operand, list) else [operand])):
                    return False
        elif key not in metadata or metadata[key] != wanted:
            return False
    return True


def check_filter(found: Any, depth: int = 0) -> None:
    """A filter the matcher understands, else a 500 that names the fault (never a silent match-all)."""
    if depth > MAX_FILTER_DEPTH:
        raise BadRequest(500, f"the auth handler's filter nests $and/$or deeper than {MAX_FILTER_DEPTH}")
    for key, wanted in found.items():
        if key in ("$or", "$and"):
            if not isinstance(wanted, list) or len(wanted) < 2 or not all(isinstance(g, dict) for g in wanted):
                raise BadRequest(500, f"the auth handler's {key} must be a list of at least 2 filter dicts")
            for group in wanted:
                check_filter(group, depth + 1)
        elif isinstance(wanted, dict) and (len(wanted) != 1 or next(iter(wanted)) not in ("$eq", "$contains")):
            raise BadRequest(500, f"the auth handler's filter on {key!r} uses {sorted(wanted)}; "
                                  "supported: a value, {\"$eq\": v}, {\"$contains\": v}, $and, $or")
