"""MCP server configuration as the common clients write it, checked strictly.

The shapes read: `{"mcpServers": {name: {...}}}` (Claude Desktop, Claude Code's `.mcp.json`, Cursor) and
`{"servers": {name: {...}}}` (VS Code's `mcp.json`); a server's transport is its `type` or `transport`
(`stdio`; `http`, `streamable_http` or `streamable-http`; `sse`), else inferred: `url` → streamable HTTP,
`command` → stdio. A mistyped key would otherwise be ignored silently (a server started without its `env`, a tool
exposed without its `prefix`), so every key, type and name is checked and a problem is one line naming the server
and the key.
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from reactgraph.tools.call import ToolRegistrationError

ENV_VAR = "REACTGRAPH_MCP"
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # a server's name goes into tags and tool-name prefixes
_PREFIX = re.compile(r"^[A-Za-z0-9_-]{0,64}$")
_COMMON = {"type", "transport", "prefix", "approval", "timeout_s", "enabled", "startup_timeout_s"}
_STDIO = _COMMON | {"command", "args", "env", "envFile", "cwd"}
_HTTP = _COMMON | {"url", "headers"}
Transport = Literal["stdio", "streamable_http", "sse"]
# Each spelling the common clients and langchain-mcp-adapters use → the transport it names.
_TRANSPORTS: dict[str, Transport] = {"stdio": "stdio", "http": "streamable_http", "streamable_http": "streamable_http",
                                     "streamable-http": "streamable_http", "sse": "sse"}
_TOP_KEYS = ("mcpServers", "servers")  # servers: VS Code's spelling


class McpConfigError(ToolRegistrationError):
    """An MCP configuration that cannot be used (unknown key, wrong type, unreadable file)."""


@dataclass(frozen=True, slots=True)
class McpServerConfig:
    """One server: how to reach it, and how its tools are registered."""

    name: str
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] | None = None
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    prefix: str = ""
    approval: Literal["always", "never"] = "always"  # a server's tools act on the world; a person approves
    timeout_s: float = 30.0  # per call (the gateway's timeout for each of the server's tools)
    startup_timeout_s: float = 30.0  # starting the server, the MCP handshake and listing its tools
    enabled: bool = True
    source: str = ""  # where the config came from (a file's resolved path, else "config"), for messages

    def describe(self) -> str:
        return " ".join((self.command, *self.args)) if self.transport == "stdio" else self.url


def scope_of(path: str | os.PathLike[str]) -> str:
    """The scope tag of an MCP config file: its resolved path (two spellings of one file are one scope)."""
    from reactgraph.tools.call import SCOPE_PREFIX

    return SCOPE_PREFIX + str(Path(path).expanduser().resolve())


def read_config(config: Mapping[str, Any] | str | os.PathLike[str]) -> tuple[list[McpServerConfig], str]:
    """The servers of a config given as a dict, a path to a JSON file or a JSON string, and where it came from."""
    source = "config"
    if isinstance(config, os.PathLike) or (isinstance(config, str) and not config.lstrip().startswith("{")):
        path = Path(config).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise McpConfigError(f"MCP config {str(config)!r}: cannot read it ({exc.strerror or exc})") from None
        source = str(path.resolve())
        config = _parse_json(text, source)
    elif isinstance(config, str):
        config = _parse_json(config, "the JSON text")
    if not isinstance(config, Mapping):
        raise McpConfigError(f"MCP config: expected an object with 'mcpServers', got {type(config).__name__}")
    return [server(name, settings, source) for name, settings in _servers_of(config).items()], source


def _servers_of(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The name → settings object of a config in either top-level spelling (one of them, not both)."""
    keys = [key for key in _TOP_KEYS if key in config]
    if extra := sorted(set(map(str, config)) - {*_TOP_KEYS, "inputs"}):
        raise McpConfigError(f"MCP config: unknown key(s) {', '.join(map(repr, extra))}; expected 'mcpServers' "
                             "(or VS Code's 'servers')")
    if config.get("inputs"):  # VS Code asks the user for these when a server starts; nobody is there to ask
        raise McpConfigError("MCP config: VS Code 'inputs' (values prompted for at start) are not supported; "
                             "put the values in the server's 'env' or in environment variables (${VAR})")
    if len(keys) != 1:
        raise McpConfigError("MCP config: give the servers under 'mcpServers' or 'servers', exactly one of them")
    servers = config[keys[0]]
    if not isinstance(servers, Mapping):
        raise McpConfigError(f"MCP config: {keys[0]!r} must be an object of server name → settings")
    return servers


def _parse_json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise McpConfigError(f"MCP config {where}: not valid JSON ({exc.msg}, line {exc.lineno})") from None


