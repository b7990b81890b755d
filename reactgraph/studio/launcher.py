"""`reactgraph studio`: LangGraph Studio's dev server (`langgraph dev`) on react-graph's graphs and Redis.

The graphs it serves are those `langgraph.json` exports (`reactgraph.graph.studio`); the dev server opens the
checkpointer and store that langgraph.json names, react-graph's Redis saver (`reactgraph.studio.persistence`),
so that Studio and the CLI share their sessions.

Which langgraph.json: the one in the working directory (a checkout's root has one), else the one shipped in
the package beside this module, whose graphs are module paths (`reactgraph.graph.studio:react`) that work from
any directory.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from reactgraph.errors import ReactGraphError

PROJECT_DIR = Path(__file__).resolve().parents[2]
CONFIG_FILE = PROJECT_DIR / "langgraph.json"  # a source checkout's, beside pyproject.toml (absent when installed)
PACKAGED_CONFIG = Path(__file__).resolve().with_name("langgraph.json")  # shipped in the wheel
PERSISTENCE_MODULE = "reactgraph.studio.persistence"
STUDIO_ORIGIN = "https://smith.langchain.com"

# Set in the server's environment so that it makes no call of its own to the outside world.
OFFLINE_ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",        # langgraph-cli: no usage analytics POST per command
    "LANGGRAPH_NO_VERSION_CHECK": "true",     # langgraph-api: no PyPI lookup for a newer version
    "LANGSMITH_TRACING": "false",             # no run traces to LangSmith, and no organisation lookup
    "LANGSMITH_TRACING_V2": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGCHAIN_TRACING": "false",
    "OTEL_ENABLED": "false",                  # no OpenTelemetry export even if an OTLP endpoint is set
    "LANGGRAPH_METRICS_ENABLED": "false",     # no self-hosted metrics export
    "LANGGRAPH_LOGS_ENABLED": "false",        # no self-hosted log export
}
# Removed from the server's environment: any of these turns on langgraph-api's metadata loop, which
# posts usage to LangSmith or to beacon.langchain.com every five minutes.
LICENSE_ENV = ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGSMITH_CONTROL_PLANE_API_KEY",
               "LANGGRAPH_CLOUD_LICENSE_KEY")
# Only Studio's page may call the server from a browser. `langgraph dev` answers every origin by default
# (`access-control-allow-origin: *`, and `allow-private-network: true`, which it always sets): any web page the
# user opens could then drive the graphs and read the sessions. langgraph-api reads $CORS_CONFIG (the shape of
# langgraph.json's `http.cors`) before the config file's, so it is set only when the config has no `http.cors`.
STUDIO_CORS = {"allow_origins": [STUDIO_ORIGIN], "allow_methods": ["*"], "allow_headers": ["*"],
               "allow_credentials": False,
               "expose_headers": ["x-pagination-total", "x-pagination-next", "content-location"]}
STOP_GRACE_S = 15.0  # for the server to save its threads and end, once told to stop; then it is killed
STARTUP_TIMEOUT_S = 180.0  # for the dev server to answer on its port (it imports the graphs first)
LOG_TAIL_LINES = 30  # of the server's log, shown when it cannot start


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def studio_url(host: str, port: int) -> str:
    """The Studio page (served by LangSmith, loaded by your browser) pointed at the local server."""
    return f"{STUDIO_ORIGIN}/studio/?baseUrl=http://{host}:{port}"


def studio_command(host: str, port: int, *, open_browser: bool = False, reload: bool = True,
                   config: Path | None = None) -> list[str]:
    """The `langgraph dev` command line: this interpreter's langgraph-cli, our config, no tunnel.

    Run it in the config's directory: `langgraph dev` resolves graph paths and dependencies against the
    working directory, not against the config file.
    """
    command = [sys.executable, "-m", "langgraph_cli", "dev", "--config", str(config or CONFIG_FILE),
               "--host", host, "--port", str(port), "--studio-url", STUDIO_ORIGIN]
    if not open_browser:
        command.append("--no-browser")
    if not reload:
        command.append("--no-reload")
    return command


def studio_env(base: Mapping[str, str] | None = None, config: Path | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) without license keys and with telemetry switched off, and
    CORS for Studio's origin only unless `config` sets its own `http.cors` (an operator's choice)."""
    env = {key: value for key, value in (os.environ if base is None else base).items() if key not in LICENSE_ENV}
    env.update(OFFLINE_ENV)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if config is None or not _sets_cors(config):
        env["CORS_CONFIG"] = json.dumps(STUDIO_CORS)
    else:
        env.pop("CORS_CONFIG", None)
    return env


