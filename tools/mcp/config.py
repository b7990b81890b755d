"""MCP server configuration as the common clients write it, checked strictly where a mistake would go unnoticed.

The shapes read (docs/mcp.md lists each with an example):
- `{"mcpServers": {name: {...}}, …}`: Claude Desktop's whole `claude_desktop_config.json` (its other top-level
  keys, `globalShortcut`, `preferences`, …, are the app's and are ignored), Claude Code's `.mcp.json`, Cursor's;
- `{"servers": {name: {...}}, "inputs": [...]}`: VS Code's `mcp.json` (and `{"mcp": {"servers": …}}` of its
  `settings.json`), with `${input:id}` and `${workspaceFolder}` resolved (inputs.py);
- `{name: {"transport": …, …}}`: langchain-mcp-adapters' connections dict (`MultiServerMCPClient(connections)`),
  with no top-level key.
A server's transport is its `type` or `transport` (`stdio`; `http`, `streamable_http` or `streamable-http`;
`sse`), else inferred: `url` → streamable HTTP, `command` → stdio.

Inside a server's settings every key is known: a key of ours, one the clients write, or a connection parameter of
the adapters. A mistyped key would otherwise be ignored silently (a server started without its `env`, a tool
exposed without its `prefix`), so an unknown key, a wrong type or a bad name is one line naming the server and the
key. A setting a client legitimately writes that cannot be honoured here (`sandboxEnabled: true`, Claude Code's
`headersHelper`, a WebSocket transport, an input nobody can answer) leaves that one server out, in one line
(`McpServerConfig.unusable`), as a server that does not start does; the others still start.
"""

from __future__ import annotations

import codecs
import dataclasses
import io
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from reactgraph.tools.call import ToolRegistrationError
from reactgraph.tools.mcp import inputs as vscode

ENV_VAR = "REACTGRAPH_MCP"
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # a server's name goes into tags and tool-name prefixes
_PREFIX = re.compile(r"^[A-Za-z0-9_-]{0,64}$")
_OURS = {"type", "transport", "prefix", "approval", "timeout_s", "enabled", "startup_timeout_s", "session_kwargs"}
# Written by VS Code (`dev`: its restart-on-change and debugger; `gallery`, `version`: where it installed the server
# from) and by Claude Code and VS Code (`oauth`: the client id of their sign-in flow, which is not run here: a server
# that requires it fails to start with its 401, in one line). None of them changes how the server is reached.
_CLIENTS_ONLY = {"dev", "gallery", "version", "oauth"}
_STDIO = _OURS | _CLIENTS_ONLY | {"command", "args", "env", "envFile", "cwd", "encoding", "encoding_error_handler",
                                  "sandboxEnabled", "sandbox"}
_SSE = _OURS | _CLIENTS_ONLY | {"url", "headers", "timeout", "sse_read_timeout", "httpx_client_factory", "auth",
                                "headersHelper"}
_HTTP = _SSE | {"terminate_on_close"}
Transport = Literal["stdio", "streamable_http", "sse"]
# Each spelling the common clients and langchain-mcp-adapters use → the transport it names.
_TRANSPORTS: dict[str, Transport] = {"stdio": "stdio", "http": "streamable_http", "streamable_http": "streamable_http",
                                     "streamable-http": "streamable_http", "sse": "sse"}
_NOT_HERE = ("ws", "websocket")  # Claude Code's and the adapters' WebSocket transport: not spoken here
_TOP_KEYS = ("mcpServers", "servers")  # servers: VS Code's spelling
_ERROR_HANDLERS = ("strict", "ignore", "replace")


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
    encoding: str = "utf-8"  # of a stdio server's messages, and what to do with bytes that do not decode
    encoding_error_handler: Literal["strict", "ignore", "replace"] = "strict"
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    http_timeout_s: float | None = None  # the adapters' `timeout`: each HTTP request (None: the transport's own)
    sse_read_timeout_s: float | None = None  # the adapters' `sse_read_timeout`: a wait for the next event
    terminate_on_close: bool = True  # streamable HTTP: end the server's session (DELETE) when closing
    httpx_client_factory: Callable[..., Any] | None = None  # the adapters' own, for dict configs from Python
    auth: Any = None  # an httpx.Auth, likewise
    session_kwargs: dict[str, Any] = field(default_factory=dict)  # for mcp's ClientSession (callbacks, timeouts)
    prefix: str = ""
    approval: Literal["always", "never"] = "always"  # a server's tools act on the world; a person approves
    timeout_s: float = 30.0  # per call (the gateway's timeout for each of the server's tools)
    startup_timeout_s: float = 30.0  # starting the server, the MCP handshake and listing its tools
    enabled: bool = True
    source: str = ""  # where the config came from (a file's resolved path, else "config"), for messages
    unusable: str = ""  # why the server cannot be started here as configured ("": it can); it is left out

    def describe(self) -> str:
        return " ".join((self.command, *self.args)) if self.transport == "stdio" else self.url


