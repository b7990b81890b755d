"""Who may call the service, as the operator configured it at start: a `langgraph_sdk.Auth` object named by the
`auth` section of `--config` (written exactly as for LangGraph's server), or an `--api-keys` file for one team.

Everything here runs once, before the server binds: a missing file, an object that is not an `Auth`, an
`@auth.authenticate` asking for a parameter we cannot give, a short key or a duplicate name is one line
(`BadServerConfig`). Key material never appears in a message.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reactgraph.service.server_config import BadServerConfig, LanggraphConfig

# What `@auth.authenticate` may ask for by name, as langgraph-api injects them (`body` is listed there but
# never given; we do not offer it either: reading the body here would consume it before the route does).
AUTHENTICATE_PARAMETERS = frozenset({"request", "path", "method", "scopes", "path_params", "query_params",
                                     "headers", "authorization", "scope", "user"})
MIN_KEY_CHARS = 16


@dataclass(frozen=True)
class AuthSettings:
    """`ServerSettings.auth`: at most one of `handlers` (the Auth object) and `api_keys` (name → key)."""

    handlers: Any = None
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


def load_auth_object(path: str, base: Path) -> Any:
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
