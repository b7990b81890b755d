"""`reactgraph serve` and `reactgraph worker`: the graphs as an Agent-Server-compatible HTTP service on Redis,
and the processes that execute its runs (any number, on any machines, pointed at the same Redis).

Their options come first: where the service keeps its state and finds its tools, retention, who may call and
what HTTP it accepts (serve only), and what a client's run may choose.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer

from reactgraph.cli.ask import INDEX_HELP
from reactgraph.cli.logs import announce_server
from reactgraph.cli.shared import (
    MCP_HELP,
    STORE_HELP,
    TOOLS_HELP,
    OtelOption,
    UserError,
    check_index,
    close_shared_stores,
    gateway_with,
    traced,
)

DEFAULT_PORT = 8123  # the port in langgraph-sdk's examples (`get_client(url="http://localhost:8123")`)
# Idle connections are kept longer than clients keep them (httpx, under langgraph-sdk, drops them after 5 s): with
# uvicorn's default of 5 s too, a client reusing one just as the server closed it got "Server disconnected".
KEEP_ALIVE_S = 65


def read_langgraph_config(config: Path | None) -> Any:
    """--config's langgraph.json, read once for every section the service reads from it (one line if bad)."""
    from reactgraph.service.server_config import BadServerConfig, read_langgraph_config

    try:
        return read_langgraph_config(config)
    except BadServerConfig as exc:
        raise UserError(str(exc)) from exc


def http_limits(config: Any, host: str, allowed_hosts: list[str], max_body: int, max_streams: int,
          header_timeout: float, body_timeout: float) -> Any:
    """The HTTP settings (reactgraph/service/http_guard.py) from the flags and --config's `http` section."""
    from reactgraph.service.http_guard import http_settings
    from reactgraph.service.server_config import BadServerConfig

    try:
        return http_settings(config, host=host, allowed_hosts=allowed_hosts,
                             max_body_bytes=max_body, header_timeout_s=header_timeout, body_timeout_s=body_timeout,
                             max_streams=max_streams)
    except BadServerConfig as exc:
        raise UserError(str(exc)) from exc


def operator_policy(config: Any, mcp: Path | None, models: list[str], allow_system_prompt: bool | None,
                caps: tuple[int | None, int | None, int | None, float | None]) -> tuple[Any, Path | None]:
    """What a client's run may choose (reactgraph/service/run_request.py), from the flags and --config's `reactgraph`
    section; and the MCP file to start (--mcp, else reactgraph.mcp)."""
    from reactgraph.service.run_request import CAPPED, SECTION, BadRunPolicy, mcp_file_of, run_policy_from
    from reactgraph.service.server_config import BadServerConfig

    try:
        section = config.section(SECTION)
        policy = run_policy_from(section, where=str(config.path or "flags"), models=models,
                                 allow_system_prompt=allow_system_prompt, caps=dict(zip(CAPPED, caps, strict=True)))
        return policy, mcp or mcp_file_of(section, config.path)
    except (BadServerConfig, BadRunPolicy) as exc:
        raise UserError(str(exc)) from exc


def server_settings(config: Any, auth: Any, http: Any, policy: Any, quota_flags: list[str], ui: bool | None) -> Any:
    """The ServerSettings, with what one caller may keep or hold (reactgraph/service/quotas.py) from --quota and
    reactgraph.quotas, and whether the debugger page is served (--ui, reactgraph.ui)."""
    from reactgraph.service.quotas import BadQuota, quotas_from
    from reactgraph.service.run_request import SECTION
    from reactgraph.service.server_config import BadServerConfig, ServerSettings
    from reactgraph.ui.page import ui_enabled

    try:
        quotas = quotas_from(config.section(SECTION), quota_flags, where=str(config.path or "flags"))
        served_ui = ui_enabled(config, ui)
    except (BadServerConfig, BadQuota) as exc:
        raise UserError(str(exc)) from exc
    return ServerSettings(auth=auth, http=http, run_policy=policy, quotas=quotas, ui=served_ui)


def require_serve_extra() -> None:
    """One line, not a traceback, when the service's libraries are not installed."""
    import importlib.util

    missing = [name for name in ("starlette", "uvicorn", "sse_starlette", "prometheus_client")
               if importlib.util.find_spec(name) is None]
    if missing:
        raise UserError(f"the service needs {', '.join(missing)}: pip install 'react-graph[serve]'")


def _retention(ttl: str | None, strategy: str, every: str, config: Any) -> Any:
    """The sweep's settings: --thread-ttl and the options beside it, else --config's checkpointer.ttl, else None."""
    from reactgraph.memory.retention import parse_duration
    from reactgraph.service.retention import BadRetention, Retention, retention_in

    try:
        if ttl is not None:
            return Retention(parse_duration(ttl), strategy, parse_duration(every))
        return retention_in(config)
    except (BadRetention, ValueError) as exc:
        raise UserError(str(exc)) from exc


