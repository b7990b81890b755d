"""Who is calling, and what they may see: authentication of every request (but /ok, /info, /metrics, open as on
LangGraph's server) and the `@auth.on…` handlers' verdicts, with langgraph-api's meaning.

- No or bad credentials: 401. A handler returning False (or failing an assert): 403. A handler's
  `Auth.exceptions.HTTPException`: its status and detail.
- A handler returning a filter dict restricts the request to threads whose metadata match it; the routes
  answer a thread outside it as 404, so that its existence is not revealed.
- The most specific handler wins: (resource, action), (resource, "*"), ("*", action), ("*", "*"), `@auth.on`.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import QueryParams
from starlette.requests import HTTPConnection, Request
from starlette.types import ASGIApp, Receive, Scope, Send

from reactgraph.service.auth_loading import AuthSettings
from reactgraph.service.http_guard import ServerFault
from reactgraph.service.wire import BadRequest, dumps, plain

# liveness, readiness, and what LangGraph's server answers without auth (the API's description included)
OPEN_PATHS = frozenset({"/ok", "/ready", "/info", "/metrics", "/openapi.json"})
CALLER = "reactgraph.caller"  # the scope key the authenticated caller is kept under
AUTH_KEYS = ("langgraph_auth_user", "langgraph_auth_user_id", "langgraph_auth_permissions")
MAX_FILTER_DEPTH = 2  # nested $and/$or, as langgraph-api allows


class AuthUser(Mapping[str, Any]):
    """The authenticated user as handlers and graphs see it: attributes (`user.identity`) and keys
    (`user["identity"]`), like langgraph-api's user proxy; built from the plain dict stored with a run."""

    def __init__(self, fields: Mapping[str, Any]) -> None:
        self._fields = dict(fields)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_fields"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, key: str) -> Any:
        return self._fields[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def __repr__(self) -> str:
        return f"AuthUser({self._fields.get('identity')!r})"

    def dict(self) -> dict[str, Any]:
        return dict(self._fields)


@dataclass(frozen=True)
class Caller:
    """An authenticated request's user (serialisable fields) and permissions."""

    user: AuthUser
    permissions: tuple[str, ...]

    @property
    def identity(self) -> str:
        return str(self.user["identity"])

    def configurable(self) -> dict[str, Any]:
        """What a run of this caller's gets in `config["configurable"]`, as on LangGraph's server."""
        return {"langgraph_auth_user": self.user.dict(), "langgraph_auth_user_id": self.identity,
                "langgraph_auth_permissions": list(self.permissions)}


def caller_of(request: Request) -> Caller | None:
    return request.scope.get(CALLER)


def user_fields(found: Any) -> tuple[dict[str, Any], list[str]]:
    """(plain user dict, permissions) from what `@auth.authenticate` returned: a str identity, a dict or object
    with `identity`, or a (permissions, user) tuple — the shapes langgraph-api accepts."""
    permissions: Any = []
    if isinstance(found, tuple) and len(found) == 2:
        permissions, found = found
    elif isinstance(found, Mapping) and "permissions" in found:
        permissions = found["permissions"]
    elif hasattr(found, "permissions") and not isinstance(found, str):
        permissions = found.permissions
    if isinstance(found, str):
        fields: dict[str, Any] = {"identity": found}
    elif isinstance(found, Mapping) and isinstance(found.get("identity"), str):
        fields = {str(k): v for k, v in found.items()}
    elif isinstance(getattr(found, "identity", None), str):
        fields = {"identity": found.identity, "display_name": getattr(found, "display_name", found.identity)}
    else:
        raise TypeError(f"@auth.authenticate returned {type(found).__name__}: expected a str identity or a dict "
                        "with an 'identity' string")
    fields.setdefault("is_authenticated", True)
    fields.setdefault("display_name", fields["identity"])
    fields["permissions"] = [str(p) for p in (permissions or [])]
    fields = plain(fields)  # stored with each run as JSON: whatever the handler returned, it must encode
    return fields, fields["permissions"]


def _arguments(scope: Scope, names: frozenset[str]) -> dict[str, Any]:
    headers = dict(scope.get("headers", []))
    given: dict[str, Any] = {
        "scope": lambda: scope, "request": lambda: Request(scope), "user": lambda: None, "scopes": list,
        "path_params": lambda: scope.get("path_params", {}), "path": lambda: scope["path"],
        "method": lambda: scope.get("method", "GET"),
        "query_params": lambda: QueryParams(scope.get("query_string") or b""),
        "headers": lambda: headers,
        "authorization": lambda: headers[b"authorization"].decode("latin-1") if b"authorization" in headers else None}
    return {name: given[name]() for name in names}


async def authenticate(settings: AuthSettings, scope: Scope) -> Caller:
    """The caller of this request, or BadRequest(401/403/...) with one line."""
    from langgraph_sdk import Auth

    if settings.api_keys:
        sent = HTTPConnection(scope).headers.get("x-api-key", "").encode()
        matched = None
        for name, key in settings.api_keys.items():  # every key compared: the time does not say which matched
            if hmac.compare_digest(sent, key.encode()) and sent:
                matched = name
        if matched is None:
            raise BadRequest(401, "missing or unknown api key (send it in the x-api-key header)")
        return Caller(AuthUser({"identity": matched, "display_name": matched, "is_authenticated": True,
                                "permissions": []}), ())
    fn = settings.handlers._authenticate_handler
    arguments = _arguments(scope, settings.parameters)
    try:
        if _is_async(fn):
            found = await fn(**arguments)
        else:
            found = await run_in_threadpool(fn, **arguments)
        fields, permissions = user_fields(found)
    except Auth.exceptions.HTTPException as exc:
        raise BadRequest(exc.status_code, str(exc.detail)) from None
    except Exception as exc:  # the operator's code failed: a 500, logged with its traceback under a request id
        raise ServerFault(f"the authentication handler failed: {type(exc).__name__}") from exc
    return Caller(AuthUser(fields), tuple(permissions))


def _is_async(fn: Any) -> bool:
    import inspect

    return inspect.iscoroutinefunction(fn)


class Authenticated:
    """ASGI middleware: every request but the open paths carries a caller in its scope, or is refused."""

    def __init__(self, app: ASGIApp, settings: AuthSettings) -> None:
        self.app, self.settings = app, settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        try:
            scope[CALLER] = await authenticate(self.settings, scope)
        except BadRequest as exc:
            body = dumps({"detail": str(exc)}).encode()
            await send({"type": "http.response.start", "status": exc.status,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)