def scope_of(path: str | os.PathLike[str]) -> str:
    """The scope tag of an MCP config file: its resolved path (two spellings of one file are one scope)."""
    from reactgraph.tools.call import SCOPE_PREFIX

    return SCOPE_PREFIX + str(Path(path).expanduser().resolve())


def read_config(config: Mapping[str, Any] | str | os.PathLike[str]) -> tuple[list[McpServerConfig], str]:
    """The servers of a config given as a dict, a path to a JSON file or a JSON string, and where it came from.

    VS Code inputs the enabled servers use are looked up or asked for here (inputs.py), once each."""
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
    servers, declared = _servers_of(config)
    try:
        answers = vscode.Answers(vscode.parse_inputs(declared), vscode.terminal_ask())
    except ValueError as exc:
        raise McpConfigError(str(exc)) from None
    return [_read_server(name, settings, source, answers) for name, settings in servers.items()], source


def _servers_of(config: Mapping[str, Any]) -> tuple[Mapping[str, Any], object]:
    """The name → settings object of a config in any of its shapes, and its VS Code `inputs` (None if none).

    Top-level keys other than these are the clients' own settings and are skipped, except a misspelling of one
    of ours (`mcpservers`, `mcp_servers`): that would otherwise be a config that silently starts nothing."""
    if not any(key in config for key in _TOP_KEYS) and isinstance(vscode_settings := config.get("mcp"), Mapping) \
            and "servers" in vscode_settings:  # VS Code's settings.json: {"mcp": {"servers": …, "inputs": …}}
        config = vscode_settings
    for key in map(str, config):
        spelled = re.sub(r"[_\-\s]", "", key).lower().rstrip("s")
        if key not in (*_TOP_KEYS, "inputs") and spelled in ("mcpserver", "server", "input"):
            expected = next(k for k in (*_TOP_KEYS, "inputs") if k.lower().rstrip("s") == spelled)
            raise McpConfigError(f"MCP config: top-level key {key!r}: did you mean {expected!r}?")
    keys = [key for key in _TOP_KEYS if key in config]
    if len(keys) > 1:
        raise McpConfigError("MCP config: give the servers under 'mcpServers' or 'servers', exactly one of them")
    if keys:
        servers = config[keys[0]]
        if not isinstance(servers, Mapping):
            raise McpConfigError(f"MCP config: {keys[0]!r} must be an object of server name → settings")
        return servers, config.get("inputs")
    if any(isinstance(settings, Mapping) and "transport" in settings for settings in config.values()):
        return config, None  # langchain-mcp-adapters' connections: {name: {"transport": …}}
    raise McpConfigError("MCP config: no servers: expected 'mcpServers' (Claude Desktop, Claude Code, Cursor), "
                         "'servers' (VS Code) or a langchain-mcp-adapters connections dict {name: {\"transport\": …}}")


def _read_server(name: object, settings: object, source: str, answers: vscode.Answers) -> McpServerConfig:
    """One server's settings with VS Code's variables resolved: checked as written first (a typo is found before
    anyone is asked for a value), then read again with its inputs' values."""
    resolved, editor_only = vscode.predefined(settings, source)
    ids = vscode.references(resolved)
    if undeclared := [input_id for input_id in ids if input_id not in answers.inputs]:
        raise McpConfigError(f"MCP server {name!r}: '${{input:{undeclared[0]}}}' names no input of the config's "
                             f"'inputs' ({', '.join(map(repr, answers.inputs)) or 'none declared'})")
    checked = server(name, resolved, source)
    if editor_only:
        return dataclasses.replace(checked, unusable=f"it uses {editor_only}, which only VS Code knows")
    if checked.unusable or not checked.enabled or not ids:
        return checked
    try:
        values = answers.values(ids, checked.name)
    except vscode.InputUnavailable as exc:
        return dataclasses.replace(checked, unusable=str(exc))
    return server(name, vscode.substitute(resolved, values), source)


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
    transport, unusable = _transport(where, settings)
    allowed = {"stdio": _STDIO, "sse": _SSE}.get(transport, _HTTP)
    if unknown := sorted(str(key) for key in settings if key not in allowed):
        raise McpConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))} for {transport}; "
                             f"known: {', '.join(sorted(allowed))}")
    get = _Getter(where, settings)
    options: dict[str, Any] = {
        "prefix": get.text("prefix", ""), "approval": get.text("approval", "always"),
        "timeout_s": get.seconds("timeout_s", 30.0), "startup_timeout_s": get.seconds("startup_timeout_s", 30.0),
        "enabled": get.flag("enabled", True), "session_kwargs": _session_kwargs(where, get), "source": source,
    }
    if not _PREFIX.match(options["prefix"]):
        raise McpConfigError(f"{where}: 'prefix' must be up to 64 letters, digits, '_' or '-'")
    if options["approval"] not in ("always", "never"):
        raise McpConfigError(f"{where}: 'approval' must be 'always' or 'never', not {options['approval']!r}")
    if unusable:  # a transport not spoken here: nothing more of it is read
        return McpServerConfig(name=name, transport=transport, url=get.text("url", ""), unusable=unusable, **options)
    return _stdio(name, where, get, options) if transport == "stdio" else _http(name, where, get, transport, options)