def _sets_cors(config: Path) -> bool:
    try:
        http = json.loads(config.read_text(encoding="utf-8")).get("http") or {}
    except (OSError, ValueError, AttributeError):
        return False
    return isinstance(http, dict) and http.get("cors") is not None


def choose_config(config: Path | None = None, cwd: Path | None = None) -> tuple[Path, Path, str]:
    """(config file, directory to run the server in, how the startup line names the file).

    `config` if given (run in its directory); else ./langgraph.json; else the packaged one, run in the working
    directory all the same: the dev server keeps its files (.langgraph_api/) there, not in site-packages.
    """
    cwd = (cwd or Path.cwd()).resolve()
    if config is not None:
        config = config.resolve()
        return config, config.parent, str(config)
    if (cwd / "langgraph.json").is_file():
        return cwd / "langgraph.json", cwd, "./langgraph.json"
    return PACKAGED_CONFIG, cwd, f"the packaged {PACKAGED_CONFIG} (no langgraph.json in {cwd})"


def uses_our_persistence(config: Path) -> bool:
    """Whether the config's checkpointer is react-graph's Redis saver (a user's own langgraph.json may differ)."""
    try:
        named = json.loads(config.read_text(encoding="utf-8")).get("checkpointer") or {}
    except (OSError, ValueError, AttributeError):
        return False  # `langgraph dev` reports a config it cannot read itself
    return isinstance(named, dict) and str(named.get("path", "")).startswith(PERSISTENCE_MODULE + ".")


def run_studio(host: str = "127.0.0.1", port: int | None = None, open_browser: bool = False, *,
               config: Path | None = None, store: str | None = None, verbose: bool = False) -> int:
    """Serve the graphs of `config` (see `choose_config`) with `langgraph dev` until Ctrl+C.

    Threads are kept where the CLI keeps sessions: `store` (a Redis URL), else $REDIS_URL, else the embedded
    Redis, checked before the server starts. Returns the server's exit code. Blocks until Ctrl+C, SIGTERM or
    SIGHUP, which stop the server's whole process group (`langgraph dev`, its reloader and worker): it runs in
    a group of its own, so no signal to this process leaves it serving the port.
    """
    if importlib.util.find_spec("langgraph_api") is None:  # the in-memory server behind `langgraph dev`
        print("LangGraph Studio needs the dev server: pip install 'langgraph-cli[inmem]'", file=sys.stderr)
        return 2
    config, run_dir, config_label = choose_config(config)
    if not config.is_file():
        print(f"no {config}: reinstall react-graph (its wheel ships langgraph.json)", file=sys.stderr)
        return 2
    env = studio_env(config=config)
    if store:
        env["REDIS_URL"] = store
    threads = "the dev server's own persistence (this langgraph.json names no react-graph checkpointer)"
    if uses_our_persistence(config):
        if (problem_or_place := _check_store(store)).startswith("error: "):
            print(problem_or_place, file=sys.stderr)
            return 2
        threads = f"{problem_or_place}, shared with `reactgraph ask` / `history` (sessions named by a UUID)"
    port = port or free_port(host)
    print(f"LangGraph Studio: {studio_url(host, port)}")
    print(f"config: {config_label}")
    print(f"threads: {threads}")
    print(f"API: http://{host}:{port}  (docs: http://{host}:{port}/docs) · Ctrl+C stops the server")
    log_path = None if verbose else run_dir / ".langgraph_api" / "studio-server.log"
    process = _start_server(studio_command(host, port, open_browser=open_browser, config=config), run_dir, env,
                            log_path)
    restore = _stop_on(signal.SIGTERM, signal.SIGHUP)
    try:
        if log_path is not None and not _started(process, host, port, log_path):
            ended = process.poll()
            return _exit_code(ended) or 1 if ended is not None else 1  # the finally below stops a server left
        return _exit_code(process.wait())
    except (KeyboardInterrupt, _StopAsked):
        # SIGTERM to the group, not SIGINT: uvicorn takes a second SIGINT as "force quit" and skips the
        # shutdown that saves the dev server's threads to .langgraph_api/.
        _signal_group(process, signal.SIGTERM)
        try:
            code = process.wait(timeout=STOP_GRACE_S)
        except (KeyboardInterrupt, _StopAsked, subprocess.TimeoutExpired):
            _signal_group(process, signal.SIGKILL)
            return _exit_code(process.wait())
        return 0 if code in (0, -signal.SIGINT, -signal.SIGTERM) else _exit_code(code)  # the stop asked for
    finally:
        restore()
        _signal_group(process, signal.SIGKILL)  # whatever is left of the group (a reload worker) goes too
        if process.poll() is None:
            process.wait()


