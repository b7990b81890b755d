"""Retention under load: sessions expire (`--ttl`, `REACTGRAPH_TTL`), reads keep a session alive, and
`reactgraph prune` keeps the newest N checkpoints of a session or drops idle sessions whole, on a real Redis."""

from __future__ import annotations

import copy
import json
import time
import uuid
from typing import Annotated, TypedDict

import pytest
import redis
from langchain_core.messages import HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base.id import uuid6
from langgraph.graph import END, START, StateGraph

from reactgraph.cli.app import main
from reactgraph.graph import Context, build_react_graph
from reactgraph.memory import AsyncRedisSaver, RedisSaver, RedisStore
from reactgraph.memory.retention import parse_duration

HOUR_MS = 3_600_000
STORE = "reactgraph:store:"  # the CLI's store prefix; its checkpoints live under "reactgraph:"


@pytest.fixture
def cli(redis_url, monkeypatch, capsys):
    """`reactgraph ARGS` in this process against the test Redis; returns (exit code, stdout, stderr)."""
    monkeypatch.setenv("REDIS_URL", redis_url)
    for name in ("REACTGRAPH_TTL", "REACTGRAPH_MODEL", "REACTGRAPH_TOOLS"):
        monkeypatch.delenv(name, raising=False)

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(args))
        return (code, *capsys.readouterr())

    return run


@pytest.fixture
def sessions(raw):
    """Fresh session ids (the CLI's key prefix is shared with other tests); their keys go afterwards."""
    made: list[str] = []

    def new(name: str = "ret") -> str:
        made.append(f"{name}-{uuid.uuid4().hex[:10]}")
        return made[-1]

    yield new
    for session in made:
        keys = session_keys(raw, session) + store_keys(raw, session)
        if keys:
            raw.delete(*keys)


def session_keys(raw: redis.Redis, session: str) -> list[bytes]:
    return list(raw.scan_iter(match=f"reactgraph:{{{session}}}:*", count=1000))


def store_keys(raw: redis.Redis, session: str) -> list[bytes]:
    return [k for pattern in (f"{STORE}[iu]:sessions.{session}.*", f"{STORE}[iu]:lessons.{session}*")
            for k in raw.scan_iter(match=pattern, count=1000)]


def ask(cli, session: str, question: str, *options: str) -> dict:  # the answer, as `ask --json` prints it
    code, out, err = cli("ask", question, "--session", session, "--json", *options)
    assert code == 0, err
    return json.loads(out)


def history(cli, session: str) -> list[dict]:
    code, out, err = cli("history", "--session", session, "--limit", "1000", "--json")
    assert code == 0, err
    return json.loads(out)


# --- TTLs ----------------------------------------------------------------------------------------------


def test_a_ttl_reaches_every_key_of_a_session_and_every_store_item(cli, raw, sessions):
    session = sessions()
    ask(cli, session, "计算 2+3", "--ttl", "1h")
    ask(cli, session, "北京天气怎么样？", "--ttl", "1h")
    keys, items = session_keys(raw, session), store_keys(raw, session)
    kinds = {k.decode().split("}:", 1)[1] for k in keys}
    assert {"c:", "cp:", "v:", "b:", "w:", "wi:"} <= kinds
    assert sum(b"\0" in k for k in items) == 2 and any(b":u:" in k for k in items)  # two Q&A items, their index
    ttls = {k: raw.pttl(k) for k in keys + items}
    assert all(0 < t <= HOUR_MS for t in ttls.values()), ttls


def test_reactgraph_ttl_is_the_default_and_no_ttl_means_no_expiry(cli, raw, sessions, monkeypatch):
    kept, expiring = sessions(), sessions()
    ask(cli, kept, "计算 1+1")
    monkeypatch.setenv("REACTGRAPH_TTL", "30m")
    ask(cli, expiring, "计算 1+1")
    assert {raw.pttl(k) for k in session_keys(raw, kept) + store_keys(raw, kept)} == {-1}
    assert all(0 < raw.pttl(k) <= HOUR_MS / 2 for k in session_keys(raw, expiring) + store_keys(raw, expiring))


