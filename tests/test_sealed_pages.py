"""Sessions that stay small: the Redis savers seal their older checkpoints into compressed pages.

The stories: a long session takes a fraction of the bytes the layout before pages took, and reads back
checkpoint for checkpoint the same; a session stored before pages loads, goes on, and is sealed as it goes;
reading a state stays one round trip and a page costs two more, once per `page_size` puts; a fork from a sealed
checkpoint runs on as LangGraph's own in-memory saver runs it; and a damaged page (garbage, a format from a
newer react-graph, a zip bomb, an index pointing outside it) is one line naming its key, spoils only its own
checkpoints, and can be dropped. Conformance, delta channels, prune, copy and runs deletion on pages are in
test_redis_checkpointer.py, test_delta_checkpoints.py and test_redis_cluster.py (their `page_size` cases).
"""

from __future__ import annotations

import base64
import json
import logging
import zlib
from pathlib import Path

import ormsgpack
import pytest
import redis
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from reactgraph.graph import Context, build_react_graph
from reactgraph.memory import RedisSaver, UnreadableCheckpoint
from support.redis_traffic import counting_connection_class
from test_redis_checkpointer import approval_graph, chat_graph, snapshot_summary, thread, write_growing_steps

LOGGER = "reactgraph.memory.redis_checkpoint"
QUESTIONS = ["计算 (3 + 17) * 3 等于多少", "北京的天气怎么样？", "What is the population of 上海?"]


def ask(app, config, turns: int, first: int = 0) -> None:
    for n in range(first, first + turns):
        app.invoke({"messages": [HumanMessage(QUESTIONS[n % len(QUESTIONS)])]}, config, context=Context())


def said(snapshot) -> tuple:
    """What a checkpoint of the ReAct graph holds, message ids aside (each session mints its own)."""
    values = snapshot.values
    return (snapshot.metadata["step"], snapshot.next, [(m.type, m.text) for m in values.get("messages", [])],
            values.get("status"), values.get("final_answer"), len(values.get("steps", [])))


def kinds(raw: redis.Redis, prefix: str, thread_id: str) -> dict[str, int]:
    """The thread's keys by kind (c:, cp:, p:, ...), with how many fields or members each holds."""
    out = {}
    for key in raw.scan_iter(match=f"{prefix}{{{thread_id}}}:*"):
        kind = key.decode().rsplit("}:", 1)[1]
        out[kind] = {b"hash": raw.hlen, b"zset": raw.zcard, b"set": raw.scard}[raw.type(key)](key)
    return out


@pytest.fixture
def raw(redis_url):
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def test_a_long_session_takes_a_fraction_of_the_bytes_and_reads_back_the_same(redis_url, redis_prefix):
    config = thread("long")
    with RedisSaver.from_url(redis_url, prefix=redis_prefix + "old:", page_size=0) as before, \
            RedisSaver.from_url(redis_url, prefix=redis_prefix) as saver:
        apps = {"before": build_react_graph(checkpointer=before), "pages": build_react_graph(checkpointer=saver)}
        for n in range(12):  # the two layouts side by side, turn by turn
            for app in apps.values():
                ask(app, config, 1, n)
        [(old,), (new,)] = before.usage([config["configurable"]["thread_id"]]), saver.usage(
            [config["configurable"]["thread_id"]])
        histories = {name: [said(s) for s in app.get_state_history(config)] for name, app in apps.items()}
        ids = [t.config["configurable"]["checkpoint_id"] for t in saver.list(config)]
        assert saver.checkpoint_ids(config, 500) == ids and saver.checkpoint_ids(config, 7) == ids[:7]
        assert saver.checkpoint_ids(config, 500, oldest_first=True) == ids[::-1]
        assert saver.checkpoint_ids(config, 7, oldest_first=True) == ids[::-1][:7]
        assert [t.config["configurable"]["checkpoint_id"] for t in saver.list(config, limit=40, before={
            "configurable": {"checkpoint_id": ids[50]}})] == ids[51:91]  # a page at a time, as the UI reads
    assert old.checkpoints == new.checkpoints > 100
    assert new.bytes < old.bytes / 4, (new.bytes, old.bytes)
    assert histories["pages"] == histories["before"]