def server(name: object, settings: object, source: str = "config") -> McpServerConfig:
    """One server's settings, checked: the first problem is one line naming the server and the key."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise McpConfigError(f"MCP server name {name!r}: use 1 to 64 letters, digits, '_' or '-'")
    where = f"MCP server {name!r}"
    if not isinstance(settings, Mapping):
        raise McpConfigError(f"{where}: settings must be an object, got {type(settings).__name__}")
    if "command" in settings and "url" in settings:
        raise McpConfigError(f"{where}: give either 'command' (stdio) or 'url' (streamable HTTP), not both")
    transport = _transport(where, settings)
    allowed = _STDIO if transport == "stdio" else _HTTP
    if unknown := sorted(str(key) for key in settings if key not in allowed):
        raise McpConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))} for {transport}; "
                             f"known: {', '.join(sorted(allowed))}")
    get = _Getter(where, settings)
    options: dict[str, Any] = {
        "prefix": get.text("prefix", ""), "approval": get.text("approval", "always"),
        "timeout_s": get.seconds("timeout_s", 30.0), "startup_timeout_s": get.seconds("startup_timeout_s", 30.0),
        "enabled": get.flag("enabled", True),
    }
    if not _PREFIX.match(options["prefix"]):
        raise McpConfigError(f"{where}: 'prefix' must be up to 64 letters, digits, '_' or '-'")
    if options["approval"] not in ("always", "never"):
        raise McpConfigError(f"{where}: 'approval' must be 'always' or 'never', not {options['approval']!r}")
    if transport == "stdio":
        command = get.text("command", "")
        if not command:
            raise McpConfigError(f"{where}: 'command' is required (or give 'url' for a streamable HTTP server)")
        env = _env_of(where, get, source)
        return McpServerConfig(name=name, transport="stdio", command=command, args=tuple(get.list("args")),
                               env=env, cwd=get.text("cwd", "") or None, source=source, **options)
    url = get.text("url", "")
    if not url.startswith(("http://", "https://", "${")):  # "${VAR}": the URL comes from the environment
        raise McpConfigError(f"{where}: 'url' must be an http:// or https:// URL, not {url!r}")
    return McpServerConfig(name=name, transport=transport, url=url, headers=get.strings("headers", {}) or {},
                           source=source, **options)


def _transport(where: str, settings: Mapping[str, Any]) -> Transport:
    """The server's transport: `type` (Claude Code, VS Code, Cursor) or `transport` (langchain-mcp-adapters)."""
    given = {key: settings[key] for key in ("type", "transport") if key in settings}
    if len(set(map(str, given.values()))) > 1:
        raise McpConfigError(f"{where}: 'type' and 'transport' disagree ({given['type']!r}, {given['transport']!r})")
    if not given:
        return "streamable_http" if "url" in settings else "stdio"
    key, value = next(iter(given.items()))
    if not isinstance(value, str) or value not in _TRANSPORTS:
        raise McpConfigError(f"{where}: {key!r} must be one of {', '.join(map(repr, _TRANSPORTS))}, not {value!r}")
    return _TRANSPORTS[value]


def _env_of(where: str, get: _Getter, source: str) -> dict[str, str] | None:
    """The server's `env`, over the variables of its `envFile` (VS Code; relative to the config file)."""
    env = get.strings("env", None)
    env_file = get.text("envFile", "")
    if not env_file:
        return env
    path = Path(env_file).expanduser()
    if not path.is_absolute() and source != "config":
        path = Path(source).parent / path
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise McpConfigError(f"{where}: 'envFile' {env_file!r}: cannot read it ({exc.strerror or exc})") from None
    return {**_dotenv(text), **(env or {})}


def _dotenv(text: str) -> dict[str, str]:
    """The variables of an env file, read by python-dotenv as VS Code's files are written (`export`, quotes,
    comments); not interpolated here: `${VAR}` in values is expanded with the rest when the server starts."""
    from dotenv import dotenv_values

    return {key: value for key, value in dotenv_values(stream=io.StringIO(text), interpolate=False).items()
            if value is not None}


class _Getter:
    """Typed reads of one server's settings; a wrong type is one line naming the server and key."""

    def __init__(self, where: str, settings: Mapping[str, Any]) -> None:
        self.where, self.settings = where, settings

    def _fail(self, key: str, expected: str) -> McpConfigError:
        value = repr(self.settings[key])
        return McpConfigError(f"{self.where}: {key!r} must be {expected}, not {value[:60]}")

    def text(self, key: str, default: str) -> str:
        value = self.settings.get(key, default)
        if not isinstance(value, str):
            raise self._fail(key, "a string")
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.settings.get(key, default)
        if not isinstance(value, bool):
            raise self._fail(key, "true or false")
        return value

    def seconds(self, key: str, default: float) -> float:
        value = self.settings.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 3600:
            raise self._fail(key, "a number of seconds above 0 and at most 3600")
        return float(value)

    def list(self, key: str) -> list[str]:
        value = self.settings.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self._fail(key, "a list of strings")
        return value

    def strings(self, key: str, default: dict[str, str] | None) -> dict[str, str] | None:
        value = self.settings.get(key, default)
        if value is None:
            return None
        if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                     for k, v in value.items()):
            raise self._fail(key, "an object of string → string")
        return dict(value)
