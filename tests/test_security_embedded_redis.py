"""The embedded Redis's files are the user's alone: a data directory another user owns or may write to is refused
in one line, new ones are 0700, a home too long for a unix socket gets its socket in a short private directory,
and a server that does not answer in time is stopped rather than left running."""

from __future__ import annotations

import logging
import os
import stat
import tempfile
from pathlib import Path

import pytest
import redis

from reactgraph.cli.app import main
from reactgraph.memory import embedded_redis
from reactgraph.memory.embedded_redis import EmbeddedRedisError, ensure_running, status, stop

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
NOBODY = 65534


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _running(pid: int) -> bool:
    """Whether `pid` runs (a zombie, exited but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return True


@pytest.fixture
def directory(tmp_path):
    path = tmp_path / "redis"
    yield path
    stop(path)


@pytest.fixture
def runtime_dir(monkeypatch):
    """A short $XDG_RUNTIME_DIR of this test's own (tmp_path may itself be too long for a socket's directory)."""
    with tempfile.TemporaryDirectory(prefix="rg", dir="/tmp") as short:
        monkeypatch.setenv("XDG_RUNTIME_DIR", short)
        yield Path(short)


def test_a_new_data_directory_and_the_servers_files_are_private(directory):
    url = ensure_running(directory)
    client = redis.Redis.from_url(url)
    client.set("k", "v")
    client.close()
    assert _mode(directory) == 0o700
    files = [p for p in directory.rglob("*") if p.is_file()]
    assert any("appendonly" in p.name or p.suffix == ".aof" for p in files), files
    assert all(_mode(p) & 0o077 == 0 for p in files), {p.name: oct(_mode(p)) for p in files}


def test_a_world_writable_data_directory_is_refused_in_one_line_and_nothing_starts(directory):
    directory.mkdir()
    directory.chmod(0o777)
    with pytest.raises(EmbeddedRedisError) as caught:
        ensure_running(directory)
    message = str(caught.value)
    assert "writable by other users" in message and f"chmod 700 {directory}" in message and "\n" not in message
    assert not (directory / "redis.pid").exists() and not (directory / "redis.sock").exists()
    assert _mode(directory) == 0o777  # refused, not silently changed: its files may have been tampered with


def test_a_group_writable_data_directory_is_refused_too(directory):
    directory.mkdir()
    directory.chmod(0o770)
    with pytest.raises(EmbeddedRedisError, match="writable by other users"):
        ensure_running(directory)


def test_a_data_directory_others_can_only_read_is_closed_and_used(directory):
    directory.mkdir()
    directory.chmod(0o755)
    ensure_running(directory)
    assert _mode(directory) == 0o700 and status(directory)["running"] is True


@pytest.mark.skipif(not IS_ROOT, reason="giving a directory to another user needs root")
def test_a_data_directory_of_another_user_is_refused(directory):
    directory.mkdir(mode=0o700)
    os.chown(directory, NOBODY, NOBODY)
    with pytest.raises(EmbeddedRedisError, match=r"belongs to another user \(uid 65534\)"):
        ensure_running(directory)


def test_the_cli_refuses_an_unsafe_home_in_one_line(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    (home / "redis").mkdir(parents=True)
    (home / "redis").chmod(0o777)
    monkeypatch.setenv("REACTGRAPH_HOME", str(home))
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert main(["ask", "2+3", "--json"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "writable by other users" in lines[0] and "chmod 700" in lines[0], captured.err
    assert captured.out == ""


def test_a_home_too_long_for_a_unix_socket_gets_a_short_private_socket(tmp_path, runtime_dir, caplog):
    directory = tmp_path / ("家目录" * 12) / "redis"  # 108 bytes of name alone: too long for any sun_path
    assert len(os.fsencode(directory / "redis.sock")) > 108
    try:
        with caplog.at_level(logging.WARNING, logger=embedded_redis.__name__):
            url = ensure_running(directory)
        socket_path = Path(url.removeprefix("unix://"))
        assert socket_path.parent == runtime_dir / f"reactgraph-{os.geteuid()}" and socket_path.is_socket()
        assert _mode(socket_path.parent) == 0o700
        assert any(str(socket_path) in r.getMessage() and "too long" in r.getMessage() for r in caplog.records)
        client = redis.Redis.from_url(url)
        client.set("k", "v")
        client.close()
        report = status(directory)
        assert report["running"] is True and report["socket"] == str(socket_path)
        assert report["data_dir"] == str(directory.resolve()) and (directory / "redis.pid").exists()
        assert ensure_running(directory) == url  # the next command finds the same server
    finally:
        assert stop(directory) is True
    assert status(directory)["running"] is False


def test_the_cli_works_from_a_long_home(tmp_path, runtime_dir, monkeypatch, capsys):
    home = tmp_path / ("h" * 110)
    monkeypatch.setenv("REACTGRAPH_HOME", str(home))
    monkeypatch.delenv("REDIS_URL", raising=False)
    try:
        assert main(["ask", "计算 2+3"]) == 0
        first_line = capsys.readouterr().out.splitlines()[0]
        assert f"socket unix://{runtime_dir}/reactgraph-{os.geteuid()}/" in first_line  # where, said at once
        assert main(["ask", "计算 2+3", "--json"]) == 0
        assert '"status": "answered"' in capsys.readouterr().out
    finally:
        stop(home / "redis")


@pytest.mark.skipif(not IS_ROOT, reason="giving a directory to another user needs root")
def test_a_short_socket_directory_someone_else_made_is_refused(tmp_path, runtime_dir):
    planted = runtime_dir / f"reactgraph-{os.geteuid()}"
    planted.mkdir(mode=0o700)
    os.chown(planted, NOBODY, NOBODY)
    with pytest.raises(EmbeddedRedisError, match=r"belongs to another user.*XDG_RUNTIME_DIR"):
        ensure_running(tmp_path / ("x" * 110) / "redis")


HANGING_SERVER = """#!/bin/sh
# Daemonizes like valkey-server (a background process, its pid in --pidfile) but never opens the socket.
while [ $# -gt 0 ]; do
  if [ "$1" = --pidfile ]; then pidfile=$2; fi
  shift
done
sleep 120 </dev/null >/dev/null 2>&1 &
echo $! > "$pidfile"
"""


def test_a_server_that_does_not_answer_in_time_is_stopped_not_orphaned(directory, tmp_path, monkeypatch):
    # A server that never answers (stuck loading, a socket it cannot open) cannot be made from the real binary
    # on demand, so a stand-in daemonizes a process that never listens.
    binary = tmp_path / "hanging-server"
    binary.write_text(HANGING_SERVER)
    binary.chmod(0o700)
    monkeypatch.setattr(embedded_redis, "_server_binary", lambda: str(binary))
    monkeypatch.setattr(embedded_redis, "START_TIMEOUT_S", 0.3)
    with pytest.raises(EmbeddedRedisError) as caught:
        ensure_running(directory)
    message = str(caught.value)
    assert "did not answer" in message and "was stopped (pid " in message and "\n" not in message
    pid = int(message.split("(pid ")[1].split(")")[0])
    assert not _running(pid)
    assert not (directory / "redis.pid").exists()
