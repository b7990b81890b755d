"""The plain-Redis long-term store: the same answers as LangGraph's InMemoryStore, plus what only Redis adds
(persistence across store objects, newest-first search, TTLs, clear failures), and a graph that uses it.

Every store here writes under the test's own key prefix (the `redis_prefix` fixture deletes those keys).
"""

from __future__ import annotations

import asyncio
import operator
import threading
import time
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import pytest
import redis
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from reactgraph.memory import CheckpointStoreUnavailable, InvalidRedisURL, RedisStore
from support.local_servers import free_port
from support.redis_traffic import counting_connection_class


@pytest.fixture
def store(redis_url: str, redis_prefix: str):
    with RedisStore.from_url(redis_url, prefix=redis_prefix + "store") as opened:
        yield opened


def view(result: Any) -> Any:
    """What both stores must agree on: namespaces, keys and values (timestamps are each store's own)."""
    if isinstance(result, Item):
        return (tuple(result.namespace), result.key, result.value)
    if isinstance(result, list):
        inner = [view(r) for r in result]
        if result and all(isinstance(r, Item) for r in result):
            # InMemoryStore returns search hits in insertion order, RedisStore newest first (like the
            # Postgres and SQLite stores): compare them as sets; order is tested on its own below.
            return sorted(inner, key=repr)
        return inner
    return result


# --- the same operations on InMemoryStore and RedisStore --------------------------------------------

NAMESPACES = [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f"), ("a", "c", "f"),
              ("b", "a", "f"), ("users", "123"), ("users", "456", "settings"), ("admin", "users", "789"),
              ("users2", "1"), ("a-b",)]


def scenario_crud(store) -> list[Any]:
    out = []
    store.put(("docs", "u1"), "k1", {"text": "你好", "n": 1, "nested": {"x": [1, 2.5, None, True]}})
    store.put(("docs", "u1"), "k2", {"text": "two"})
    store.put(("docs", "u1:x"), "键 with:colons.dots\0nul", {"odd": "key"})
    out.append(store.get(("docs", "u1"), "k1"))
    out.append(store.get(("docs", "u1:x"), "键 with:colons.dots\0nul"))
    out.append(store.get(("docs", "u1"), "missing"))
    store.put(("docs", "u1"), "k1", {"text": "updated"})
    out.append(store.get(("docs", "u1"), "k1"))
    store.delete(("docs", "u1"), "k2")
    out.append(store.get(("docs", "u1"), "k2"))
    out.append(store.search(("docs",)))
    store.delete(("docs", "u1"), "never-written")
    return out


def scenario_search(store) -> list[Any]:
    items = [("red", 5, "a"), ("red", 9, "b"), ("blue", 9, "c"), ("green", 1.5, "d"), ("red", 20, "e")]
    for i, (color, score, tag) in enumerate(items):
        store.put(("shop", "fruit" if i % 2 else "veg"), f"item{i}", {"color": color, "score": score, "tag": tag,
                                                                    "meta": {"kind": "x" if i < 3 else "y"}})
    store.put(("shopping",), "not-under-shop", {"color": "red", "score": 5})
    filters: list[dict[str, Any] | None] = [
        None, {"color": "red"}, {"color": {"$eq": "red"}}, {"color": {"$ne": "red"}}, {"score": {"$gt": 5}},
        {"score": {"$gte": 9}}, {"score": {"$lt": 9}}, {"score": {"$lte": 5}}, {"score": {"$gt": 1, "$lt": 10}},
        {"color": "red", "score": {"$gte": 9}}, {"meta": {"kind": "y"}}, {"color": "purple"},
    ]
    out: list[Any] = [store.search(("shop",), filter=f, limit=100) for f in filters]
    out.append(store.search(("shop", "fruit"), limit=100))
    out.append(store.search((), filter={"score": 5}, limit=100))
    out.append(store.search(("shop",), query="ignored without an index", filter={"color": "blue"}))
    out.append(len(store.search(("shop",), limit=2)))
    out.append(len(store.search(("shop",), limit=2, offset=4)))
    return out


def scenario_namespaces(store) -> list[Any]:
    for i, namespace in enumerate(NAMESPACES):
        store.put(namespace, f"id_{i}", {"data": f"value_{i}"})
    return [
        store.list_namespaces(),
        store.list_namespaces(prefix=("a", "b")),
        store.list_namespaces(prefix=("a",)),
        store.list_namespaces(prefix=("users",)),
        store.list_namespaces(suffix=("f",)),
        store.list_namespaces(prefix=("a",), suffix=("f",)),
        store.list_namespaces(prefix=("a", "*", "f")),
        store.list_namespaces(suffix=("*", "f")),
        store.list_namespaces(prefix=("*", "users")),
        store.list_namespaces(max_depth=1),
        store.list_namespaces(prefix=("a",), max_depth=3),
        store.list_namespaces(limit=3),
        store.list_namespaces(limit=3, offset=3),
        store.list_namespaces(prefix=("nothing",)),
    ]


