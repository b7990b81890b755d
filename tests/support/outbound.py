"""Nothing leaves the machine: an audit hook under which a DNS query or a connection to anything but loopback fails
at once (as a failed lookup) and is recorded. The test process installs it (tests/conftest.py, whose autouse
fixture fails a test that tried), and so does every command forked by `support.forked_commands`: a forked process
starts from a fresh interpreter, without the test process's hooks. Unix sockets are local by nature."""

from __future__ import annotations

import ipaddress
import socket
import sys
import threading

_ATTEMPTS: list[str] = []
_LOCK = threading.Lock()
_INSTALLED = False


def _is_local(host: object) -> bool:
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if host is None or host in ("", "localhost"):
        return True
    try:
        address = ipaddress.ip_address(str(host).split("%")[0])
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def _refuse_outbound(event: str, args: tuple) -> None:
    if event == "socket.getaddrinfo" and not _is_local(args[0]):
        host = args[0]
    elif event in ("socket.connect", "socket.sendto") and isinstance(args[1], tuple) and not _is_local(args[1][0]):
        host = args[1][0]
    elif event == "socket.gethostbyname" and not _is_local(args[0]):
        host = args[0]
    else:
        return
    with _LOCK:
        _ATTEMPTS.append(f"{event} {host!r}")
    raise socket.gaierror(socket.EAI_NONAME, f"the test suite sends nothing off this machine ({host!r})")


def refuse() -> None:
    """Install the hook in this process (once: audit hooks cannot be removed)."""
    global _INSTALLED
    if not _INSTALLED:
        sys.addaudithook(_refuse_outbound)
        _INSTALLED = True


def attempts() -> list[str]:
    """The refused attempts since the last call, and forget them."""
    with _LOCK:
        tried, _ATTEMPTS[:] = list(_ATTEMPTS), []
    return tried