def _stdio(name: str, where: str, get: _Getter, options: dict[str, Any]) -> McpServerConfig:
    command = get.text("command", "")
    if not command:
        raise McpConfigError(f"{where}: 'command' is required (or give 'url' for a streamable HTTP server)")
    encoding, handler = get.text("encoding", "utf-8"), get.text("encoding_error_handler", "strict")
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise McpConfigError(f"{where}: 'encoding' {encoding!r} is not a text encoding Python knows") from None
    if handler not in _ERROR_HANDLERS:
        raise McpConfigError(f"{where}: 'encoding_error_handler' must be one of {', '.join(_ERROR_HANDLERS)}")
    cwd = os.fspath(path) if isinstance(path := get.settings.get("cwd"), os.PathLike) else get.text("cwd", "")
    config = McpServerConfig(name=name, transport="stdio", command=command, args=tuple(get.list("args")),
                             env=_env_of(where, get, options["source"]), cwd=cwd or None,  # a Path: the adapters
                             encoding=encoding, encoding_error_handler=handler,  # type: ignore[arg-type]
                             **options)
    if get.flag("sandboxEnabled", False):  # VS Code's sandbox is not there: running it unconfined is not asked for
        return dataclasses.replace(config, unusable="'sandboxEnabled': VS Code's sandbox for stdio servers is not "
                                                    "available here, and the server is not run without it")
    return config


def _http(name: str, where: str, get: _Getter, transport: Transport, options: dict[str, Any]) -> McpServerConfig:
    url = get.text("url", "")
    if not url.startswith(("http://", "https://", "${")):  # "${VAR}": the URL comes from the environment
        raise McpConfigError(f"{where}: 'url' must be an http:// or https:// URL, not {url!r}")
    config = McpServerConfig(
        name=name, transport=transport, url=url, headers=get.strings("headers", {}) or {},
        http_timeout_s=get.seconds("timeout", None), sse_read_timeout_s=get.seconds("sse_read_timeout", None, 86400),
        terminate_on_close=get.flag("terminate_on_close", True),
        httpx_client_factory=get.python("httpx_client_factory", callable, "a function returning an httpx.AsyncClient"),
        auth=get.python("auth", _is_httpx_auth, "an httpx.Auth"), **options)
    if "headersHelper" in get.settings:  # Claude Code runs this command for the headers at each connection
        return dataclasses.replace(config, unusable="'headersHelper' (Claude Code's command for the headers) is not "
                                                    "run here; give the headers in 'headers' (${VAR} works)")
    return config


def _is_httpx_auth(value: object) -> bool:
    import httpx

    return isinstance(value, httpx.Auth)


def _transport(where: str, settings: Mapping[str, Any]) -> tuple[Transport, str]:
    """The server's transport: `type` (Claude Code, VS Code, Cursor) or `transport` (langchain-mcp-adapters; VS
    Code's `{"type": "http", "transport": "sse"}` too), and why it cannot be used here ("" if it can)."""
    given = {key: settings[key] for key in ("type", "transport") if key in settings}
    for key, value in given.items():
        if not isinstance(value, str) or value not in (*_TRANSPORTS, *_NOT_HERE):
            raise McpConfigError(f"{where}: {key!r} must be one of {', '.join(map(repr, _TRANSPORTS))}, "
                                 f"not {value!r}")
    if not given:
        return ("streamable_http" if "url" in settings else "stdio"), ""
    kind: str | None = given.get("type")
    chosen = str(given.get("transport", kind))  # one of the two is given
    if kind is not None and chosen != kind and _TRANSPORTS.get(kind) != _TRANSPORTS.get(chosen) \
            and (kind, chosen) != ("http", "sse"):  # VS Code: a remote server ("http") over SSE
        raise McpConfigError(f"{where}: 'type' and 'transport' disagree ({kind!r}, {chosen!r})")
    if chosen in _NOT_HERE:
        return "streamable_http", f"its transport {chosen!r} (WebSocket) is not spoken here; stdio, http and sse are"
    return _TRANSPORTS[chosen], ""


