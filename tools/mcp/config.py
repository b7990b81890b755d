"""MCP server configuration in the common `{"mcpServers": {name: {...}}}` shape, checked strictly.

A mistyped key would otherwise be ignored silently (a server started without its `env`, a tool exposed without
its `prefix`), so every key, type and name is checked and a problem is one line naming the server and the key.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from reactgraph.tools.errors import ToolRegistrationError

ENV_VAR = "REACTGRAPH_MCP"
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # a server's name goes into tags and tool-name prefixes
_PREFIX = re.compile(r"^[A-Za-z0-9_-]{0,64}$")
_COMMON = {"transport", "prefix", "approval", "timeout_s", "enabled", "startup_timeout_s"}
_STDIO = _COMMON | {"command", "args", "env", "cwd"}
_HTTP = _COMMON | {"url", "headers"}
_TRANSPORTS = ("stdio", "streamable_http")


class McpConfigError(ToolRegistrationError):
    """An MCP configuration that cannot be used (unknown key, wrong type, unreadable file)."""


@dataclass(frozen=True, slots=True)
class McpServerConfig:
    """One server: how to reach it, and how its tools are registered."""

    name: str
    transport: Literal["stdio", "streamable_http"]
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
        return self.url if self.transport == "streamable_http" else " ".join((self.command, *self.args))


def scope_of(path: str | os.PathLike[str]) -> str:
    """The scope tag of an MCP config file: its resolved path (two spellings of one file are one scope)."""
    from reactgraph.tools.session import SCOPE_PREFIX

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
    if extra := sorted(set(map(str, config)) - {"mcpServers"}):
        raise McpConfigError(f"MCP config: unknown key(s) {', '.join(map(repr, extra))}; expected only 'mcpServers'")
    servers = config.get("mcpServers")
    if not isinstance(servers, Mapping):
        raise McpConfigError("MCP config: 'mcpServers' must be an object of server name → settings")
    return [server(name, settings, source) for name, settings in servers.items()], source


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
    transport = settings.get("transport", "streamable_http" if "url" in settings else "stdio")
    if transport not in _TRANSPORTS:
        raise McpConfigError(f"{where}: 'transport' must be one of {', '.join(map(repr, _TRANSPORTS))}, "
                             f"not {transport!r}")
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
        env = get.strings("env", None)
        return McpServerConfig(name=name, transport="stdio", command=command, args=tuple(get.list("args")),
                               env=env, cwd=get.text("cwd", "") or None, source=source, **options)
    url = get.text("url", "")
    if not url.startswith(("http://", "https://")):
        raise McpConfigError(f"{where}: 'url' must be an http:// or https:// URL, not {url!r}")
    return McpServerConfig(name=name, transport="streamable_http", url=url, headers=get.strings("headers", {}) or {},
                           source=source, **options)


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