def test_a_session_stored_before_pages_loads_goes_on_and_is_sealed(redis_url, redis_prefix, raw):
    config = thread("stored-before")
    thread_id = config["configurable"]["thread_id"]
    reference = build_react_graph(checkpointer=InMemorySaver())
    ask(reference, config, 5)
    with RedisSaver.from_url(redis_url, prefix=redis_prefix, page_size=0) as before:  # as sessions were stored
        ask(build_react_graph(checkpointer=before), config, 5)
    stored = kinds(raw, redis_prefix, thread_id)
    assert "p:" not in stored and stored["c:"] == 45
    with RedisSaver.from_url(redis_url, prefix=redis_prefix) as saver:
        app = build_react_graph(checkpointer=saver)
        assert said(app.get_state(config)) == said(reference.get_state(config))
        ask(app, config, 1, 5)
        ask(reference, config, 1, 5)
        history = [said(s) for s in app.get_state_history(config)]
    stored = kinds(raw, redis_prefix, thread_id)
    assert stored["pi:"] >= 1 and stored["c:"] < 32  # the old checkpoints went into pages as the session went on
    assert history == [said(s) for s in reference.get_state_history(config)]


BEFORE_PAGES = Path(__file__).parent / "data" / "sessions_before_pages.json"


def plant_sessions_before_pages(raw: redis.Redis, prefix: str) -> dict:
    """The keys of two sessions as react-graph wrote them before pages (tests/data: a chat of 12 turns, each run
    named in the metadata; an approval paused at its interrupt), under `prefix`; returns their recorded histories."""
    recorded = json.loads(BEFORE_PAGES.read_text())
    for key, stored in recorded["keys"].items():
        name, value = prefix.encode() + base64.b64decode(key), stored["value"]
        if stored["type"] == "hash":
            raw.hset(name, mapping={base64.b64decode(f): base64.b64decode(v) for f, v in value.items()})
        elif stored["type"] == "zset":
            raw.zadd(name, {base64.b64decode(m): 0 for m in value})
        else:
            raw.sadd(name, *(base64.b64decode(m) for m in value))
    return recorded["history"]


def summaries(app, config) -> list:
    return json.loads(json.dumps([snapshot_summary(h) for h in app.get_state_history(config)]))


def test_sessions_written_before_pages_read_the_same_go_on_and_get_sealed(redis_url, redis_prefix, raw):
    recorded = plant_sessions_before_pages(raw, redis_prefix)
    chat_config, approval_config = {"configurable": {"thread_id": "chat"}}, {"configurable": {"thread_id": "approval"}}
    with RedisSaver.from_url(redis_url, prefix=redis_prefix) as saver:
        chat, approval = chat_graph().compile(checkpointer=saver), approval_graph().compile(checkpointer=saver)
        assert summaries(chat, chat_config) == recorded["chat"] and len(recorded["chat"]) == 36
        assert summaries(approval, approval_config) == recorded["approval"]
        assert chat.invoke({"messages": ["line 12"]}, chat_config)["turns"] == 13
        assert approval.invoke(Command(resume="yes"), approval_config)["messages"] == ["plan", "draft", "approved:yes"]
        assert summaries(chat, chat_config)[3:] == recorded["chat"]  # three new checkpoints on the old 36
        runs = [t.metadata.get("run_id") for t in saver.list(chat_config)]
        saver.delete_for_runs(["run-3"])  # the runs index, as the old layout wrote it, still finds a run's
        assert runs.count("run-3") == 3 and [t.metadata.get("run_id") for t in saver.list(chat_config)] == [
            run for run in runs if run != "run-3"]
    assert kinds(raw, redis_prefix, "chat")["pi:"] >= 1  # the old checkpoints went into a page