def _session_kwargs(where: str, get: _Getter) -> dict[str, Any]:
    """The adapters' `session_kwargs`, for mcp's `ClientSession`: its keyword parameters only (checked here, not
    when the server starts); `read_timeout_seconds` in seconds too, as JSON cannot hold a timedelta."""
    value = get.settings.get("session_kwargs") or {}
    if not isinstance(value, Mapping):
        raise get.fail("session_kwargs", "an object of mcp ClientSession keyword arguments")
    if not value:
        return {}
    import inspect

    from mcp import ClientSession

    known = [p for p in inspect.signature(ClientSession.__init__).parameters if p not in ("self", "read_stream",
                                                                                         "write_stream")]
    if unknown := sorted(str(key) for key in value if key not in known):
        raise McpConfigError(f"{where}: 'session_kwargs' has {', '.join(map(repr, unknown))}, which mcp's "
                             f"ClientSession does not take; it takes {', '.join(known)}")
    kwargs = dict(value)
    if isinstance(seconds := kwargs.get("read_timeout_seconds"), int | float) and not isinstance(seconds, bool):
        kwargs["read_timeout_seconds"] = timedelta(seconds=seconds)
    return kwargs


def _env_of(where: str, get: _Getter, source: str) -> dict[str, str] | None:
    """The server's `env`, over the variables of its `envFile` (VS Code; relative to the config file)."""
    env = _env_values(where, get)
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


def _env_values(where: str, get: _Getter) -> dict[str, str] | None:
    """`env` as VS Code writes it: strings, numbers (passed as their text) and null (the variable not passed, as
    VS Code's null unsets one; the few the mcp SDK always passes, PATH, HOME…, cannot be left out, so refused)."""
    value = get.settings.get("env")
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and (v is None or (isinstance(v, str | int | float) and not isinstance(v, bool)))
            for k, v in value.items()):
        raise get.fail("env", "an object of string → string (numbers and null as VS Code writes them)")
    if unset := [k for k, v in value.items() if v is None]:
        from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS

        if kept := [k for k in unset if k in DEFAULT_INHERITED_ENV_VARS]:
            raise McpConfigError(f"{where}: 'env' {kept[0]!r}: null (unset) is not possible for a variable the mcp "
                                 "SDK always passes to a server; give it a value")
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in value.items() if v is not None}


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

    def fail(self, key: str, expected: str) -> McpConfigError:
        value = repr(self.settings[key])
        return McpConfigError(f"{self.where}: {key!r} must be {expected}, not {value[:60]}")

    def text(self, key: str, default: str) -> str:
        value = self.settings.get(key, default)
        if not isinstance(value, str):
            raise self.fail(key, "a string")
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.settings.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(key, "true or false")
        return value

    def seconds(self, key: str, default: Any, most: float = 3600) -> Any:
        """A number of seconds (a timedelta too, as the adapters' dicts may hold one); `default` if not given."""
        value = self.settings.get(key)
        if value is None:
            return default
        if isinstance(value, timedelta):
            value = value.total_seconds()
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= most:
            raise self.fail(key, f"a number of seconds above 0 and at most {most:g}")
        return float(value)

    def list(self, key: str) -> list[str]:
        value = self.settings.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.fail(key, "a list of strings")
        return value

    def strings(self, key: str, default: dict[str, str] | None) -> dict[str, str] | None:
        value = self.settings.get(key, default)
        if value is None:
            return None
        if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                     for k, v in value.items()):
            raise self.fail(key, "an object of string → string")
        return dict(value)

    def python(self, key: str, check: Callable[[object], bool], expected: str) -> Any:
        """A Python object only a dict config can hold (the adapters' `auth`, `httpx_client_factory`)."""
        value = self.settings.get(key)
        if value is not None and not check(value):
            raise self.fail(key, f"{expected} (given in a Python dict config)")
        return value