def scenario_batch(store) -> list[Any]:
    store.put(("batch",), "old", {"v": 0})
    results = store.batch([
        PutOp(("batch",), "new", {"v": 1}),
        GetOp(("batch",), "new"),  # reads see the store as it was before this batch's writes
        GetOp(("batch",), "old"),
        PutOp(("batch",), "old", {"v": 2}),
        PutOp(("batch",), "old", {"v": 3}),  # the last write to a key wins
        SearchOp(("batch",)),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("batch",)),)),
    ])
    return [results, store.get(("batch",), "new"), store.get(("batch",), "old")]


SCENARIOS = {"crud": scenario_crud, "search": scenario_search, "namespaces": scenario_namespaces,
             "batch": scenario_batch}


@pytest.mark.parametrize("name", SCENARIOS)
def test_redis_store_answers_like_in_memory_store(name: str, store: RedisStore) -> None:
    expected = SCENARIOS[name](InMemoryStore())
    actual = SCENARIOS[name](store)
    assert view(actual) == view(expected)


@pytest.mark.parametrize("name", SCENARIOS)
async def test_async_api_answers_like_sync_api(name: str, redis_url: str, redis_prefix: str) -> None:
    class AsyncOnly:
        """Runs a scenario's sync calls through the store's async API."""

        def __init__(self, inner: RedisStore) -> None:
            self.inner = inner

        def __getattr__(self, attr: str):
            method = getattr(self.inner, "a" + attr)
            return lambda *a, **kw: asyncio.run_coroutine_threadsafe(method(*a, **kw), loop).result()

    loop = asyncio.get_running_loop()
    with RedisStore.from_url(redis_url, prefix=redis_prefix + "sync") as sync_store, \
            RedisStore.from_url(redis_url, prefix=redis_prefix + "async") as async_store:
        expected = SCENARIOS[name](sync_store)
        actual = await asyncio.to_thread(SCENARIOS[name], AsyncOnly(async_store))
    assert view(actual) == view(expected)


# --- what RedisStore promises beyond InMemoryStore ---------------------------------------------------


def test_items_persist_across_store_objects_and_keep_created_at(store: RedisStore, redis_url: str) -> None:
    store.put(("users", "alice"), "profile", {"name": "Alice", "city": "杭州"})
    first = store.get(("users", "alice"), "profile")
    assert first is not None and first.created_at == first.updated_at
    time.sleep(0.002)
    with RedisStore.from_url(redis_url, prefix=store.prefix) as other:  # another process, in effect
        other.put(("users", "alice"), "profile", {"name": "Alice", "city": "上海"})
        again = other.get(("users", "alice"), "profile")
    assert again.value == {"name": "Alice", "city": "上海"}
    assert again.created_at == first.created_at and again.updated_at > first.updated_at


def test_search_is_newest_first_across_namespaces_and_pages_cover_everything(store: RedisStore) -> None:
    for i in range(12):
        store.put(("log", f"user{i % 3}"), f"q{i}", {"i": i})
    store.put(("log", "user0"), "q0", {"i": 100})  # an update makes it the newest
    newest = store.search(("log",), limit=3)
    assert [item.key for item in newest] == ["q0", "q11", "q10"]
    pages = [store.search(("log",), limit=5, offset=offset) for offset in (0, 5, 10)]
    keys = [item.key for page in pages for item in page]
    assert len(keys) == 12 and set(keys) == {f"q{i}" for i in range(12)}
    stamps = [item.updated_at for page in pages for item in page]
    assert stamps == sorted(stamps, reverse=True)
    filtered = store.search(("log",), filter={"i": {"$lt": 6}}, limit=2, offset=1)
    assert [item.value["i"] for item in filtered] == [4, 3]


def test_text_compares_as_text_where_in_memory_store_raises(store: RedisStore) -> None:
    for tag in ["a", "b", "c"]:
        store.put(("tags",), tag, {"tag": tag, "n": "10"})
    store.put(("tags",), "none", {"n": 3})
    assert sorted(i.key for i in store.search(("tags",), filter={"tag": {"$gt": "a"}})) == ["b", "c"]
    assert sorted(i.key for i in store.search(("tags",), filter={"n": {"$gte": 5}})) == ["a", "b", "c"]
    memory = InMemoryStore()
    memory.put(("t",), "k", {"tag": "a"})
    with pytest.raises(ValueError):
        memory.search(("t",), filter={"tag": {"$gt": "b"}})