def test_reading_a_session_restarts_its_ttl(cli, raw, sessions):
    session = sessions()
    ask(cli, session, "计算 2+3", "--ttl", "1h")
    for key in session_keys(raw, session) + store_keys(raw, session):
        raw.pexpire(key, 60_000)  # as if the session had been idle for 59 minutes
    assert cli("history", "--session", session, "--ttl", "1h", "--json")[0] == 0
    assert all(raw.pttl(k) > 60_000 for k in session_keys(raw, session))  # the checkpoints were read
    assert all(raw.pttl(k) <= 60_000 for k in store_keys(raw, session))  # history does not read the Q&A log
    ask(cli, session, "计算 3+4", "--ttl", "1h")
    assert all(raw.pttl(k) > 60_000 for k in session_keys(raw, session) + store_keys(raw, session))


def test_get_state_restarts_the_ttl_of_a_thread(redis_url, redis_prefix, raw):
    config = {"configurable": {"thread_id": "reader"}}
    with RedisSaver.from_url(redis_url, prefix=redis_prefix, ttl=3600) as saver:
        graph = build_react_graph(checkpointer=saver)
        graph.invoke({"messages": [HumanMessage("计算 6*7")]}, config=config, context=Context())
        keys = list(raw.scan_iter(match=f"{redis_prefix}*"))
        for key in keys:
            raw.pexpire(key, 60_000)
        assert graph.get_state(config).values["final_answer"]
    assert keys and all(60_000 < raw.pttl(k) <= HOUR_MS for k in keys)


def test_a_store_namespace_index_lives_as_long_as_its_longest_lived_item(redis_url, redis_prefix, raw):
    with RedisStore.from_url(redis_url, prefix=redis_prefix + "store") as store:
        index = store.prefix + "u:sessions.s1.qa"
        store.put(("sessions", "s1", "qa"), "a", {"q": 1}, ttl=1)  # minutes
        assert 0 < raw.pttl(index) <= 60_000
        store.put(("sessions", "s1", "qa"), "b", {"q": 2}, ttl=10)
        assert 60_000 < raw.pttl(index) <= 600_000
        store.put(("sessions", "s1", "qa"), "c", {"q": 3}, ttl=None)
        assert raw.pttl(index) == -1
        with RedisStore.from_url(redis_url, prefix=redis_prefix + "dflt", ttl={"default_ttl": 5}) as by_default:
            by_default.put(("lessons", "s1"), "k", {"lesson": "x"})
            assert 0 < raw.pttl(by_default.prefix + "i:lessons.s1\0k") <= 300_000


# --- prune --keep ----------------------------------------------------------------------------------------


def test_prune_keep_n_leaves_a_session_that_goes_on(cli, sessions):
    session = sessions()
    ask(cli, session, "我叫小明，我最喜欢的城市是杭州。")
    for question in ("计算 2+3", "北京天气怎么样？", "计算 (15 + 27) * 3"):
        ask(cli, session, question)
    before = len(history(cli, session))
    code, out, err = cli("prune", "--keep", "3", "--session", session, "--dry-run", "--json")
    assert code == 0, err
    assert json.loads(out)["removed"]["checkpoints"] == before - 3 and len(history(cli, session)) == before
    code, out, err = cli("prune", "--keep", "3", "--session", session, "--json")
    report = json.loads(out)
    assert code == 0 and report["removed"]["checkpoints"] == before - 3 and report["removed"]["bytes"] > 0
    assert len(history(cli, session)) == 3
    answer = ask(cli, session, "我最喜欢的城市是哪个？")
    assert answer["status"] == "answered" and "杭州" in answer["answer"]
    assert len(history(cli, session)) > 3


def append_log(log: list | None, writes: list) -> list:
    return [*(log or []), *(x for w in writes for x in (w if isinstance(w, list) else [w]))]


class LogState(TypedDict, total=False):
    """A DeltaChannel log: a stored snapshot every 4th update, only writes in between."""

    log: Annotated[list, DeltaChannel(append_log, snapshot_frequency=4)]
    n: int