def test_reading_a_state_is_one_round_trip_and_a_page_costs_two_more_per_page_size_puts(redis_url, redis_prefix):
    counting = counting_connection_class()
    with RedisSaver.from_url(redis_url, prefix=redis_prefix, page_size=4, connection_class=counting) as saver:
        warm = thread("warm-up")  # connects, and loads every script (a page sealed too)
        parent = saver.put(warm, generate_checkpoint(), generate_metadata(), {})
        for _ in range(5):
            parent = saver.put(parent, generate_checkpoint(), generate_metadata(), {})
        config = thread()
        first = parent = saver.put(config, generate_checkpoint(), generate_metadata(), {})
        saver.put_writes(parent, [("x", 1)], "first-task")
        saver.get_tuple(config)
        counting.sends = 0
        parent = write_growing_steps(saver, parent, 12)
        writing = counting.sends
        counting.sends = 0
        latest = saver.get_tuple(config)
        oldest = saver.get_tuple(first)
        reading = counting.sends
        assert len(list(saver.list(config))) == 13
    # 12 puts and 12 put_writes; on their own after each put: 2 3 4 5 -> sealed to 1, 2 3 4 5 -> sealed, 2 3 4 5
    # -> sealed: three pages, two round trips each (read what to seal, write the page)
    assert writing == 24 + 3 * 2
    assert reading == 2  # the latest, then the oldest (in a page): one round trip each
    assert latest.checkpoint["channel_values"]["step"] == 11 and len(latest.pending_writes) == 2
    assert oldest.checkpoint["id"] == first["configurable"]["checkpoint_id"]
    assert oldest.pending_writes == [("first-task", "x", 1)]


def test_a_graph_reads_its_state_in_one_round_trip_when_its_past_is_sealed(redis_url, redis_prefix):
    counting = counting_connection_class()
    config = thread()
    with RedisSaver.from_url(redis_url, prefix=redis_prefix, connection_class=counting) as saver:
        app = build_react_graph(checkpointer=saver)
        ask(app, config, 5)  # 45 checkpoints: a page sealed
        reads = []
        for _ in range(3):
            before = counting.sends
            app.get_state(config)
            reads.append(counting.sends - before)
    assert reads == [1, 1, 1]


def _chat_story(app, config) -> tuple:
    for line in ("one", "two", "three"):
        app.invoke({"messages": [line]}, config)
    mid_turn = [h for h in app.get_state_history(config) if h.next and h.metadata["step"] >= 1][-1]
    return app.invoke(None, mid_turn.config), app.invoke({"messages": ["four"]}, config), mid_turn.config


def _approval_story(app, config) -> tuple:
    for line in ("plan", "plan again"):
        app.invoke({"messages": [line]}, config)
        app.invoke(Command(resume="yes"), config)
    paused = [h for h in app.get_state_history(config) if h.next == ("approve",)][-1]  # the first turn's
    return app.invoke(Command(resume="no"), paused.config), app.get_state(config).values, paused.config


@pytest.mark.parametrize("story, graph", [(_chat_story, chat_graph), (_approval_story, approval_graph)],
                         ids=["run on from mid-turn", "answer an old approval differently"])
def test_a_fork_from_a_sealed_checkpoint_runs_on_as_langgraphs_own_saver_runs_it(story, graph, redis_url,
                                                                                  redis_prefix):
    """The fork runs the sealed checkpoint's pending node again: its writes (a resume too) go to that checkpoint,
    kept apart from its page, and are read with it."""
    config = thread("fork")
    runs = {}
    for name, saver in (("memory", InMemorySaver()),
                        ("redis", RedisSaver.from_url(redis_url, prefix=redis_prefix, page_size=2))):
        app = graph().compile(checkpointer=saver)
        first, second, forked_from = story(app, config)
        runs[name] = (first, second, [snapshot_summary(h) for h in app.get_state_history(config)],
                      snapshot_summary(app.get_state(forked_from)))
        if name == "redis":
            saver.close()
    assert runs["redis"] == runs["memory"]


# --- a damaged page: one line naming its key, the rest of the session untouched ---------------------------------


def _stored_page(raw: redis.Redis, prefix: str, thread_id: str) -> tuple[str, bytes, bytes]:
    """The key, member and bytes of the thread's oldest page."""
    key = f"{prefix}{{{thread_id}}}:p:"
    member = raw.zrange(f"{prefix}{{{thread_id}}}:pi:", 0, 0)[0]
    return key, member, raw.hget(key, member)


def _rebuilt(data: bytes, change) -> bytes:
    body = ormsgpack.unpackb(zlib.decompress(data[4:]))
    change(body)
    return data[:4] + zlib.compress(ormsgpack.packb(body))