def prepare_service(store: str | None, tools: list[str], mcp: Path | None, index: Path | None,
             retention: tuple[str | None, str, str, Any]) -> tuple[Any, str, str, Any]:
    """What serve and worker both check and open first, so bad config is one line before anything starts:
    (retention, Redis URL, where it is in words, the gateway with the tools and MCP servers, sharing state there)."""
    from reactgraph.memory.session_lease import wait_within_lease
    from reactgraph.service.events import max_event_bytes

    check_index(index)
    settings = _retention(*retention)
    url, where = _redis_url(store)
    try:  # MCP starts happen inside runs, under their thread's lease: none may outlast it
        start_cap_s = wait_within_lease()
        max_event_bytes()  # read again by each worker
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    return settings, url, where, gateway_with(tools, index, None, mcp, shared_url=url, mcp_startup_cap_s=start_cap_s,
                                              mcp_all_required=True)


def close_service(gateway: Any) -> None:
    gateway.close()  # the MCP servers' sessions
    close_shared_stores(gateway, breakers=False)  # the last calls' metrics reach Redis (breakers: on the loop)


def read_auth(config: Any, api_keys: Path | None) -> Any:
    """Who may call (reactgraph/service/auth.py) from --config's `auth` section or --api-keys (None: nobody
    said; one line if they are bad)."""
    from reactgraph.service.auth import auth_settings
    from reactgraph.service.server_config import BadServerConfig

    try:
        return auth_settings(config, api_keys)
    except BadServerConfig as exc:
        raise UserError(str(exc)) from exc


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and localhost; 0.0.0.0 and :: (every interface) are not."""
    import ipaddress

    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, auth: Any, no_auth: bool) -> None:
    """Loopback is the only place without auth: refuse to bind anything else with none, unless --no-auth."""
    if auth is not None or is_loopback(host):
        return
    if not no_auth:
        raise UserError(f"--host {host} is not loopback and the service has no auth: add an auth section to "
                        "--config (\"auth\": {\"path\": \"./auth.py:auth\"}) or --api-keys FILE, or pass "
                        "--no-auth to accept that anyone who reaches it may do anything")
    typer.echo(f"WARNING: serving {host} with --no-auth: anyone who reaches this port may read, change and run "
               "every thread", err=True)


def _redis_url(store: str | None) -> tuple[str, str]:
    from reactgraph.cli.shared import open_store

    opened = open_store(store)
    if not opened.redis_url:
        raise UserError(f"the service keeps its threads, runs and queue in Redis; {opened.description} is not "
                        "Redis: use --store redis://… or $REDIS_URL (or leave both unset for the embedded Redis)")
    return opened.redis_url, opened.description


def serve(
    host: Annotated[str, typer.Option(help="Interface to serve on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to serve on.")] = DEFAULT_PORT,
    workers: InProcessWorkers = 1,
    store: Store = None,
    tools: Tools = [],  # noqa: B006
    mcp: Mcp = None,
    index: Index = None,
    drain: Drain = 30.0,
    max_resumes: MaxResumes = 3,
    thread_ttl: ThreadTtl = None,
    ttl_strategy: TtlStrategy = "delete",
    sweep_every: SweepEvery = "5m",
    config: Config = None,
    api_keys: ApiKeys = None,
    no_auth: NoAuth = False,
    allowed_hosts: AllowedHosts = [],  # noqa: B006
    max_body_bytes: MaxBody = 4 * 1024 * 1024,
    max_streams: MaxStreams = 100,
    quota: Quota = [],  # noqa: B006
    header_timeout: HeaderTimeout = 10.0,
    body_timeout: BodyTimeout = 30.0,
    allow_model: AllowModels = [],  # noqa: B006
    allow_system_prompt: AllowSystemPrompt = None,
    cap_iterations: CapIterations = None,
    cap_tool_calls: CapToolCalls = None,
    cap_tokens: CapTokens = None,
    cap_cost: CapCost = None,
    ui: UiOption = None,
    otel: OtelOption = False,
) -> None:
    """Serve the graphs over HTTP, speaking the LangGraph Agent Server API (langgraph-sdk, RemoteGraph, Studio).

    Threads, runs, the queue and stream events live in Redis, so API processes keep nothing: run several
    behind a load balancer, and `reactgraph worker` processes anywhere that reaches the same Redis.
    """
    require_serve_extra()
    from reactgraph.service.app import build_app

    operator = read_langgraph_config(config)
    auth_settings = read_auth(operator, api_keys)
    check_exposure(host, auth_settings, no_auth)  # before anything is opened or bound
    http = http_limits(operator, host, allowed_hosts, max_body_bytes, max_streams, header_timeout, body_timeout)
    policy, mcp = operator_policy(operator, mcp, allow_model, allow_system_prompt,
                              (cap_iterations, cap_tool_calls, cap_tokens, cap_cost))
    settings = server_settings(operator, auth_settings, http, policy, quota, ui)
    retention, url, where, gateway = prepare_service(store, tools, mcp, index,
                                              (thread_ttl, ttl_strategy, sweep_every, operator))
    _announce(host, port, where, workers, settings, no_auth)
    try:
        app = build_app(url, gateway, workers=workers, settings=settings,
                        worker_options={"drain_s": drain, "retention": retention, "max_resumes": max_resumes})
        with traced(otel):  # a trace per run, from the workers in this process
            _run_http(app, host, port, http.header_timeout_s, drain)
    finally:
        close_service(gateway)


def _run_http(app: Any, host: str, port: int, header_timeout_s: float, drain_s: float) -> None:
    """Serve `app` until SIGTERM or Ctrl+C. Requests still open `drain_s` after the signal (a client waiting on or
    streaming a run) are cut, or one waiting on a run nobody takes would keep the server from stopping at all;
    the run goes on."""
    import uvicorn

    from reactgraph.service.http_guard import header_deadline_protocol

    uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="on", timeout_keep_alive=KEEP_ALIVE_S,
                http=header_deadline_protocol(header_timeout_s), timeout_graceful_shutdown=max(1, round(drain_s)))


def _announce(host: str, port: int, where: str, workers: int, settings: Any, no_auth: bool) -> None:
    announce_server(f"http://{host}:{port}", where, workers, settings.auth, no_auth)
    if settings.ui:
        typer.echo(f"the debugger page: {page_url(host, port)}", err=True)


def page_url(host: str, port: int) -> str:
    """Where a browser on this machine opens the debugger page (a wildcard bind is reached on loopback)."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else "[::1]" if host == "::" else host
    shown = f"[{shown}]" if ":" in shown and not shown.startswith("[") else shown
    return f"http://{shown}:{port}/ui/"