@pytest.mark.parametrize("given_channels", [False, True], ids=["saver-alone", "with-graph-channels"])
def test_prune_keep_n_keeps_every_kept_checkpoint_rebuildable(redis_url, redis_prefix, given_channels):
    """Alone, the saver keeps the ancestors a kept checkpoint's DeltaChannel is rebuilt from; given the graph's
    channels, it stores the oldest kept one's values whole and keeps exactly N."""
    graph = StateGraph(LogState)
    graph.add_node("step", lambda s: {"log": [f"e{s.get('n', 0)}"], "n": s.get("n", 0) + 1})
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", lambda s: "step" if s["n"] < 10 else END)
    config = {"configurable": {"thread_id": "delta"}}
    with RedisSaver.from_url(redis_url, prefix=redis_prefix) as saver:
        app = graph.compile(checkpointer=saver)
        app.invoke({"log": ["start"]}, config)
        newest = [s.config for s in app.get_state_history(config, limit=3)]
        before = [app.get_state(c).values for c in newest]
        saver.prune(["delta"], keep=3, channels=app.channels if given_channels else None)
        after = [app.get_state(c).values for c in newest]
        left = len(list(saver.list(config)))
        app.invoke(None, config)  # the thread goes on from what is left
    assert after == before and before[0]["log"] == ["start", *(f"e{i}" for i in range(10))]
    assert left == 3 if given_channels else 3 < left < 12  # alone: the snapshot ancestors survive, the rest go


async def test_the_async_saver_prunes_to_n_and_reports_usage_too(redis_url, redis_prefix):
    config = {"configurable": {"thread_id": "async"}}
    async with AsyncRedisSaver.from_url(redis_url, prefix=redis_prefix) as saver:
        graph = build_react_graph(checkpointer=saver)
        for question in ("计算 2+3", "计算 4+5"):
            await graph.ainvoke({"messages": [HumanMessage(question)]}, config=config, context=Context())
        [before] = await saver.ausage(["async"])
        await saver.aprune(["async"], keep=2)
        [after] = await saver.ausage(["async"])
        state = await graph.aget_state(config)
    assert before.checkpoints > 2 == after.checkpoints and after.bytes < before.bytes
    assert state.values["final_answer"] and sum(m.type == "human" for m in state.values["messages"]) == 2


# --- prune --idle-for ------------------------------------------------------------------------------------


def contents(raw: redis.Redis, keys: list[bytes]) -> dict[bytes, object]:
    """What the keys hold (DUMP is no good: a hash's layout may change while its contents do not)."""
    read = {b"hash": raw.hgetall, b"zset": lambda k: raw.zrange(k, 0, -1, withscores=True),
            b"set": raw.smembers, b"string": raw.get}
    return {key: read[raw.type(key)](key) for key in keys}


def make_idle(redis_url: str, session: str) -> None:
    """The session's newest checkpoint says it was written in 1990 (the saver's public put, nothing faked)."""
    with RedisSaver.from_url(redis_url) as saver:
        latest = saver.get_tuple({"configurable": {"thread_id": session}})
        old = copy.deepcopy(latest.checkpoint)
        old.update(id=str(uuid6()), ts="1990-01-01T00:00:00+00:00")
        saver.put(latest.config, old, latest.metadata, {})
    with RedisStore.from_url(redis_url) as store:
        store.put(("lessons", session), "t1:1", {"lesson": "check the units"})