def _start_server(command: list[str], run_dir: Path, env: dict[str, str], log_path: Path | None) -> subprocess.Popen:
    """The dev server in a process group of its own. Its log lines (dozens, wider than a terminal) would bury the
    lines above: they go to `log_path`, shown only when the server cannot start (`--verbose`: None, here)."""
    if log_path is not None:
        log_path.parent.mkdir(exist_ok=True)
        print(f"server log: {log_path} (--verbose shows it here)")
    sys.stdout.flush()
    with contextlib.ExitStack() as opened:
        log = opened.enter_context(log_path.open("w", encoding="utf-8")) if log_path is not None else None
        return subprocess.Popen(command, cwd=run_dir, env=env, process_group=0, stdout=log,
                                stderr=subprocess.STDOUT if log is not None else None)


def _started(process: subprocess.Popen, host: str, port: int, log_path: Path) -> bool:
    """Wait until the server answers on its port ("ready" is printed), or say why it did not: it exited, or its
    application failed to start (the reloader would then wait for a code change forever): the log's last lines
    on stderr. Bounded by STARTUP_TIMEOUT_S."""
    import time

    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        log = log_path.read_text(encoding="utf-8", errors="replace")
        if process.poll() is not None or "Application startup failed" in log:
            tail = "\n".join(log.splitlines()[-LOG_TAIL_LINES:])
            print(f"error: the Studio server did not start; the end of {log_path}:\n{tail}", file=sys.stderr)
            return False
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
            print("ready", flush=True)
            return True
        time.sleep(0.25)
    print(f"error: the Studio server did not answer within {STARTUP_TIMEOUT_S:g} s; see {log_path}", file=sys.stderr)
    return False


class _StopAsked(ReactGraphError):
    """SIGTERM or SIGHUP reached `reactgraph studio`: stop the server as Ctrl+C does."""


def _stop_on(*signals: signal.Signals) -> Callable[[], None]:
    """Turn these signals into `_StopAsked` while the server runs; returns what restores the old handlers."""
    import threading

    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        return lambda: None

    def stop(signum: int, _frame: object) -> None:
        raise _StopAsked(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, stop) for sig in signals}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore


def _signal_group(process: subprocess.Popen, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
        os.killpg(process.pid, sig)  # the group the server leads (process_group=0)


def _check_store(store: str | None) -> str:
    """Where the server will keep threads ("Redis redis://…"), or "error: <one line>" if it cannot."""
    from reactgraph.memory.checkpointer import CheckpointerConfigError
    from reactgraph.memory.embedded_redis import EmbeddedRedisError
    from reactgraph.memory.redis_checkpoint import CheckpointStoreUnavailable, InvalidRedisSetting, InvalidRedisURL
    from reactgraph.studio.persistence import open_studio_store

    try:
        opened = open_studio_store(store)  # the embedded Redis, if chosen, is started now and stays up
    except (CheckpointerConfigError, CheckpointStoreUnavailable, InvalidRedisURL, InvalidRedisSetting,
            EmbeddedRedisError) as exc:
        return f"error: {exc}"
    close = getattr(opened.saver, "close", None)  # a RedisSaver: open_studio_store opens nothing else
    if callable(close):
        close()
    return opened.description


def _exit_code(returncode: int) -> int:
    # uvicorn re-raises the signal after a graceful shutdown; Ctrl+C is how a user stops it, not a failure.
    if returncode == -signal.SIGINT:
        return 0
    return 128 - returncode if returncode < 0 else returncode
