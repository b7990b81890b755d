"""Where the embedded Redis keeps its data and its socket, and the checks that both are the user's alone.

A unix socket's path is limited to about 104 bytes, so a long `$REACTGRAPH_HOME` gets its socket in a short
private directory instead (`$XDG_RUNTIME_DIR/reactgraph-UID`, else `/tmp/reactgraph-UID`); the data stays home.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from pathlib import Path

from reactgraph.errors import ReactGraphError

# sun_path holds 108 bytes on Linux and 104 on macOS (BSDs too), the terminating NUL included
MAX_SOCKET_PATH = 107 if sys.platform.startswith("linux") else 103
# a runtime directory longer than this would not leave room for our own directory and socket name
_MAX_RUNTIME_DIR = 48


class EmbeddedRedisError(ReactGraphError, RuntimeError):
    """The embedded Redis cannot be used here or could not be started; the message says why and what to do."""


def data_dir() -> Path:
    """Where the embedded Redis keeps its socket, data and log."""
    home = os.environ.get("REACTGRAPH_HOME") or str(Path.home() / ".reactgraph")
    return Path(home).expanduser() / "redis"


def socket_path_for(directory: Path) -> Path:
    """`redis.sock` in the data directory, or, where that path is too long for a unix socket, a short one in a
    private directory of this user's (the same one for the same data directory, so every command finds it)."""
    socket_path = directory / "redis.sock"
    if len(os.fsencode(socket_path)) <= MAX_SOCKET_PATH:
        return socket_path
    name = hashlib.sha256(os.fsencode(directory)).hexdigest()[:16] + ".sock"
    return _short_socket_dir() / name


def _short_socket_dir() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    # $XDG_RUNTIME_DIR is the user's own 0700 directory where it exists (systemd); /tmp is everywhere
    usable = runtime and Path(runtime).is_absolute() and len(os.fsencode(runtime)) <= _MAX_RUNTIME_DIR
    base = Path(runtime) if usable else Path("/tmp")
    return base / f"reactgraph-{os.geteuid()}"


def private_dir(directory: Path, fix: str) -> None:
    """Create `directory` 0700, or refuse an existing one that another user owns or may write to: they could
    read the append-only file, or move the socket and answer in the server's place. `fix` says what to do."""
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = directory.lstat()
    except OSError as exc:
        raise EmbeddedRedisError(f"cannot create the embedded Redis's directory {directory} "
                                 f"({exc.strerror or exc}): {fix}") from exc
    if not stat.S_ISDIR(info.st_mode):
        raise EmbeddedRedisError(f"the embedded Redis's directory {directory} is not a directory: {fix}")
    if info.st_uid != os.geteuid():
        raise EmbeddedRedisError(f"the embedded Redis's directory {directory} belongs to another user "
                                 f"(uid {info.st_uid}): {fix}")
    if info.st_mode & 0o022:
        raise EmbeddedRedisError(f"the embedded Redis's directory {directory} is writable by other users "
                                 f"(mode {stat.S_IMODE(info.st_mode):o}), so its data cannot be trusted: "
                                 f"check its files, then chmod 700 {directory}; or {fix}")
    if info.st_mode & 0o077:
        directory.chmod(0o700)  # only readable by others: nothing can have been planted, so closing it is enough