def test_prune_idle_for_drops_a_session_whole_and_nothing_of_the_others(cli, raw, sessions, redis_url):
    idle, active = sessions("idle"), sessions("active")
    for session in (idle, active):
        ask(cli, session, "计算 2+3")
        ask(cli, session, "上海天气怎么样？")
    make_idle(redis_url, idle)
    active_keys = contents(raw, session_keys(raw, active) + store_keys(raw, active))
    idle_checkpoints = len(history(cli, idle))

    code, out, err = cli("prune", "--idle-for", "3650d", "--dry-run")
    assert code == 0, err
    assert f"would drop {idle}: {idle_checkpoints} checkpoints, 3 store items" in out and active not in out
    assert session_keys(raw, idle)

    code, out, err = cli("prune", "--idle-for", "3650d", "--json")  # no --keep: other tests' sessions are live
    assert code == 0, err
    dropped = [r for r in json.loads(out)["sessions"] if r["session"] == idle]
    assert dropped == [{"session": idle, "action": "drop", "checkpoints": idle_checkpoints, "store_items": 3,
                        "bytes": dropped[0]["bytes"], "idle_s": dropped[0]["idle_s"]}]
    assert dropped[0]["bytes"] > 10_000 and dropped[0]["idle_s"] > 3650 * 86400
    assert session_keys(raw, idle) == [] and store_keys(raw, idle) == []
    assert contents(raw, session_keys(raw, active) + store_keys(raw, active)) == active_keys
    assert ask(cli, active, "计算 4+4")["status"] == "answered"


def test_prune_idle_for_drops_store_items_whose_session_has_no_checkpoints_left(cli, raw, sessions, redis_url):
    orphan = sessions("orphan")
    with RedisStore.from_url(redis_url) as store:  # the session's checkpoints were deleted (or expired) apart
        store.put(("sessions", orphan, "qa"), "q1", {"question": "计算 1+1", "answer": "2"})
        store.put(("lessons", orphan), "t1:1", {"lesson": "check the units"})
    code, out, err = cli("prune", "--idle-for", "1h", "--session", orphan, "--json")
    assert code == 0 and json.loads(out)["sessions"] == [] and len(store_keys(raw, orphan)) == 4
    time.sleep(1.1)  # idle for more than a second: the one wait this module has, bounded
    code, out, err = cli("prune", "--idle-for", "1s", "--session", orphan, "--json")
    assert code == 0, err
    [dropped] = json.loads(out)["sessions"]
    assert (dropped["action"], dropped["checkpoints"], dropped["store_items"]) == ("drop", 0, 2)
    assert store_keys(raw, orphan) == []


# --- one-line errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "env", "message"), [
    (["ask", "计算 1+1", "--ttl", "7x"], {}, "--ttl / $REACTGRAPH_TTL: bad duration '7x'"),
    (["ask", "计算 1+1"], {"REACTGRAPH_TTL": "soon"}, "--ttl / $REACTGRAPH_TTL: bad duration 'soon'"),
    (["history", "--session", "x", "--ttl", "0"], {}, "bad duration '0'"),
    (["ask", "计算 1+1", "--ttl", "1h", "--store", "sqlite:///{tmp}/s.db"], {}, "a TTL needs a Redis store"),
    (["prune", "--idle-for", "-5m"], {}, "--idle-for: bad duration '-5m'"),
    (["prune", "--idle-for", "1000y"], {}, "--idle-for: bad duration '1000y'"),
    (["prune"], {}, "say what to remove: --keep N, --idle-for DURATION, or both"),
    (["prune", "--keep", "0"], {}, "Invalid value for '--keep'"),
    (["prune", "--keep", "2", "--session", "no-such-session-3f9a"], {}, "no such session in this store"),
    (["prune", "--keep", "2", "--store", "memory"], {}, "prune works on Redis stores"),
    (["prune", "--keep", "2", "--store", "sqlite:///{tmp}/s.db"], {}, "SQLite keeps every session"),
], ids=["ttl", "env", "zero", "sqlite-ttl", "negative", "years", "nothing", "keep-0", "unknown", "memory", "sqlite"])
def test_bad_retention_options_are_one_line_errors(cli, monkeypatch, tmp_path, args, env, message):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code, out, err = cli(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert code != 0 and out == ""
    assert message in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_durations_are_written_as_users_write_them():
    texts = ["3600", "90s", "30m", "12h", "7d", "2w", " 1.5h "]
    assert [parse_duration(t) for t in texts] == [3600, 90, 1800, 43200, 604800, 1209600, 5400]