def worker(
    store: Store = None,
    tools: Tools = [],  # noqa: B006
    mcp: Mcp = None,
    index: Index = None,
    concurrency: Annotated[int, typer.Option(min=1, max=256, help="Threads this worker runs at once.")] = 4,
    drain: Drain = 30.0,
    max_resumes: MaxResumes = 3,
    thread_ttl: ThreadTtl = None,
    ttl_strategy: TtlStrategy = "delete",
    sweep_every: SweepEvery = "5m",
    config: Config = None,
    allow_model: AllowModels = [],  # noqa: B006
    allow_system_prompt: AllowSystemPrompt = None,
    cap_iterations: CapIterations = None,
    cap_tool_calls: CapToolCalls = None,
    cap_tokens: CapTokens = None,
    cap_cost: CapCost = None,
    otel: OtelOption = False,
) -> None:
    """Execute the service's runs: claim threads with work from Redis, one run per thread at a time.

    Loads tools and MCP servers as `ask` does (--tools, $REACTGRAPH_TOOLS, --mcp, $REACTGRAPH_MCP). SIGTERM drains.
    """
    require_serve_extra()
    from reactgraph.service.worker import serve_worker

    operator = read_langgraph_config(config)
    read_auth(operator, None)  # the same --config as the API's: a bad auth section fails here too
    policy, mcp = operator_policy(operator, mcp, allow_model, allow_system_prompt,
                              (cap_iterations, cap_tool_calls, cap_tokens, cap_cost))
    retention, url, where, gateway = prepare_service(store, tools, mcp, index,
                                              (thread_ttl, ttl_strategy, sweep_every, operator))
    typer.echo(f"reactgraph worker · store: {where} · concurrency {concurrency}", err=True)
    options = {"concurrency": concurrency, "drain_s": drain, "retention": retention, "max_resumes": max_resumes}
    try:
        with traced(otel):  # a trace per run
            asyncio.run(serve_worker(url, gateway, policy, **options))
    finally:
        close_service(gateway)


Store = Annotated[str | None, typer.Option(metavar="URL", help=STORE_HELP + " Must be Redis: workers share it.")]
Tools = Annotated[list[str], typer.Option("--tools", metavar="MODULE:ATTR", help=TOOLS_HELP)]
Mcp = Annotated[Path | None, typer.Option("--mcp", metavar="FILE", help=MCP_HELP)]
Index = Annotated[Path | None, typer.Option("--index", metavar="DIR", help=INDEX_HELP)]
ThreadTtl = Annotated[str | None, typer.Option("--thread-ttl", metavar="DURATION",
                                               help="Sweep threads idle this long (7d, 12h, 30m; default: "
                                                    "checkpointer.ttl of --config, else never).")]
