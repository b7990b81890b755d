"""Choosing where sessions live from one URL, including the embedded Redis used when REDIS_URL is unset."""

from __future__ import annotations

import uuid

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph.graph import Context, build_react_graph
from reactgraph.memory import CheckpointStoreUnavailable, InvalidRedisURL, RedisSaver
from reactgraph.memory.checkpointer import CheckpointerConfigError, open_checkpointer, resolve_url
from reactgraph.memory.embedded_redis import ensure_running, stop


def ask_twice(saver, thread: str) -> int:
    """Two questions on one thread; returns how many questions the session holds (the window keeps all)."""
    graph = build_react_graph(checkpointer=saver)
    config = {"configurable": {"thread_id": thread}}
    context = Context(memory_window=50)
    graph.invoke({"messages": [HumanMessage("计算 1 + 1 等于多少")]}, config=config, context=context)
    graph.invoke({"messages": [HumanMessage("计算 2 + 2 等于多少")]}, config=config, context=context)
    return sum(m.type == "human" for m in graph.get_state(config).values["messages"])


def test_memory_sqlite_and_redis_urls_each_keep_a_session(tmp_path, redis_url):
    memory = open_checkpointer("memory")
    assert isinstance(memory.saver, InMemorySaver) and "lost when the process exits" in memory.description
    sqlite = open_checkpointer(f"sqlite:///{tmp_path}/sessions.db")
    on_redis = open_checkpointer(redis_url)
    assert isinstance(on_redis.saver, RedisSaver) and on_redis.redis_url == redis_url
    thread = f"factory-{uuid.uuid4().hex[:10]}"  # the Redis is shared with other workers and other runs
    try:
        for opened in (memory, sqlite, on_redis):
            assert ask_twice(opened.saver, thread) == 2
    finally:
        on_redis.saver.delete_thread(thread)


def test_redis_url_comes_from_the_environment_then_the_embedded_default(monkeypatch):
    monkeypatch.setenv("REDIS_URL", "redis://example:6379/2")
    assert resolve_url() == "redis://example:6379/2"
    assert resolve_url("memory") == "memory"
    monkeypatch.delenv("REDIS_URL")
    assert resolve_url() == "embedded"


@pytest.mark.parametrize(("url", "error", "message"), [
    ("postgres://db/x", CheckpointerConfigError, "unknown checkpointer URL"),
    ("redis://127.0.0.1:notaport/0", InvalidRedisURL, "invalid Redis URL"),
    ("redis://:s3cret@127.0.0.1:1/0", CheckpointStoreUnavailable, "cannot reach Redis at redis://127.0.0.1:1/0"),
])
def test_bad_urls_fail_early_with_one_line_that_hides_the_password(url, error, message):
    with pytest.raises(error) as caught:
        open_checkpointer(url)
    text = str(caught.value)
    assert message in text and "s3cret" not in text and "\n" not in text


def test_the_embedded_redis_starts_once_and_keeps_sessions_across_restarts(tmp_path):
    directory = tmp_path / "redis"
    url = ensure_running(directory)
    try:
        assert url == ensure_running(directory)  # the second command reuses the running server
        with RedisSaver.from_url(url) as saver:
            assert ask_twice(saver, "embedded") == 2
        assert stop(directory)
        restarted = ensure_running(directory)  # data comes back from the append-only file
        with RedisSaver.from_url(restarted) as saver:
            assert ask_twice(saver, "embedded") == 4
    finally:
        stop(directory)
