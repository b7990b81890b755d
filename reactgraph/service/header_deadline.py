"""uvicorn's HTTP protocol with a deadline for a request's line and headers (uvicorn has none: a client sending
its headers a byte at a time — slowloris — holds a connection for ever, and enough of them hold them all).

The deadline runs from the connection's start, and from the first byte of each further request on a kept-alive
connection (an idle kept-alive connection is uvicorn's keep-alive timeout's to close). A request whose head is
not complete by then gets a 408 and the connection is closed.
"""

from __future__ import annotations

import asyncio
from typing import Any

_TIMED_OUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
              b"connection: close\r\n\r\n%s")


def _base() -> type:
    try:  # what uvicorn's "auto" picks when httptools is installed (uvicorn[standard])
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
        return HttpToolsProtocol
    except ImportError:
        from uvicorn.protocols.http.h11_impl import H11Protocol
        return H11Protocol


def header_deadline_protocol(header_timeout_s: float) -> type:
    """A uvicorn `http=` protocol class closing a connection whose request head takes over `header_timeout_s`."""
    base: Any = _base()

    class HeaderDeadlineProtocol(base):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._deadline is None and self._between_requests():
                self._arm()  # a further request's first bytes on a kept-alive connection
            super().data_received(data)
            if not self._between_requests():
                self._disarm()  # its head is in: the body's time is the app's to bound

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _between_requests(self) -> bool:
            cycle = getattr(self, "cycle", None)
            return cycle is None or cycle.response_complete

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(header_timeout_s, self._timed_out)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _timed_out(self) -> None:
            self._deadline = None
            if self.transport.is_closing() or not self._between_requests():
                return
            body = (b'{"detail":"the request line and headers did not arrive within %g s"}' % header_timeout_s)
            self.transport.write(_TIMED_OUT % (len(body), body))
            self.transport.close()

    return HeaderDeadlineProtocol