def test_namespace_prefixes_match_whole_labels(store: RedisStore) -> None:
    for namespace in [("users",), ("users2",), ("users", "1"), ("users-x", "1"), ("a", "b"), ("a", "bc")]:
        store.put(namespace, "k", {"ns": list(namespace)})
    assert {tuple(i.namespace) for i in store.search(("users",))} == {("users",), ("users", "1")}
    assert {tuple(i.namespace) for i in store.search(("a", "b"))} == {("a", "b")}
    assert store.list_namespaces(prefix=("users",)) == [("users",), ("users", "1")]


def test_deleting_the_last_item_drops_the_namespace(store: RedisStore) -> None:
    store.put(("tmp", "x"), "k1", {"v": 1})
    store.put(("tmp", "x"), "k2", {"v": 2})
    store.delete(("tmp", "x"), "k1")
    assert store.list_namespaces(prefix=("tmp",)) == [("tmp", "x")]
    store.delete(("tmp", "x"), "k2")
    assert store.list_namespaces(prefix=("tmp",)) == []  # InMemoryStore would still list it


def test_a_put_is_one_round_trip_and_a_bad_value_writes_nothing(redis_url: str, redis_prefix: str) -> None:
    counting = counting_connection_class()
    with RedisStore.from_url(redis_url, prefix=redis_prefix + "store", connection_class=counting) as store:
        store.put(("rt",), "warm-up", {"v": 0})  # connects, and loads the script on a server that lacks it
        store.get(("rt",), "warm-up")
        counting.sends = 0
        store.put(("rt",), "k", {"v": 1})
        assert counting.sends == 1
        counting.sends = 0
        store.get(("rt",), "k")
        assert counting.sends == 1
        counting.sends = 0
        with pytest.raises(TypeError, match="JSON"):
            store.batch([PutOp(("rt",), "a", {"ok": 1}), PutOp(("rt",), "b", {"when": object()})])
        assert counting.sends == 0  # refused before anything was sent
        assert store.get(("rt",), "a") is None


def test_invalid_namespaces_are_refused(store: RedisStore) -> None:
    with pytest.raises(InvalidNamespaceError):
        store.put(("a.b",), "k", {"v": 1})  # "." would let ("a.b",) address ("a", "b")
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("a.b",), "k", {"v": 1})])
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp((), "k", {"v": 1})])
    store.put(("a",), "k", {"v": 1})
    with pytest.raises(ValueError, match="Unsupported operator"):
        store.search(("a",), filter={"v": {"$regex": "x"}})


# --- TTL ----------------------------------------------------------------------------------------------


def test_items_expire_and_leave_no_trace_in_search_or_namespaces(store: RedisStore, raw: redis.Redis) -> None:
    # Long enough to be seen alive on a busy machine, then waited out (not slept through: the time it takes
    # for the store to drop it is not ours to guess).
    store.put(("session", "s1"), "short", {"v": 1}, ttl=0.02)  # 1.2 s
    store.put(("session", "s1"), "long", {"v": 2})
    store.put(("session", "s2"), "short", {"v": 3}, ttl=0.02)
    assert len(store.search(("session",))) == 3
    deadline = time.monotonic() + 30
    while any(store.get(("session", s), "short", refresh_ttl=False) for s in ("s1", "s2")):
        assert time.monotonic() < deadline, "an item outlived its TTL by 30 s"
        time.sleep(0.05)
    assert [i.key for i in store.search(("session",))] == ["long"]
    assert store.list_namespaces(prefix=("session",)) == [("session", "s1")]
    assert raw.zcard(store.prefix + "exp") == 0  # the expiry index was swept too
    store.put(("session", "s1"), "long", {"v": 4}, ttl=None)
    assert raw.pttl(store.prefix + "i:session.s1\0long") == -1


def test_reads_restart_a_ttl_unless_told_not_to(store: RedisStore, raw: redis.Redis) -> None:
    key = store.prefix + "i:ttl\0k"
    store.put(("ttl",), "k", {"v": 1}, ttl=1)  # one minute
    raw.pexpire(key, 10_000)  # pretend 50 s have passed
    store.get(("ttl",), "k", refresh_ttl=False)
    assert raw.pttl(key) <= 10_000
    store.get(("ttl",), "k")
    assert raw.pttl(key) > 50_000
    raw.pexpire(key, 10_000)
    store.search(("ttl",))
    assert raw.pttl(key) > 50_000
    raw.pexpire(key, 10_000)
    store.search(("ttl",), refresh_ttl=False)
    assert raw.pttl(key) <= 10_000


