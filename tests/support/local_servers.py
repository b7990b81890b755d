"""What tests need to run servers of their own on loopback: a free port, and a private redis-server."""

from __future__ import annotations

import functools
import itertools
import os
import random
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import redis

from reactgraph._tls import shared_ssl_context

# The ports tests start servers on come from below the kernel's ephemeral range. A port the kernel picks (a bind to
# port 0), once released, can be handed out again before the test's server binds it: to another test's client
# connection or to a server of its own binding port 0 (seen: a service test's `reactgraph serve` met another test's
# HTTP server on its port). Below that range only this function gives ports out, each pytest-xdist worker from a
# block of its own, walked from a random start (a process this worker starts may pick ports too).
TEST_PORTS_FROM = 20000


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default; macOS and Windows start theirs at 49152


@functools.cache  # the worker and its range do not change while it runs
def _worker_ports() -> range:
    workers = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1), 1)
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0) % workers
    block = (_ephemeral_start() - TEST_PORTS_FROM) // workers
    return range(TEST_PORTS_FROM + worker * block, TEST_PORTS_FROM + (worker + 1) * block)


_next_ports: Iterator[int] | None = None


def free_port() -> int:
    """A port nothing listens on now, from this worker's block below the ephemeral range (see TEST_PORTS_FROM);
    where that range starts too low for blocks, one the kernel picks."""
    global _next_ports
    ports = _worker_ports()
    if len(ports) < 100:
        return _kernel_port()
    if _next_ports is None:
        start = random.randrange(len(ports))
        _next_ports = itertools.cycle([*ports[start:], *ports[:start]])
    for port in itertools.islice(_next_ports, len(ports)):
        with socket.socket() as sock:
            try:  # bound without SO_REUSEADDR: a port still in TIME_WAIT is passed over too
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    return _kernel_port()


def _kernel_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http_client(**options: Any) -> httpx.Client:
    """An httpx client for the plain-HTTP servers the tests start on loopback. Made with httpx's default `verify`,
    each client would load the CA bundle into a TLS context of its own (≈ 20 ms of CPU); these share one."""
    return httpx.Client(verify=shared_ssl_context(httpx), **options)


def http_request(method: str, url: str, *, timeout: float = 30.0, **options: Any) -> httpx.Response:
    """`httpx.request`, on a client of `http_client`."""
    with http_client(timeout=timeout) as client:
        return client.request(method, url, **options)


def redis_pings(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=0.5).ping())
    except redis.RedisError:
        return False


def private_redis(data: Path) -> tuple[Callable[[], str], list[subprocess.Popen]]:
    """(start, processes): `start()` runs a redis-server (the machine's, else the embedded one's binary) that
    keeps its data in `data` (append-only, fsync always), so a test may stop it and start it again."""
    binary = shutil.which("redis-server")
    if binary is None:
        from reactgraph.memory.embedded_redis import _server_binary
        binary = _server_binary()
    port = free_port()
    data.mkdir(parents=True, exist_ok=True)
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data), "--appendonly", "yes",
               "--appendfsync", "always", "--save", ""]
    processes: list[subprocess.Popen] = []

    def start() -> str:
        processes.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        url = f"redis://127.0.0.1:{port}/0"
        deadline = time.monotonic() + 30
        while not redis_pings(url):
            if time.monotonic() > deadline:
                raise AssertionError(f"redis-server on port {port} did not start in 30 s")
            time.sleep(0.05)
        return url

    return start, processes


class _Recorder(BaseHTTPRequestHandler):
    """Answers every request; keeps its path, headers and body on the server."""

    def do_GET(self) -> None:
        self._answer(b"")

    def do_POST(self) -> None:
        self._answer(self.rfile.read(int(self.headers.get("content-length") or 0)))

    def _answer(self, body: bytes) -> None:
        self.server.seen.append((self.path, dict(self.headers), body))  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("content-type", "text/plain" if self.command == "GET" else "application/x-protobuf")
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def http_recorder() -> Iterator[tuple[str, list[tuple[str, dict[str, str], bytes]]]]:
    """An HTTP server on a free loopback port (an OTLP collector, a web page): (its base URL, the requests it got)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    httpd.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", httpd.seen  # type: ignore[attr-defined]
    finally:
        httpd.shutdown()
        httpd.server_close()
