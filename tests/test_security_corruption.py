"""A garbled or missing key breaks one checkpoint, never the session: it is reported with its id and a hint,
`history` still lists the others, `ask --from` forks past it, `history --drop` removes it, and a bogus id in
the index never turns into a silent `"answer": null`. A garbled long-term store item is one line naming its key
on `get`, skipped with a warning by `search`, and replaced by a `put`."""

from __future__ import annotations

import json
import logging
import uuid

import pytest
from langchain_core.messages import HumanMessage

from reactgraph.graph import Context, build_react_graph
from reactgraph.memory import AsyncRedisSaver, RedisSaver, UnreadableCheckpoint
from reactgraph.memory.redis_checkpoint.scripts import ORPHAN_CAP

LOGGER = "reactgraph.memory.redis_checkpoint"


def turn(graph, thread: str, question: str = "计算 2+3") -> dict:
    return graph.invoke({"messages": [HumanMessage(question)]}, config={"configurable": {"thread_id": thread}},
                        context=Context())


def keys_of(saver: RedisSaver, thread: str) -> str:
    return f"{saver.prefix}{{{thread}}}:"


def latest_of(saver: RedisSaver, thread: str):
    return saver.get_tuple({"configurable": {"thread_id": thread}})


# How each kind of damage is done to the latest checkpoint, and what the report says about it.
def garble_record(raw, saver, tup):
    raw.hset(keys_of(saver, _thread(tup)) + "cp:", _id(tup), b"\x93\x01garbage without a type")
    return "cp:", "it cannot be decoded"


def garble_versions(raw, saver, tup):
    raw.hset(keys_of(saver, _thread(tup)) + "v:", _id(tup), b"\xff\x00messages")
    return "v:", "it cannot be decoded"


def swap_versions(raw, saver, tup):
    parent = tup.parent_config["configurable"]["checkpoint_id"]
    raw.hset(keys_of(saver, _thread(tup)) + "v:", _id(tup), f"{parent}\0messages\x000000.1")
    return "v:", "does not match its record's channel versions"


def drop_versions(raw, saver, tup):
    raw.hdel(keys_of(saver, _thread(tup)) + "v:", _id(tup))
    return "v:", "its channel list is missing"


def garble_blob(raw, saver, tup):
    raw.hset(keys_of(saver, _thread(tup)) + "b:", _messages_field(tup), b"msgpack\0\xc1\xc1")
    return "b:", "not valid msgpack"


def drop_blob(raw, saver, tup):
    raw.hdel(keys_of(saver, _thread(tup)) + "b:", _messages_field(tup))
    return "b:", "the value of channel 'messages' is missing"


def garble_write(raw, saver, tup):
    saver.put_writes(tup.config, [("messages", HumanMessage("pending"))], task_id="task-1", task_path="~")
    raw.hset(keys_of(saver, _thread(tup)) + "w:", f"{_id(tup)}\0task-1\x000", b"no separators here")
    return "w:", "it cannot be decoded"


def _thread(tup) -> str:
    return tup.config["configurable"]["thread_id"]


def _id(tup) -> str:
    return tup.config["configurable"]["checkpoint_id"]


def _messages_field(tup) -> str:
    return f"messages\0{tup.checkpoint['channel_versions']['messages']}"