def test_default_ttl_from_the_store_config(redis_url: str, redis_prefix: str, raw: redis.Redis) -> None:
    with RedisStore.from_url(redis_url, prefix=redis_prefix + "ttl", ttl={"default_ttl": 2,
                                                                          "refresh_on_read": False}) as store:
        store.put(("d",), "k", {"v": 1})
        store.put(("d",), "forever", {"v": 1}, ttl=None)
        key = store.prefix + "i:d\0k"
        assert 60_000 < raw.pttl(key) <= 120_000
        assert raw.pttl(store.prefix + "i:d\0forever") == -1
        raw.pexpire(key, 10_000)
        store.get(("d",), "k")
        assert raw.pttl(key) <= 10_000


# --- failures -----------------------------------------------------------------------------------------




def test_unreachable_redis_is_one_clear_line_without_the_password() -> None:
    port = free_port()
    store = RedisStore.from_url(f"redis://agent:s3cret@127.0.0.1:{port}/2", socket_connect_timeout=1)
    with pytest.raises(CheckpointStoreUnavailable) as info:
        store.get(("a",), "k")
    message = str(info.value)
    assert f"redis://agent@127.0.0.1:{port}/2" in message and "s3cret" not in message and "\n" not in message
    store.close()


def test_bad_urls_and_semantic_search_are_refused_up_front(redis_url: str) -> None:
    with pytest.raises(InvalidRedisURL, match="scheme"):
        RedisStore.from_url("http://localhost:6379")
    with pytest.raises(InvalidRedisURL) as info:
        RedisStore.from_url("redis://u:hunter2@localhost:notaport/0")
    assert "hunter2" not in str(info.value)
    with pytest.raises(NotImplementedError, match="semantic search"):
        RedisStore(redis.Redis.from_url(redis_url), index={"dims": 3, "embed": lambda texts: []})


# --- a graph that remembers across threads through runtime.store -------------------------------------


class Turn(TypedDict):
    question: str
    answer: str
    log: Annotated[list[str], operator.add]


@dataclass
class Ctx:
    user: str = "anon"


def remember(state: Turn, runtime: Runtime[Ctx]) -> dict:
    namespace = ("qa", runtime.context.user)
    earlier = runtime.store.search(namespace, limit=5)
    runtime.store.put(namespace, f"q{len(earlier)}", {"question": state["question"]})
    return {"answer": f"{len(earlier)} earlier", "log": [item.value["question"] for item in earlier]}


async def aremember(state: Turn, runtime: Runtime[Ctx]) -> dict:
    namespace = ("qa", runtime.context.user)
    earlier = await runtime.store.asearch(namespace, limit=5)
    await runtime.store.aput(namespace, f"q{len(earlier)}", {"question": state["question"]})
    return {"answer": f"{len(earlier)} earlier", "log": [item.value["question"] for item in earlier]}


def compiled(node, store: RedisStore):
    builder = StateGraph(Turn, context_schema=Ctx)
    builder.add_node("remember", node)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    return builder.compile(store=store)


def test_a_graph_node_remembers_across_threads_through_runtime_store(store: RedisStore) -> None:
    graph = compiled(remember, store)
    first = graph.invoke({"question": "北京天气？"}, {"configurable": {"thread_id": "t1"}}, context=Ctx("alice"))
    second = graph.invoke({"question": "上海呢？"}, {"configurable": {"thread_id": "t2"}}, context=Ctx("alice"))
    other = graph.invoke({"question": "hi"}, {"configurable": {"thread_id": "t3"}}, context=Ctx("bob"))
    assert first["answer"] == "0 earlier" and second["answer"] == "1 earlier" and other["answer"] == "0 earlier"
    assert second["log"] == ["北京天气？"]
    assert [i.key for i in store.search(("qa", "alice"))] == ["q1", "q0"]


async def test_an_async_graph_node_uses_the_same_store_from_another_event_loop(store: RedisStore) -> None:
    graph = compiled(aremember, store)
    await graph.ainvoke({"question": "one"}, {"configurable": {"thread_id": "a1"}}, context=Ctx("carol"))

    def in_a_fresh_loop() -> dict:
        return asyncio.run(graph.ainvoke({"question": "two"}, {"configurable": {"thread_id": "a2"}},
                                         context=Ctx("carol")))

    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(in_a_fresh_loop()))
    worker.start()
    worker.join()
    assert result["answer"] == "1 earlier" and result["log"] == ["one"]
    sync_view = compiled(remember, store).invoke({"question": "three"}, {"configurable": {"thread_id": "a3"}},
                                                 context=Ctx("carol"))
    assert sync_view["log"] == ["two", "one"]
