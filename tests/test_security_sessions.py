"""Sessions under attack and load: any printable session id works (and nothing else gets in), and a session
runs one turn at a time across processes (the session lease), through the real CLI and the Python API."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph.cli.app import main
from reactgraph.graph import (
    Context,
    InvalidSessionId,
    SessionBusy,
    SessionLeaseLost,
    asession_lease,
    build_react_graph,
    build_reflexion_graph,
    session_lease,
)
from reactgraph.graph.sessions import history, plan_run, run
from reactgraph.memory import AsyncRedisSaver, RedisSaver, RedisStore
from reactgraph.memory.session_id import session_of_label, store_label
from reactgraph.nodes.reflexion import lessons_namespace
from reactgraph.nodes.turn_memory import qa_namespace
from support.lease_cli import ask, cli_env, finished, run_to_end, start

RULES = Context(reflection="rules")
Q1, Q2 = "北京的天气怎么样？", "上海的天气怎么样？"

PRINTABLE_IDS = ["alice@example.com", "a.b", "../../etc/passwd", "with space / and slash", "会话·一", "100%",
                 "a%2Eb", "{tag}:x", "emoji 👩‍💻 ok", "é" * 256]  # the longest: 256 characters, 512 bytes
REFUSED_IDS = {"empty": "", "blank": "   ", "NUL": "a\x00b", "newline": "a\nb", "escape": "a\x1b[31mred",
               "DEL": "a\x7fb", "C1": "a\x85b", "bidi override": "\u202eevil", "line separator": "a\u2028b",
               "too long": "x" * 257}


def wait_for(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"still not true after {timeout:g} s")
        time.sleep(0.02)


@pytest.fixture
def client(redis_url: str):
    with redis.Redis.from_url(redis_url) as opened:
        yield opened


@pytest.fixture
def store(redis_url: str, redis_prefix: str):
    opened = RedisStore.from_url(redis_url, prefix=redis_prefix + "store")
    yield opened
    opened.close()


def humans(saver, session: str) -> list[str]:
    """The session's questions, in order, as its latest checkpoint holds them."""
    saved = saver.get_tuple({"configurable": {"thread_id": session}})
    return [m.content for m in (saved.checkpoint["channel_values"]["messages"] if saved else []) if m.type == "human"]


def turn(graph, session: str, question: str, **options) -> dict:
    return run(graph, plan_run(graph, question, session), RULES, **options)


# --- any printable session id ----------------------------------------------------------------------------

@pytest.mark.parametrize("session", PRINTABLE_IDS, ids=lambda s: s[:24])
def test_any_printable_session_id_keeps_its_conversation_log_and_history(saver, store, session):
    graph = build_react_graph(checkpointer=saver, store=store)
    for question in ("计算 2 + 3 等于多少", "计算 10 * 7 等于多少"):
        assert turn(graph, session, question)["status"] == "answered"
    assert humans(saver, session) == ["计算 2 + 3 等于多少", "计算 10 * 7 等于多少"]
    log = sorted(item.value["question"] for item in store.search(qa_namespace(session), limit=10))
    assert log == ["计算 10 * 7 等于多少", "计算 2 + 3 等于多少"]
    assert next(history(graph, session, limit=1))["node"] == "save_memory"  # the turn ran to its end
    listed = {saved.config["configurable"]["thread_id"] for saved in saver.list(None)}
    assert listed == {session}  # the checkpoint keys give the id back whole


def test_ids_that_differ_only_in_encoding_stay_apart_and_plain_ids_keep_their_namespaces(saver, store):
    graph = build_react_graph(checkpointer=saver, store=store)
    turn(graph, "a.b", "计算 1 + 1 等于多少")
    turn(graph, "a%2Eb", "计算 2 + 2 等于多少")
    assert [i.value["question"] for i in store.search(qa_namespace("a.b"))] == ["计算 1 + 1 等于多少"]
    assert [i.value["question"] for i in store.search(qa_namespace("a%2Eb"))] == ["计算 2 + 2 等于多少"]
    # Sessions created before the encoding (no "." or "%") are where they always were.
    assert qa_namespace("alice") == ("sessions", "alice", "qa") and lessons_namespace("bob-1") == ("lessons", "bob-1")
    for session in PRINTABLE_IDS:
        assert session_of_label(store_label(session)) == session and "." not in store_label(session)