DAMAGE = [garble_record, garble_versions, swap_versions, drop_versions, garble_blob, drop_blob, garble_write]


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda d: d.__name__)
def test_a_damaged_checkpoint_is_reported_with_its_id_and_key_and_the_older_ones_stay_usable(
        damage, saver, raw, caplog):
    graph = build_react_graph(checkpointer=saver)
    thread = f"t-{uuid.uuid4().hex[:8]}"
    turn(graph, thread)
    tup = latest_of(saver, thread)
    kind, said = damage(raw, saver, tup)
    where = repr(keys_of(saver, thread) + kind)
    for read in (lambda: saver.get_tuple(tup.config), lambda: graph.get_state(tup.config)):
        with pytest.raises(UnreadableCheckpoint) as caught:
            read()
        message = str(caught.value)
        assert _id(tup) in message and where in message and said in message and "\n" not in message, message
    # As the latest, it is passed over with a warning; everything before it is there and can be forked from.
    config = {"configurable": {"thread_id": thread}}
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        newest_readable = latest_of(saver, thread)
        older = list(saver.list(config))
        forked = graph.invoke({"messages": [HumanMessage("计算 3+4")]}, context=Context(), config={
            "configurable": {"thread_id": thread, "checkpoint_id": _id(older[-1])}})
    assert _id(newest_readable) != _id(tup) and newest_readable.checkpoint["channel_values"]["messages"]
    assert _id(tup) not in [_id(t) for t in older] and _id(older[0]) == _id(newest_readable)
    assert "7" in forked["final_answer"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    # (a blob is shared by the checkpoints that kept that channel version: the one before may be named too)
    assert any(_id(tup) in w for w in warnings) and all(where in w for w in warnings)


def test_an_unreadable_checkpoint_can_be_dropped_and_the_session_goes_on(saver, raw):
    graph = build_react_graph(checkpointer=saver)
    thread = f"t-{uuid.uuid4().hex[:8]}"
    turn(graph, thread)
    tup = latest_of(saver, thread)
    garble_record(raw, saver, tup)
    assert saver.delete_checkpoint(tup.config) is True
    assert saver.delete_checkpoint(tup.config) is False  # gone: nothing to drop the second time
    assert _id(tup) not in saver.checkpoint_ids({"configurable": {"thread_id": thread}})
    result = turn(graph, thread, "计算 3+4")
    assert "7" in result["final_answer"] and len(result["messages"]) > 2  # the first turn is still remembered


async def test_the_async_saver_reports_and_drops_the_same_way(redis_url, redis_prefix, saver, raw):
    graph = build_react_graph(checkpointer=saver)
    thread = f"t-{uuid.uuid4().hex[:8]}"
    turn(graph, thread)
    tup = latest_of(saver, thread)
    drop_blob(raw, saver, tup)
    async with AsyncRedisSaver.from_url(redis_url, prefix=redis_prefix) as aio:
        config = {"configurable": {"thread_id": thread}}
        with pytest.raises(UnreadableCheckpoint, match="the value of channel 'messages' is missing"):
            await aio.aget_tuple(tup.config)
        assert _id(await aio.aget_tuple(config)) != _id(tup)  # as the latest: passed over
        assert (await aio.acheckpoint_ids(config, 1)) == [_id(tup)]
        assert await aio.adelete_checkpoint(tup.config)
        assert (await aio.acheckpoint_ids(config, 1)) != [_id(tup)]


def test_a_bogus_id_in_the_index_is_skipped_with_a_warning_never_an_empty_session(saver, raw, caplog):
    graph = build_react_graph(checkpointer=saver)
    thread = f"t-{uuid.uuid4().hex[:8]}"
    turn(graph, thread)
    raw.zadd(keys_of(saver, thread) + "c:", {"zzzz-not-a-checkpoint": 0})  # sorts above every real id
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        second = turn(graph, thread, "计算 3+4")
        state = graph.get_state({"configurable": {"thread_id": thread}})
    assert "7" in second["final_answer"] and state.values["final_answer"] == second["final_answer"]
    assert any("zzzz-not-a-checkpoint" in r.getMessage() and "no record" in r.getMessage() for r in caplog.records)
    # Asked for by id, it is reported rather than taken for an empty session.
    with pytest.raises(UnreadableCheckpoint, match="the index lists it but it has no record"):
        saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_id": "zzzz-not-a-checkpoint"}})
    assert saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_id": "never-written"}}) is None


def test_an_index_flooded_with_bogus_ids_fails_with_one_line_instead_of_a_null_answer(saver, raw):
    graph = build_react_graph(checkpointer=saver)
    thread = f"t-{uuid.uuid4().hex[:8]}"
    turn(graph, thread)
    raw.zadd(keys_of(saver, thread) + "c:", {f"zzzz-{i:04}": 0 for i in range(ORPHAN_CAP + 5)})
    with pytest.raises(UnreadableCheckpoint, match="no record"):
        graph.get_state({"configurable": {"thread_id": thread}})


# --- the CLI: history lists and marks, ask --from forks past, history --drop removes ----------------------------


def ask_json(cli, session: str, question: str, *extra: str) -> dict:
    code, out, err = cli("ask", question, "--session", session, "--json", *extra)
    assert code == 0, err
    return json.loads(out)


def test_the_cli_lists_marks_forks_past_and_drops_an_unreadable_checkpoint(cli, cli_session, redis_url, raw):
    session = cli_session
    ask_json(cli, session, "计算 2+3")
    with RedisSaver.from_url(redis_url) as saver:
        tup = latest_of(saver, session)
        garble_record(raw, saver, tup)
    bad = _id(tup)

    code, out, err = cli("history", "--session", session, "--json")
    rows = json.loads(out)
    assert code == 0 and rows[0]["checkpoint"] == bad and "cannot be decoded" in rows[0]["unreadable"]
    readable = [row for row in rows if row["unreadable"] is None]
    assert len(readable) == len(rows) - 1 and readable[-1]["node"] == "input"
    code, out, err = cli("history", "--session", session)
    assert code == 0 and bad in out and "UNREADABLE" in out and "--drop" in out

    code, out, err = cli("ask", "计算 3+4", "--session", session, "--json")
    assert code == 2 and out == "" and f"--drop {bad}" in err and "Traceback" not in err

    forked = ask_json(cli, session, "计算 3+4", "--from", readable[0]["checkpoint"])
    assert "7" in forked["answer"]

    code, out, err = cli("history", "--session", session, "--drop", bad)
    assert code == 0 and out.strip() == f"dropped checkpoint {bad} of session {session}"
    assert bad not in [row["checkpoint"] for row in json.loads(cli("history", "--session", session, "--json")[1])]
    assert "11" in ask_json(cli, session, "计算 5+6")["answer"]
    code, _, err = cli("history", "--session", session, "--drop", bad)
    assert code == 2 and f"has no checkpoint {bad!r}" in err


def test_a_bogus_id_in_the_index_never_makes_ask_answer_null(cli, cli_session, raw):
    session = cli_session
    ask_json(cli, session, "计算 2+3")
    raw.zadd(f"reactgraph:{{{session}}}:c:", {"ffffffff-ffff-6fff-bfff-ffffffffffff": 0})
    for question, answer in (("计算 3+4", "7"), ("计算 5+6", "11")):
        payload = ask_json(cli, session, question)
        assert payload["answer"] is not None and answer in payload["answer"] and payload["status"] == "answered"
    rows = json.loads(cli("history", "--session", session, "--json")[1])
    assert rows[0]["checkpoint"].startswith("ffffffff") and "no record" in rows[0]["unreadable"]
    assert cli("history", "--session", session, "--drop", rows[0]["checkpoint"])[0] == 0
    assert not json.loads(cli("history", "--session", session, "--json")[1])[0]["unreadable"]


def test_prune_leaves_a_namespace_whose_latest_checkpoint_is_unreadable_as_it_is(saver, raw, caplog):
    graph = build_react_graph(checkpointer=saver)
    thread = f"t-{uuid.uuid4().hex[:8]}"
    turn(graph, thread)
    tup = latest_of(saver, thread)
    garble_record(raw, saver, tup)
    before = saver.checkpoint_ids({"configurable": {"thread_id": thread}}, 100)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        saver.prune([thread])
    assert saver.checkpoint_ids({"configurable": {"thread_id": thread}}, 100) == before
    assert any("not pruning" in r.getMessage() and _id(tup) in r.getMessage() for r in caplog.records)


# --- the long-term store: a garbled item is one line on get, skipped by search, replaced by put ---------------

STORE_LOGGER = "reactgraph.memory.redis_store"
NS = ("sessions", "s1", "qa")
GARBLED_ITEMS = {  # what is written over an item, and what the report says about it
    "no separators": (b"garbage without separators", "it has no header"),
    "one separator": (b"1700000000000000\0garbage", "it has no header"),
    "empty": (b"", "it is empty, or not a Redis string"),
    "timestamps not numbers": (b"yesterday\0today\0\0{}", "its header's timestamps are not"),
    "TTL not a number": (b"1\x002\0soon\0{}", "could not convert string to float"),
    "TTL not finite": (b"1\x002\0nan\0{}", "its TTL nan is not a positive number of minutes"),
    "TTL negative": (b"1\x002\0-5\0{}", "its TTL -5.0 is not a positive number of minutes"),
    "a Redis hash": ({"field": "value"}, "it is empty, or not a Redis string"),
}


@pytest.fixture
def store(redis_url: str, redis_prefix: str):
    from reactgraph.memory import RedisStore

    with RedisStore.from_url(redis_url, prefix=redis_prefix + "store") as opened:
        yield opened


def garble_item(raw, store, key: str, garbage) -> str:
    name = f"{store.prefix}i:{'.'.join(NS)}\0{key}"
    raw.delete(name)
    if isinstance(garbage, dict):
        raw.hset(name, mapping=garbage)
    else:
        raw.set(name, garbage)
    return name


@pytest.mark.parametrize("garbage, said", list(GARBLED_ITEMS.values()), ids=list(GARBLED_ITEMS))
@pytest.mark.parametrize("ttl", [None, 60], ids=["no TTL", "TTL"])
def test_a_garbled_store_item_is_one_line_on_get_skipped_by_search_and_replaced_by_put(
        garbage, said, ttl, store, raw, caplog):
    from reactgraph.memory.redis_store import UnreadableItem

    store.put(NS, "turn-1", {"question": "q1"}, ttl=ttl)
    store.put(NS, "turn-2", {"question": "q2"}, ttl=ttl)
    name = garble_item(raw, store, "turn-1", garbage)
    for refresh in (True, False):  # a read that restarts the item's TTL parses its header on the server
        with pytest.raises(UnreadableItem) as caught:
            store.get(NS, "turn-1", refresh_ttl=refresh)
        message = str(caught.value)
        assert message.startswith(f"store item {name!r} is unreadable: ") and said in message, message
        assert "\n" not in message and "Lua" not in message and "script" not in message
    with caplog.at_level(logging.WARNING, logger=STORE_LOGGER):
        found = store.search(("sessions",), refresh_ttl=True)
        namespaces = store.list_namespaces(prefix=("sessions",))
    assert [item.key for item in found] == ["turn-2"] and namespaces == [NS]
    warned = [r.getMessage() for r in caplog.records if r.name == STORE_LOGGER]
    assert len(warned) == 1 and repr(name) in warned[0] and said in warned[0]
    store.put(NS, "turn-1", {"question": "q1 again"})  # a put over the garbled item replaces it
    replaced = store.get(NS, "turn-1")
    assert replaced.value == {"question": "q1 again"} and replaced.created_at == replaced.updated_at
    assert [item.key for item in store.search(NS)] == ["turn-1", "turn-2"]


def test_a_garbled_entry_in_the_store_expiry_index_is_dropped_not_fatal(store, raw):
    store.put(NS, "turn-1", {"question": "q1"}, ttl=60)
    raw.zadd(f"{store.prefix}exp", {b"no separator here": 0})  # due at once: the next reader sweeps it
    assert [item.key for item in store.search(NS)] == ["turn-1"]
    assert store.list_namespaces() == [NS]
    assert raw.zscore(f"{store.prefix}exp", b"no separator here") is None


def test_a_store_key_with_nul_and_a_garbled_neighbour_stay_apart_in_search(store, raw, caplog):
    store.put(NS, "a\0b", {"question": "with NUL"})
    store.put(NS, "a", {"question": "plain"})
    garble_item(raw, store, "a", b"1\x002\0\0{}\0b")  # as if it were item "a\0b" with a bogus header
    with caplog.at_level(logging.WARNING, logger=STORE_LOGGER):
        found = store.search(NS)
    assert [(item.key, item.value) for item in found] == [("a\0b", {"question": "with NUL"})]
