"""Who is calling and what they may touch: the operator's auth (a `langgraph_sdk.Auth` named in langgraph.json, or
an `--api-keys` file), each request's authentication, and the `@auth.on…` handlers' verdicts with
langgraph-api's meaning.

The auth is loaded and checked once, before the server binds: a bad file or key is one line (BadServerConfig),
and key material never appears in a message. Every route but /ok, /info and /metrics is authenticated: no or
bad credentials are a 401, a handler's False a 403, its HTTPException its own status. The most specific handler
wins, and a filter it returns keeps the request to records whose metadata match it ($eq, $contains, $and,
$or): the routes answer a record outside it as 404, so its existence is not revealed. An unknown operator fails
closed (500), where langgraph-api's in-memory server ignores it.
"""

from __future__ import annotations

import hmac
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import QueryParams
from starlette.requests import HTTPConnection, Request
from starlette.types import ASGIApp, Receive, Scope, Send

from reactgraph.service.http_guard import ServerFault
from reactgraph.service.server_config import BadServerConfig, LanggraphConfig
from reactgraph.service.wire import BadRequest, dumps, plain

if TYPE_CHECKING:  # the type only: the functions that use it import it where they run
    from langgraph_sdk import Auth

# What `@auth.authenticate` may ask for by name, as langgraph-api injects them (`body` is listed there but
# never given; we do not offer it either: reading the body here would consume it before the route does).
AUTHENTICATE_PARAMETERS = frozenset({"request", "path", "method", "scopes", "path_params", "query_params",
                                     "headers", "authorization", "scope", "user"})
MIN_KEY_CHARS = 16


@dataclass(frozen=True)
class AuthSettings:
    """`ServerSettings.auth`: at most one of `handlers` (the Auth object) and `api_keys` (name → key)."""

    handlers: Auth | None = None
    api_keys: dict[str, str] = field(default_factory=dict, repr=False)  # repr=False: keys never printed
    source: str = ""  # what the startup line says: "auth.py:auth" or "api keys from FILE (3)"
    parameters: frozenset[str] = frozenset()  # what `@auth.authenticate` asked for

    def describe(self) -> str:
        return self.source


def auth_settings(config: LanggraphConfig, api_keys: Path | None) -> AuthSettings | None:
    """The service's auth from `--config`'s `auth` section or `--api-keys` (None: neither was given)."""
    section = config.section("auth")
    path = section.get("path")
    if path is not None and not isinstance(path, str):
        raise BadServerConfig(f"{config.path}: auth.path must be a string like \"./auth.py:auth\"")
    if path and api_keys is not None:
        raise BadServerConfig("give either --api-keys or an auth section in --config, not both")
    if api_keys is not None:
        keys = read_api_keys(api_keys)
        return AuthSettings(api_keys=keys, source=f"api keys from {api_keys} ({len(keys)})")
    if not path:
        return None
    base = config.path.parent if config.path is not None else Path.cwd()
    handlers = load_auth_object(path, base)
    if handlers._authenticate_handler is None:
        raise BadServerConfig(f"{path}: the Auth object has no @auth.authenticate handler")
    return AuthSettings(handlers=handlers, source=path,
                        parameters=authenticate_parameters(handlers._authenticate_handler, path))


def load_auth_object(path: str, base: Path) -> Auth:
    """The `Auth` at "file.py:name" (relative to `base`, the langgraph.json's directory) or "module:name"."""
    from langgraph_sdk import Auth

    target, sep, name = path.rpartition(":")
    if not sep or not target or not name:
        raise BadServerConfig(f"auth.path {path!r} must be \"./file.py:name\" or \"module:name\"")
    try:
        if "/" in target or target.endswith(".py"):
            file = (base / target).resolve()
            if not file.is_file():
                raise BadServerConfig(f"auth.path {path!r}: no file {file}")
            spec = importlib.util.spec_from_file_location(f"reactgraph_auth_{abs(hash(str(file)))}", file)
            if spec is None or spec.loader is None:
                raise BadServerConfig(f"auth.path {path!r}: cannot load {file}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except BadServerConfig:
        raise
    except Exception as exc:  # the operator's own file failed to import: say which and why, in one line
        raise BadServerConfig(f"auth.path {path!r}: {type(exc).__name__}: {exc}") from exc
    found = getattr(module, name, None)
    if not isinstance(found, Auth):
        raise BadServerConfig(f"auth.path {path!r}: {name!r} is {type(found).__name__}, not a langgraph_sdk.Auth")
    return found


def authenticate_parameters(fn: Any, path: str) -> frozenset[str]:
    """The names `fn` takes, refusing a required one we cannot inject (as langgraph-api does)."""
    parameters = inspect.signature(fn).parameters
    unknown = [n for n, p in parameters.items() if n not in AUTHENTICATE_PARAMETERS and p.default is p.empty]
    if unknown:
        raise BadServerConfig(f"{path}: @auth.authenticate asks for {', '.join(unknown)}; it may take "
                              f"{', '.join(sorted(AUTHENTICATE_PARAMETERS))}")
    return frozenset(n for n in parameters if n in AUTHENTICATE_PARAMETERS)


def read_api_keys(path: Path) -> dict[str, str]:
    """name → key from a file of `name: key` lines (a bare `key` line is named `key-LINE`); `#` comments and
    blank lines are skipped. Keys are at least MIN_KEY_CHARS long, names and keys unique."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadServerConfig(f"cannot read the api keys file {path}: {exc}") from None
    keys: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        name, sep, key = text.partition(":")
        name, key = (name.strip(), key.strip()) if sep else (f"key-{number}", text)
        if not name or any(c.isspace() for c in key) or len(key) < MIN_KEY_CHARS:
            raise BadServerConfig(f"{path} line {number}: expected `name: key` with a key of at least "
                                  f"{MIN_KEY_CHARS} characters and no spaces")
        if name in keys or key in keys.values():
            raise BadServerConfig(f"{path} line {number}: the name or the key is already on an earlier line")
        keys[name] = key
    if not keys:
        raise BadServerConfig(f"{path}: no api keys in it (one `name: key` per line)")
    return keys


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
    # the operator's function (auth_settings made sure there is one), sync or async
    fn: Any = settings.handlers._authenticate_handler if settings.handlers is not None else None
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
    """ASGI middleware: every request but the open paths carries a caller in its scope, or is refused.

    `open_folder` (the debugger page's /ui, when served) is open with everything under it: its files hold no data,
    and the API calls the page makes are authenticated here like any client's."""

    def __init__(self, app: ASGIApp, settings: AuthSettings, open_folder: str | None = None) -> None:
        self.app, self.settings, self.open_folder = app, settings, open_folder

    def _open(self, path: str) -> bool:
        folder = self.open_folder
        return path in OPEN_PATHS or (folder is not None and (path == folder or path.startswith(folder + "/")))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._open(scope["path"]):
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
