"""Shared fixtures: a Redis to share breaker state through, and a clock the tests move by hand."""

from __future__ import annotations

import os
import uuid

import pytest
import redis

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/15"


class FakeClock:
    """Wall time that only moves when a test says so, so cool-downs pass without sleeping."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(autouse=True, scope="session")
def reactgraph_home(tmp_path_factory: pytest.TempPathFactory):
    """A temporary $REACTGRAPH_HOME for the session: the default index and any embedded Redis a CLI run starts
    live there, never in the user's home; that Redis is stopped when the session ends."""
    os.environ.setdefault("REACTGRAPH_HOME", str(tmp_path_factory.mktemp("reactgraph-home")))
    yield
    from reactgraph.memory.embedded_redis import data_dir, stop
    stop(data_dir())


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="session")
def redis_url() -> str:
    """REDIS_URL if set, else database 15 on the local server; a test that needs Redis fails without one."""
    url = os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL
    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        # Failing, not skipping: shared breaker state is a feature, and a silent skip would hide its breakage.
        pytest.fail(f"these tests need Redis, but none answers PING at {url} ({exc}); "
                    "start one (e.g. `redis-server`) or point REDIS_URL at one", pytrace=False)
    finally:
        client.close()
    return url


@pytest.fixture
def redis_prefix(redis_url: str):
    """A key prefix of this test's own; its keys (and only those) are deleted afterwards."""
    prefix = f"reactgraph-test:{uuid.uuid4().hex}:"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=500))
        if keys:
            client.delete(*keys)
    finally:
        client.close()
