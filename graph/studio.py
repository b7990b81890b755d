"""LangGraph Studio: the graphs `langgraph.json` exports, and `run_studio` that serves them with `langgraph dev`.

The graphs are compiled without a checkpointer: the dev server brings its own persistence and refuses a
custom one. They use the default gateway and `Context.model` (the scripted offline model unless a run's
context or $REACTGRAPH_MODEL says otherwise).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from reactgraph.graph.plan_solve import build_plan_solve_graph
from reactgraph.graph.react import build_react_graph
from reactgraph.graph.reflexion import build_reflexion_graph

react = build_react_graph(name="react")
plan_solve = build_plan_solve_graph(name="plan_solve")
reflexion = build_reflexion_graph(name="reflexion")

PROJECT_DIR = Path(__file__).resolve().parent.parent
CONFIG_FILE = PROJECT_DIR / "langgraph.json"
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


def studio_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) without license keys and with telemetry switched off."""
    env = {key: value for key, value in (os.environ if base is None else base).items() if key not in LICENSE_ENV}
    env.update(OFFLINE_ENV)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def run_studio(host: str = "127.0.0.1", port: int | None = None, open_browser: bool = False, *,
               config: Path | None = None) -> int:
    """Serve the graphs of `config` (the project's langgraph.json) with `langgraph dev` until Ctrl+C.

    Returns the server's exit code. Blocks; the server runs in this process group, so Ctrl+C in a
    terminal reaches it (and uvicorn's reload worker) directly.
    """
    config = (config or CONFIG_FILE).resolve()
    if importlib.util.find_spec("langgraph_api") is None:  # the in-memory server behind `langgraph dev`
        print("LangGraph Studio needs the dev server: pip install 'langgraph-cli[inmem]'", file=sys.stderr)
        return 2
    if not config.is_file():
        print(f"no {config}; Studio runs from a source checkout (pip install -e .)", file=sys.stderr)
        return 2
    port = port or free_port(host)
    print(f"LangGraph Studio: {studio_url(host, port)}")
    print(f"API: http://{host}:{port}  (docs: http://{host}:{port}/docs) · Ctrl+C stops the server", flush=True)
    process = subprocess.Popen(studio_command(host, port, open_browser=open_browser, config=config),
                               cwd=config.parent, env=studio_env())
    try:
        return _exit_code(process.wait())
    except KeyboardInterrupt:
        # The terminal's Ctrl+C reached the server too. Then SIGTERM, not a second SIGINT: uvicorn takes that
        # as "force quit" and skips the shutdown that saves the dev server's threads to .langgraph_api/.
        process.terminate()
        try:
            code = process.wait(timeout=15)
        except (KeyboardInterrupt, subprocess.TimeoutExpired):
            process.kill()
            return _exit_code(process.wait())
        return 0 if code in (-signal.SIGINT, -signal.SIGTERM) else _exit_code(code)  # the stop the user asked for
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _exit_code(returncode: int) -> int:
    # uvicorn re-raises the signal after a graceful shutdown; Ctrl+C is how a user stops it, not a failure.
    if returncode == -signal.SIGINT:
        return 0
    return 128 - returncode if returncode < 0 else returncode