def test_reflexion_lessons_of_an_email_session_are_written_and_read_back(store):
    session = "carol.smith@example.com"
    graph = build_reflexion_graph(store=store, checkpointer=InMemorySaver(), max_trials=2)
    result = graph.invoke({"messages": [("human", "计算 (15 + 27) * 3 等于多少")], "expected": "999"},
                          config={"configurable": {"thread_id": session}}, context=Context())
    assert result["trial"] == 2 and len(store.search(lessons_namespace(session))) == 2
    assert len(result["lessons"]) == 1  # trial 2 read trial 1's lesson back from the store


@pytest.mark.parametrize("session", list(REFUSED_IDS.values()), ids=list(REFUSED_IDS))
def test_a_refused_session_id_is_one_line_and_exit_2_before_anything_is_written(session, tmp_path, capsys):
    database = tmp_path / "never" / "sessions.db"
    code = main(["ask", "计算 2 + 3", "--session", session, "--store", f"sqlite:///{database}", "--json"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("error: invalid session id") and "1-256 printable characters" in line
    assert not database.parent.exists()  # the store was never opened
    # The Python entry points refuse it with the same words, as a ValueError.
    graph = build_react_graph(checkpointer=InMemorySaver())
    with pytest.raises(InvalidSessionId) as refused:
        plan_run(graph, "计算 2 + 3", session)
    assert isinstance(refused.value, ValueError) and line == f"error: {refused.value}"
    with pytest.raises(InvalidSessionId), session_lease(graph, session):
        pass
    assert graph.get_state({"configurable": {"thread_id": session}}).values == {}


# --- the session lease, from Python ------------------------------------------------------------------------

def other_thread(function, *args, **kwargs):
    """Run `function` on another thread (a lease held here is shared by nested calls on this one)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(function, *args, **kwargs).result(timeout=60)


def try_lease(target, session: str, **options) -> str:
    try:
        with session_lease(target, session, **options):
            return "acquired"
    except SessionBusy as busy:
        return str(busy)


def test_a_busy_session_refuses_or_waits_and_a_nested_lease_shares_the_outer_one(saver):
    with session_lease(saver, "dana.b@example.com") as lease:
        with session_lease(saver, "dana.b@example.com") as nested:
            assert nested is lease and lease.scope == "redis"
        refused = other_thread(try_lease, saver, "dana.b@example.com", wait_s=0)
        assert refused.startswith("session 'dana.b@example.com' is busy with another turn (since ")
        assert f"pid {os.getpid()} on " in refused and refused.endswith("not waiting: try again when it has finished")
        assert other_thread(try_lease, saver, "another session", wait_s=0) == "acquired"
    assert other_thread(try_lease, saver, "dana.b@example.com", wait_s=0) == "acquired"  # released on exit


def test_renewal_keeps_a_long_turns_lease_and_only_the_owner_releases_it(saver, client):
    # A 2 s lease renewed every 0.67 s: a renewal may come 1.3 s late on a loaded machine and still hold it (at
    # 0.3 s, one late beat of 0.2 s on a busy CI machine lost the lease; a 1 s one lost a renewal at load 10).
    with session_lease(saver, "long.turn", ttl_s=2) as lease:
        key = f"{saver.prefix}{{long.turn}}:lease"
        time.sleep(4.5)  # two expiries and more: only the heartbeat's renewals keep it
        assert "busy with another turn" in other_thread(try_lease, saver, "long.turn", wait_s=0)
        assert 0 < client.pttl(key) <= 2000 and not lease.lost
        client.set(key, b"somebody else's token")  # as if it had expired and another turn had taken it
        wait_for(lambda: lease.lost, timeout=10)
        with pytest.raises(SessionLeaseLost, match="another turn may have started"):
            lease.check()
    assert client.get(key) == b"somebody else's token"  # leaving did not delete another owner's lease


def test_a_lease_read_from_redis_is_bounded_and_shown_on_one_line(saver, client):
    client.set(f"{saver.prefix}{{garbage}}:lease", b"t\x00oops\x00" + b"\x1b[2J\n" * 5000, px=60_000)
    message = try_lease(saver, "garbage", wait_s=0)
    assert "\n" not in message and "\x1b" not in message and len(message) < 300
    assert "busy with another turn (since an unknown time)" in message


def second_turn_waits_for_the_holder(graph, session: str) -> tuple[list, list[str]]:
    """Hold the session while `run` starts a turn on another thread: it must wait (and say so) until we leave."""
    told: list = []
    with ThreadPoolExecutor(1) as pool:
        with session_lease(graph, session):
            plan = plan_run(graph, "计算 3 + 4 等于多少", session)
            waiting = pool.submit(run, graph, plan, RULES, wait_s=60, on_wait=lambda *notice: told.append(notice))
            wait_for(lambda: told, timeout=30)
            before = humans(graph.checkpointer, session)  # still waiting: it has not started its turn
        assert waiting.result(timeout=60)["status"] == "answered"
    return told, before


def test_run_takes_the_lease_and_waits_for_the_turn_before_it(saver, store):
    graph = build_react_graph(checkpointer=saver, store=store)
    with session_lease(graph, "eve.w"), pytest.raises(SessionBusy):
        other_thread(run, graph, plan_run(graph, "计算 3 + 4 等于多少", "eve.w"), RULES, wait_s=0)
    told, before = second_turn_waits_for_the_holder(graph, "eve.w")
    assert before == [] and humans(saver, "eve.w") == ["计算 3 + 4 等于多少"]
    (session, holder, wait_s), = told
    assert session == "eve.w" and wait_s == 60 and holder.owner.startswith(f"pid {os.getpid()} on ")


def test_without_redis_one_turn_at_a_time_holds_within_the_process():
    graph = build_react_graph(checkpointer=InMemorySaver())
    with session_lease(graph, "frank") as lease:
        assert lease.scope == "process"
    told, before = second_turn_waits_for_the_holder(graph, "frank")
    assert before == [] and humans(graph.checkpointer, "frank") == ["计算 3 + 4 等于多少"]
    assert "of this process" in told[0][1].owner


# --- the session lease, from asyncio code ------------------------------------------------------------------

@pytest.fixture(params=["AsyncRedisSaver", "RedisSaver", "URL", "in-process"])
async def lease_target(request, redis_url: str, redis_prefix: str):
    """(a graph, what its turns take the lease on, what a sync `session_lease` takes for the same sessions):
    every kind of target asession_lease accepts."""
    if request.param == "in-process":
        graph = build_react_graph(checkpointer=InMemorySaver())
        yield graph, graph, graph
        return
    with RedisSaver.from_url(redis_url, prefix=redis_prefix) as opened:
        if request.param == "AsyncRedisSaver":
            async with AsyncRedisSaver.from_url(redis_url, prefix=redis_prefix) as aio:
                yield build_react_graph(checkpointer=aio), aio, opened
        else:
            graph = build_react_graph(checkpointer=opened)
            yield graph, (redis_url if request.param == "URL" else graph), (redis_url if request.param == "URL"
                                                                            else opened)


async def aturn(graph, target, session: str, question: str, **options) -> dict:
    async with asession_lease(target, session, **options):
        return await graph.ainvoke({"messages": [HumanMessage(question)]}, {"configurable": {"thread_id": session}},
                                   context=RULES)


async def atry_lease(target, session: str, **options) -> str:
    try:
        async with asession_lease(target, session, **options):
            return "acquired"
    except SessionBusy as busy:
        return str(busy)


async def test_two_concurrent_ainvoke_turns_on_one_session_both_keep_their_turn_in_order(lease_target):
    graph, target, _ = lease_target
    session, told, holding, go_on = f"async.{uuid.uuid4().hex[:8]}@example.com", [], asyncio.Event(), asyncio.Event()

    async def first() -> dict:
        async with asession_lease(target, session):
            holding.set()
            await asyncio.wait_for(go_on.wait(), 30)  # holds the session until the second turn waits for it
            return await graph.ainvoke({"messages": [HumanMessage(Q1)]}, {"configurable": {"thread_id": session}},
                                       context=RULES)

    def waiting(*notice) -> None:
        told.append(notice)
        go_on.set()  # runs on the same event loop: the second turn's wait does not block it

    holder = asyncio.create_task(first())
    await asyncio.wait_for(holding.wait(), 30)  # the first turn takes the session before the second asks
    results = await asyncio.wait_for(asyncio.gather(holder, aturn(graph, target, session, Q2, on_wait=waiting)), 60)
    assert [r["final_answer"] is not None for r in results] == [True, True]
    state = await graph.aget_state({"configurable": {"thread_id": session}})
    assert [m.content for m in state.values["messages"] if m.type == "human"] == [Q1, Q2]  # both, in order
    (waited_on, holder_seen, wait_s), = told
    assert waited_on == session and wait_s == 300 and holder_seen is not None


async def test_an_async_lease_refuses_a_busy_session_and_a_nested_one_in_the_same_task_shares_it(lease_target):
    _, target, sync_target = lease_target
    session = f"busy.{uuid.uuid4().hex[:8]}"
    async with asession_lease(target, session) as lease:
        async with asession_lease(target, session) as nested:
            assert nested is lease
        refused = await asyncio.create_task(atry_lease(target, session, wait_s=0))  # another task: another turn
        assert refused.startswith(f"session {session!r} is busy with another turn (since ")
        assert refused.endswith("not waiting: try again when it has finished")
        held_off = await asyncio.to_thread(try_lease, sync_target, session, wait_s=0)  # a sync turn too
        assert held_off.startswith(f"session {session!r} is busy with another turn (since ")
        assert (f"pid {os.getpid()} on " if lease.scope == "redis" else "of this process") in refused
        assert await atry_lease(target, "another session", wait_s=0) == "acquired"
    assert await atry_lease(target, session, wait_s=0) == "acquired"  # released on exit


async def test_an_async_lease_is_renewed_past_two_expiries_and_only_its_owner_releases_it(redis_url, redis_prefix,
                                                                                        client):
    async with AsyncRedisSaver.from_url(redis_url, prefix=redis_prefix) as aio:
        async with asession_lease(aio, "long.async.turn", ttl_s=2) as lease:  # as above
            key = f"{aio.prefix}{{long.async.turn}}:lease"
            await asyncio.sleep(4.5)  # two expiries and more: only the renewals keep it
            assert "busy with another turn" in await asyncio.create_task(atry_lease(aio, "long.async.turn", wait_s=0))
            assert 0 < client.pttl(key) <= 2000 and not lease.lost
            client.set(key, b"somebody else's token")  # as if it had expired and another turn had taken it
            for _ in range(500):
                if lease.lost:
                    break
                await asyncio.sleep(0.02)
            with pytest.raises(SessionLeaseLost, match="another turn may have started"):
                lease.check()
        assert client.get(key) == b"somebody else's token"  # leaving did not delete another owner's lease


def test_the_sync_lease_refuses_an_asyncio_client_and_points_to_asession_lease(redis_url, redis_prefix):
    saver = AsyncRedisSaver(redis.asyncio.Redis.from_url(redis_url), prefix=redis_prefix)
    with pytest.raises(TypeError, match=r"use `async with asession_lease\(\.\.\.\)`, or pass the Redis URL"), \
            session_lease(build_react_graph(checkpointer=saver), "s1"):
        pass


# --- the session lease, through the CLI --------------------------------------------------------------------

@pytest.fixture
def cli_session(redis_url: str):
    """A session of the CLI's (default prefix, the shared database): its checkpoints, lease and log go after."""
    session = f"lease.{uuid.uuid4().hex[:8]}@example.com"
    yield session
    with RedisSaver.from_url(redis_url) as saver:
        saver.delete_thread(session)
        saver.client.delete(f"reactgraph:{{{session}}}:lease")
    log = RedisStore.from_url(redis_url)
    for item in log.search(qa_namespace(session), limit=100):
        log.delete(item.namespace, item.key)
    log.close()


def test_two_concurrent_asks_on_one_session_both_keep_their_turn_in_order(redis_url, cli_session, tmp_path):
    gate, log = tmp_path / "gate", tmp_path / "calls.log"
    env = cli_env(redis_url, log, LEASE_GATE=str(gate))
    first = start(ask(Q1, cli_session), env, tmp_path / "first.err")
    wait_for(lambda: log.exists() and "start 北京" in log.read_text())  # mid-turn, holding the session
    second = start(ask(Q2, cli_session), env, tmp_path / "second.err")
    wait_for(lambda: "busy" in (tmp_path / "second.err").read_text())
    notice = (tmp_path / "second.err").read_text().strip()
    assert notice.startswith(f"session {cli_session!r} is busy with another turn (since ")
    assert f"pid {first.pid} on " in notice and notice.endswith("waiting up to 300 s…")
    assert "上海" not in log.read_text()  # the second turn has not begun
    gate.touch()
    assert [finished(first)["status"], finished(second)["status"]] == ["answered", "answered"]
    with RedisSaver.from_url(redis_url) as saver:
        assert humans(saver, cli_session) == [Q1, Q2]  # both turns, in order: no fork
    logged = RedisStore.from_url(redis_url)
    assert sorted(i.value["question"] for i in logged.search(qa_namespace(cli_session))) == sorted([Q1, Q2])
    logged.close()


def test_no_wait_refuses_a_busy_session_with_one_line_while_renewals_keep_the_first_turn(redis_url, cli_session,
                                                                                        tmp_path):
    gate, log = tmp_path / "gate", tmp_path / "calls.log"
    first = start(ask(Q1, cli_session), cli_env(redis_url, log, LEASE_GATE=str(gate),
                                                REACTGRAPH_SESSION_LEASE_TTL="3"), tmp_path / "first.err")
    wait_for(lambda: log.exists() and "start 北京" in log.read_text())
    # past two expiries of the first turn's lease: it is held by renewals alone (a 1 s lease lost a renewal at
    # load 10 beside the whole suite; 3 s leaves renewals (every third of it) room on a loaded machine)
    time.sleep(6.5)
    env = cli_env(redis_url, log)
    for options, reason in ((("--no-wait",), "not waiting"), (("--wait", "0.5"), "still busy after waiting 0.5 s")):
        refused = run_to_end(ask(Q2, cli_session, *options), env)
        assert refused.returncode == 75 and refused.stdout == ""
        line = refused.stderr.strip().splitlines()[-1]
        assert line.startswith(f"error: session {cli_session!r} is busy with another turn (since ")
        assert f"; {reason}: try again when it has finished" in line
    gate.touch()
    assert finished(first)["status"] == "answered"
    with RedisSaver.from_url(redis_url) as saver:
        assert humans(saver, cli_session) == [Q1]  # the refused asks left no trace


def test_a_lease_held_on_another_machine_is_waited_out_until_it_expires(redis_url, client, cli_session, tmp_path):
    """A holder this machine cannot see (another host's pid) is never taken for dead: its lease is waited out."""
    key = f"reactgraph:{{{cli_session}}}:lease"
    # 8 s: long enough for the first CLI to find it held (starting one took over 2 s at load 12)
    client.set(key, f"{'0' * 32}\0{int(time.time() * 1000)}\0pid 4242 on some-other-host", px=8000)
    after = run_to_end(ask(Q1, cli_session, "--no-wait"), cli_env(redis_url, tmp_path / "calls.log"))
    assert after.returncode == 75 and "pid 4242 on some-other-host" in after.stderr  # busy while it holds
    after = run_to_end(ask(Q1, cli_session), cli_env(redis_url, tmp_path / "calls.log"))
    assert after.returncode == 0, after.stderr  # waited until it expired
    assert json.loads(after.stdout)["status"] == "answered"


def test_a_lease_whose_holder_died_on_this_machine_is_taken_over_at_once(redis_url, client, cli_session, tmp_path):
    """Its holder's process is gone (SIGKILL mid-turn): the next ask on this machine does not wait out the lease
    (10 minutes here) — `--no-wait` proceeds, logs that it took over from that pid, and resumes the turn."""
    log = tmp_path / "calls.log"
    holder = start(ask(Q1, cli_session), cli_env(redis_url, log, LEASE_GATE=str(tmp_path / "never"),
                                                 REACTGRAPH_SESSION_LEASE_TTL="600"), tmp_path / "holder.err")
    wait_for(lambda: log.exists() and "start 北京" in log.read_text())
    holder.send_signal(signal.SIGKILL)
    holder.communicate(timeout=30)
    assert client.pttl(f"reactgraph:{{{cli_session}}}:lease") > 500_000  # the dead process still holds it
    after = run_to_end(ask(Q1, cli_session, "--no-wait"), cli_env(redis_url, log, REACTGRAPH_LOG_FORMAT="text"))
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout)["status"] == "answered" and json.loads(after.stdout)["resumed"] is True
    assert f"pid {holder.pid} on " in after.stderr and "no longer runs; taking it over" in after.stderr


async def test_an_asyncio_lease_outlives_an_event_loop_blocked_past_its_expiry(redis_url):
    """The renewals run on a thread of their own: a blocked loop (a CPU-bound or blocking tool) keeps the lease."""
    session = f"blocked-{uuid.uuid4().hex[:8]}"
    saver = AsyncRedisSaver.from_url(redis_url)
    try:
        # 2 s, renewed every 0.67 s: room for a renewal 1.3 s late on a loaded machine (0.6 s left 0.4 s)
        async with asession_lease(saver, session, ttl_s=2) as lease:
            time.sleep(4.5)  # noqa: ASYNC251 - the event loop held past two expiries
            assert not lease.lost
            with pytest.raises(SessionBusy):  # from another task (in this one, a nested lease shares it)
                await asyncio.create_task(_take_at_once(redis_url, session))
        async with asession_lease(redis_url, session, wait_s=0):
            pass  # released: free again
    finally:
        await saver.aclose()


async def _take_at_once(target, session: str) -> None:
    async with asession_lease(target, session, wait_s=0):
        pass