TtlStrategy = Annotated[str, typer.Option("--ttl-strategy", metavar="delete|keep_latest",
                                          help="What the sweep does to an idle thread.")]
SweepEvery = Annotated[str, typer.Option("--sweep-every", metavar="DURATION", help="How often to sweep.")]
Config = Annotated[Path | None, typer.Option("--config", metavar="FILE",
                                             help="A langgraph.json: its auth section (a langgraph_sdk.Auth, "
                                                  "\"path\": \"./auth.py:auth\"), checkpointer.ttl (retention), "
                                                  "http.cors and http.allowed_hosts (the HTTP checks), the "
                                                  "reactgraph section (what a client's run may set).")]
ApiKeys = Annotated[Path | None, typer.Option("--api-keys", metavar="FILE", envvar="REACTGRAPH_API_KEYS",
                                              help="One team's keys, one `name: key` per line: clients send "
                                                   "x-api-key; the caller is the key's name.")]
NoAuth = Annotated[bool, typer.Option("--no-auth", help="Serve a non-loopback address with no auth at all "
                                                        "(anyone who reaches it may do anything).")]
Drain = Annotated[float, typer.Option("--drain", metavar="SECONDS", min=0,
                                      help="On SIGTERM, running runs stop at their next step boundary (saved; "
                                           "another worker resumes them); one still inside a step after this "
                                           "long is stopped where it is. `serve` also closes requests still "
                                           "open after this long (a client waiting on a run reconnects).")]
InProcessWorkers = Annotated[int, typer.Option(min=0, max=64, help="Workers in this process (0: only serve; run "
                                                                     "`reactgraph worker` processes).")]
MaxResumes = Annotated[int, typer.Option("--max-resumes", metavar="N", min=0, max=100,
                                          help="Times a run whose worker stopped without ending it (a crash, a "
                                               "kill) is resumed by another before it ends with an error.")]
AllowedHosts = Annotated[list[str], typer.Option(
    "--allowed-hosts", metavar="HOST[:PORT],…",
    help="Host headers to answer besides the bind address and localhost (a reverse proxy's public name; "
         "'*' for any). Also http.allowed_hosts in --config.")]
MaxBody = Annotated[int, typer.Option("--max-body-bytes", metavar="BYTES", help="Largest request body (413 above).")]
MaxStreams = Annotated[int, typer.Option("--max-streams", metavar="N", min=1, max=100_000,
                                         help="Open SSE streams, joins and waits in this process (429 above).")]
HeaderTimeout = Annotated[float, typer.Option("--header-timeout", metavar="SECONDS", min=0.1, max=3600,
                                              help="A request's line and headers must arrive within this.")]
BodyTimeout = Annotated[float, typer.Option("--body-timeout", metavar="SECONDS", min=0.1, max=3600,
                                            help="A request's body must arrive within this (408 after).")]
Quota = Annotated[list[str], typer.Option(
    "--quota", metavar="NAME=N",
    help="What one caller may keep or hold (repeatable; 0: no limit): threads, assistants, versions, "
         "runs_in_flight, stream_slots. Also reactgraph.quotas in --config.")]

UiOption = Annotated[bool | None, typer.Option(
    "--ui/--no-ui", show_default=False,
    help="Serve the debugger page at /ui (its files without auth: they hold no data; its API calls with it). "
         "Default: reactgraph.ui in --config, else no.")]

# What a client's run may choose.
AllowModels = Annotated[list[str], typer.Option("--allow-model", metavar="SPEC", help=(
    "A model a client's run may choose (repeatable; the first is the default; default: $REACTGRAPH_MODEL, "
    "else offline; or reactgraph.models in --config)."))]
AllowSystemPrompt = Annotated[bool | None, typer.Option("--allow-system-prompt/--fixed-system-prompt", help=(
    "Whether a client's run may replace the system prompt (default: fixed, or reactgraph.allow_system_prompt)."),
    show_default=False)]
CapIterations = Annotated[int | None, typer.Option("--cap-iterations", metavar="N", min=1, show_default=False,
                                                   help="Cap of a run's max_iterations (default 20).")]
CapToolCalls = Annotated[int | None, typer.Option("--cap-tool-calls", metavar="N", min=0, show_default=False,
                                                  help="Cap of a run's max_tool_calls, also its default (100).")]
CapTokens = Annotated[int | None, typer.Option("--cap-tokens", metavar="N", min=1, show_default=False,
                                               help="Cap of a run's max_model_tokens, also its default (1000000).")]
CapCost = Annotated[float | None, typer.Option("--cap-cost", metavar="USD", min=0, show_default=False,
                                               help="Cap of a run's max_cost_usd, also its default (5).")]
