"""The part every scripted model-provider test server shares: a threaded HTTP server on loopback that
records each request and answers from a script, in order."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedServer:
    """`with Server(reply, ...) as server:` — replies (or callables of the request body) are served in order."""

    def __init__(self, replies: tuple[Any, ...], handler: type[BaseHTTPRequestHandler],
                 exhausted: Callable[[], Any]) -> None:
        self.script: deque[Any] = deque(replies)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._exhausted = exhausted
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    def add(self, *replies: Any) -> None:
        with self._lock:
            self.script.extend(replies)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def record(self, body: dict[str, Any], headers: dict[str, str], refusal: Any = None) -> Any:
        """Log the request; answer with `refusal` when given (script untouched), else the next scripted reply."""
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            if refusal is not None:
                return refusal
            item = self.script.popleft() if self.script else self._exhausted()
        return item(body) if callable(item) else item

    def roles(self, i: int) -> list[str]:
        return [m["role"] for m in self.requests[i]["messages"]]