def _bomb(_: bytes) -> bytes:
    inflate = zlib.compressobj(1)
    chunk = bytes(1 << 20)
    return b"RGP\x01" + b"".join(inflate.compress(chunk) for _ in range(65)) + inflate.flush()


def _outside(body: list) -> None:
    body[4][0] = dict.fromkeys(body[4][0], 10 ** 6)  # the first checkpoint's values point past the page


def _foreign_record(body: list) -> None:
    body[3][0], body[3][1] = body[3][1], body[3][0]


DAMAGED_PAGES = {
    "garbage": (lambda data: b"RGP\x01not zlib at all", "its compressed bytes are damaged"),
    "a newer format": (lambda data: b"RGP\x07" + data[4:], "it is a page of format 7, which this react-graph"),
    "a zip bomb": (_bomb, "it inflates to more than 67,108,864 bytes"),
    "not a page": (lambda data: b"\x93hello", "it is not a page"),
    "values outside the page": (lambda data: _rebuilt(data, _outside), "a value points outside the page"),
    "a record of another checkpoint": (lambda data: _rebuilt(data, _foreign_record), "its record is that of"),
}


@pytest.mark.parametrize("damage, words", DAMAGED_PAGES.values(), ids=DAMAGED_PAGES.keys())
def test_a_damaged_page_is_one_line_naming_its_key_and_can_be_dropped(damage, words, redis_url, redis_prefix, raw,
                                                                      caplog):
    config = thread("damaged")
    thread_id = config["configurable"]["thread_id"]
    with RedisSaver.from_url(redis_url, prefix=redis_prefix, page_size=3) as saver:
        app = chat_graph().compile(checkpointer=saver)
        for line in ("one", "two", "three"):
            app.invoke({"messages": [line]}, config)
        ids = saver.checkpoint_ids(config, 100)
        key, member, data = _stored_page(raw, saver.prefix, thread_id)
        in_page = [cid for cid in ids if cid <= member.split(b"\0")[0].decode()]
        raw.hset(key, member, damage(data))
        with pytest.raises(UnreadableCheckpoint) as caught:
            saver.get_tuple({"configurable": {**config["configurable"], "checkpoint_id": in_page[-1]}})
        message = str(caught.value)
        assert words in message and repr(key) in message and "\n" not in message, message
        assert caught.value.kind == "p:"
        # The rest of the session is untouched: its state, and the checkpoints outside that page.
        assert app.get_state(config).values["turns"] == 3
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            readable = [t.config["configurable"]["checkpoint_id"] for t in saver.list(config)]
        assert set(readable) >= set(ids) - set(in_page) and in_page[-1] not in readable
        assert saver.delete_checkpoint({"configurable": {**config["configurable"], "checkpoint_id": in_page[-1]}})
        assert len(list(saver.list(config))) == len(readable)  # only what could not be read went
        assert app.invoke({"messages": ["four"]}, config)["turns"] == 4


def test_a_damaged_latest_checkpoint_is_passed_over_to_the_newest_sealed_one(redis_url, redis_prefix, raw, caplog):
    config = thread("damaged-latest")
    # Saved one after the other: in a graph run LangGraph saves a step's writes beside the next checkpoint, and a
    # seal that reads a checkpoint whose writes are still arriving is skipped (the next put seals it); with
    # page_size=1 that left two on their own about one run in four.
    with RedisSaver.from_url(redis_url, prefix=redis_prefix, page_size=1) as saver:  # all but the newest sealed
        write_growing_steps(saver, config, 4)
        assert kinds(raw, saver.prefix, config["configurable"]["thread_id"])["c:"] == 1
        [newest, before] = [t.config["configurable"]["checkpoint_id"] for t in saver.list(config, limit=2)]
        sealed = saver.get_tuple({"configurable": {**config["configurable"], "checkpoint_id": before}})
        raw.hset(f"{saver.prefix}{{{config['configurable']['thread_id']}}}:cp:", newest, b"garbage")
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            latest = saver.get_tuple(config)
    assert latest == sealed and latest.checkpoint["channel_values"]["messages"] == ["m0", "m1", "m2"]
    assert any(newest in r.getMessage() and "skipped" in r.getMessage() for r in caplog.records)
