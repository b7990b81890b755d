"""`reactgraph ui`: the local debugger page (reactgraph/ui) in a browser, over the service's own API with its workers
in this process — `reactgraph serve --ui` with a local user's defaults: loopback, a free port, the embedded Redis
when REDIS_URL is unset, and the URL printed (or opened) once the port is bound.

Only typer is imported at module level (`reactgraph --help` loads this module); the service is imported when the
command runs.
"""

from __future__ import annotations

import socket
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from reactgraph.cli.serve import (
    KEEP_ALIVE_S,
    AllowModels,
    ApiKeys,
    Config,
    Index,
    Mcp,
    NoAuth,
    Store,
    Tools,
    check_exposure,
    close_service,
    http_limits,
    operator_policy,
    page_url,
    prepare_service,
    read_auth,
    read_langgraph_config,
    require_serve_extra,
    server_settings,
)
from reactgraph.cli.shared import OtelOption, UserError, traced


def ui(
    host: Annotated[str, typer.Option(help="Interface to serve on (loopback; another needs --api-keys, an auth "
                                           "section in --config, or --no-auth).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: a free one).")] = 0,
    open_browser: Annotated[bool, typer.Option("--open", help="Open the page in the default browser.")] = False,
    store: Store = None,
    tools: Tools = [],  # noqa: B006
    mcp: Mcp = None,
    index: Index = None,
    workers: Annotated[int, typer.Option(min=1, max=64, help="Workers in this process (runs at once).")] = 1,
    config: Config = None,
    api_keys: ApiKeys = None,
    no_auth: NoAuth = False,
    allow_model: AllowModels = [],  # noqa: B006
    results: Annotated[Path | None, typer.Option(
        help="A folder of `reactgraph compare --out` outputs (or one output) to show as tables and plots.",
        exists=True, file_okay=False, dir_okay=True, resolve_path=True)] = None,
    otel: OtelOption = False,
) -> None:
    """Open the local debugger in a browser: the graphs drawn, sessions and their turns, a run's steps live, the
    state at any checkpoint, approvals.

    The page ships in the package and talks only to this process's API (the Agent Server API of `reactgraph
    serve`), so nothing it loads or sends leaves the machine; no account, no network. Its sessions are the CLI's:
    the same Redis (--store, $REDIS_URL, else the embedded one).
    """
    require_serve_extra()
    from reactgraph.service.http_guard import BODY_TIMEOUT_S, HEADER_TIMEOUT_S, MAX_STREAMS
    from reactgraph.service.wire import MAX_BODY_BYTES

    operator = read_langgraph_config(config)
    auth_settings = read_auth(operator, api_keys)
    check_exposure(host, auth_settings, no_auth)  # before anything is opened or bound
    # serve's defaults
    http = http_limits(operator, host, [], MAX_BODY_BYTES, MAX_STREAMS, HEADER_TIMEOUT_S, BODY_TIMEOUT_S)
    policy, mcp = operator_policy(operator, mcp, allow_model, None, (None, None, None, None))
    settings = replace(server_settings(operator, auth_settings, http, policy, [], True), ui_results=results)
    listening = bind(host, port)
    try:
        retention, url, where, gateway = prepare_service(store, tools, mcp, index, (None, "delete", "5m", operator))
    except BaseException:
        listening.close()
        raise
    page = page_url(host, listening.getsockname()[1])
    typer.echo(f"reactgraph ui: {page}  (store: {where}; Ctrl-C stops)")
    try:
        _serve(listening, url, gateway, settings, workers, retention, otel, page if open_browser else None)
    finally:
        listening.close()
        close_service(gateway)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, bound here so that the URL is known (port 0) and a taken port is one line."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise UserError(f"cannot serve on {host!r}: {exc.strerror or exc}") from exc
    family, kind, proto, _name, address = infos[0]
    listening = socket.socket(family, kind, proto)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind(address)
        listening.listen(128)  # from here a browser's connection waits in the backlog until the server accepts it
    except OSError as exc:
        listening.close()
        taken = " (is another server on it? --port 0 picks a free one)" if port else ""
        raise UserError(f"cannot serve on {host} port {port}: {exc.strerror or exc}{taken}") from exc
    return listening


def _serve(listening: socket.socket, url: str, gateway: Any, settings: Any, workers: int, retention: Any,
           otel: bool, open_page: str | None) -> None:
    import uvicorn

    from reactgraph.service.app import build_app
    from reactgraph.service.http_guard import header_deadline_protocol

    app = build_app(url, gateway, workers=workers, settings=settings, worker_options={"retention": retention})
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_keep_alive=KEEP_ALIVE_S,
                                          http=header_deadline_protocol(settings.http.header_timeout_s)))
    if open_page is not None:
        import webbrowser

        webbrowser.open(open_page)  # the socket listens already: the browser's request waits for the server
    with traced(otel):
        server.run(sockets=[listening])
