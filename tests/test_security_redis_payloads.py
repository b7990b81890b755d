"""Crafted values written straight into Redis are refused with one line naming the key, and nothing in them runs.

Whoever can write the Redis must not be able to run code in a react-graph process. Each payload below would
create a marker file (or import a module that does) if it were built or called; it is written into every
kind of key a reader decodes (checkpoint record, channel blob, pending write, store item) and read back
through the public interfaces: the saver API, a compiled graph's get_state / invoke, the CLI.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import ormsgpack
import pytest
import redis
from langchain_core.messages import HumanMessage

from reactgraph.graph import Context, build_react_graph
from reactgraph.memory import AllowListSerializer, AsyncRedisSaver, RedisSaver, RedisStore, UnreadableCheckpoint
from reactgraph.memory.redis_store import UnreadableItem

EVIL_MODULE = "reactgraph_test_evil_import"


class RunsOnUnpickle:
    """Pickles to a call of os.system: what a pickle-decoding reader would run."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def ext(code: int, *parts: object) -> ormsgpack.Ext:
    """A LangGraph msgpack extension: (module, name, argument[, method]) under an extension code."""
    return ormsgpack.Ext(code, ormsgpack.packb(list(parts)))


def crafted_payloads(marker: Path) -> dict[str, tuple[str, bytes, str]]:
    """name -> (serde type, bytes, what the refusal says); each creates `marker` if decoded permissively."""
    touch = f"touch {marker}"
    msgpack = {
        "os.system": (ext(0, "os", "system", touch), "refused to build os.system"),
        "builtins.eval": (ext(0, "builtins", "eval", f"open({str(marker)!r}, 'w')"), "refused to build builtins.eval"),
        "subprocess.run": (ext(1, "subprocess", "run", [["touch", str(marker)]]), "refused to build subprocess.run"),
        "a method call": (ext(3, "os", "system", touch, "__call__"), "refused to call os.system.__call__"),
        "a module reference": (ext(0, EVIL_MODULE, "anything", 1), f"refused to build {EVIL_MODULE}.anything"),
        "inside an allowed message": (ext(5, "langchain_core.messages.human", "HumanMessage",
                                          {"content": "hi", "additional_kwargs": {"x": ext(0, "os", "system", touch)}},
                                          "model_validate_json"), "refused to build os.system"),
    }
    payloads = {name: ("msgpack", ormsgpack.packb([value]), said) for name, (value, said) in msgpack.items()}
    payloads["a pickle"] = ("pickle", pickle.dumps(RunsOnUnpickle(touch)), "refused the 'pickle' encoding")
    lc1 = {"lc": 1, "type": "constructor", "id": ["subprocess", "Popen"], "kwargs": {"args": ["touch", str(marker)]}}
    payloads["lc:1 constructor JSON"] = ("json", json.dumps(lc1).encode(), "refused the 'json' encoding")
    lc2 = {"lc": 2, "type": "constructor", "id": ["subprocess", "run"], "args": [["touch", str(marker)]]}
    payloads["lc:2 constructor JSON"] = ("json", json.dumps(lc2).encode(), "refused the 'json' encoding")
    return payloads


def payload_for(marker: Path, name: str) -> tuple[tuple[str, bytes], str]:
    """The (serde type, bytes) of one crafted payload, and what its refusal says."""
    encoding, data, said = crafted_payloads(marker)[name]
    return (encoding, data), said


PAYLOADS = list(crafted_payloads(Path("/unused")))
KINDS = ("record", "blob", "write")


@pytest.fixture
def marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A file nothing may create; importing EVIL_MODULE (put on sys.path here) creates it too."""
    path = tmp_path / "code-ran"
    (tmp_path / f"{EVIL_MODULE}.py").write_text(f"open({str(path)!r}, 'w').close()\nanything = print\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return path


def one_turn(saver: RedisSaver, thread: str) -> dict:
    """A real ReAct turn (offline model) on `thread`, plus a pending write on its last checkpoint; that config."""
    graph = build_react_graph(checkpointer=saver)
    config = {"configurable": {"thread_id": thread}}
    graph.invoke({"messages": [HumanMessage("计算 2+3")]}, config=config, context=Context())
    latest = saver.get_tuple(config).config
    saver.put_writes(latest, [("messages", HumanMessage("pending"))], task_id="task-1", task_path="~")
    return latest


def plant(raw: redis.Redis, saver: RedisSaver, latest: dict, kind: str, typed: tuple[str, bytes]) -> tuple[str, str]:
    """Overwrite one `kind` of key of the latest checkpoint with `typed`; the key and field it went to."""
    conf = latest["configurable"]
    base, cid = f"{saver.prefix}{{{conf['thread_id']}}}:", conf["checkpoint_id"]
    packed = typed[0].encode() + b"\0" + typed[1]
    if kind == "record":
        key, field = base + "cp:", cid
        raw.hset(key, field, packed)
    elif kind == "blob":
        key = base + "b:"
        version = saver.get_tuple(latest).checkpoint["channel_versions"]["messages"]
        field = f"messages\0{version}"
        raw.hset(key, field, packed)
    else:
        key, field = base + "w:", f"{cid}\0task-1\x000"
        raw.hset(key, field, b"~\0messages\0" + packed)
    return key, field


def assert_refused(exc: BaseException, key: str, said: str, marker: Path) -> None:
    message = str(exc)
    assert "\n" not in message and key in message and said in message, message
    assert not marker.exists(), "a crafted payload ran code"
    assert EVIL_MODULE not in sys.modules


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_crafted_value_in_any_checkpoint_key_is_refused_by_the_saver_and_the_graph(
        payload, kind, saver, raw, marker, caplog):
    typed, said = payload_for(marker, payload)
    latest = one_turn(saver, f"t-{uuid.uuid4().hex[:8]}")
    key, _ = plant(raw, saver, latest, kind, typed)
    bad = latest["configurable"]["checkpoint_id"]
    graph = build_react_graph(checkpointer=saver)
    # Read by its id, the checkpoint is refused with one line naming it and the key.
    for read in (lambda: saver.get_tuple(latest), lambda: graph.get_state(latest)):
        with pytest.raises(UnreadableCheckpoint) as caught:
            read()
        assert_refused(caught.value, key, said, marker)
        assert caught.value.checkpoint_id == bad
    # Read as the thread's latest, it is passed over with a warning naming it; the run goes on from the one before.
    thread = {"configurable": {"thread_id": latest["configurable"]["thread_id"]}}
    with caplog.at_level(logging.WARNING, logger="reactgraph.memory.redis_checkpoint"):
        assert saver.get_tuple(thread).config["configurable"]["checkpoint_id"] != bad
        assert "5" in graph.get_state(thread).values["final_answer"]
        result = graph.invoke({"messages": [HumanMessage("计算 3+4")]}, config=thread, context=Context())
    assert "7" in result["final_answer"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    # (a blob is shared by the checkpoints that kept that channel version: the one before may be named too)
    assert any(bad in w for w in warnings) and all(key in w and said in w for w in warnings)
    assert not marker.exists() and EVIL_MODULE not in sys.modules


@pytest.mark.parametrize("kind", KINDS)
async def test_the_async_saver_refuses_them_too(kind, redis_url, redis_prefix, saver, raw, marker):
    typed, said = payload_for(marker, "os.system")
    latest = one_turn(saver, f"t-{uuid.uuid4().hex[:8]}")
    key, _ = plant(raw, saver, latest, kind, typed)
    async with AsyncRedisSaver.from_url(redis_url, prefix=redis_prefix) as aio:
        with pytest.raises(UnreadableCheckpoint) as caught:
            await aio.aget_tuple(latest)
    assert_refused(caught.value, key, said, marker)


def test_list_skips_a_refused_checkpoint_with_a_warning_naming_it(saver, raw, marker, caplog):
    latest = one_turn(saver, f"t-{uuid.uuid4().hex[:8]}")
    key, _ = plant(raw, saver, latest, "record", payload_for(marker, "os.system")[0])
    thread = {"configurable": {"thread_id": latest["configurable"]["thread_id"]}}
    with caplog.at_level(logging.WARNING, logger="reactgraph.memory.redis_checkpoint"):
        listed = [t.config["configurable"]["checkpoint_id"] for t in saver.list(thread)]
    bad = latest["configurable"]["checkpoint_id"]
    assert bad not in listed and len(listed) >= 5  # the older checkpoints are all still there
    assert any(bad in r.getMessage() and key in r.getMessage() for r in caplog.records)
    assert not marker.exists()


# --- the CLI: `history` marks the refused checkpoint, `ask` stops with one line --------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_history_marks_the_refused_checkpoint_and_ask_stops_with_one_line_naming_the_key(
        kind, cli, cli_session, redis_url, raw, marker):
    assert cli("ask", "计算 2+3", "--session", cli_session, "--json")[0] == 0
    with RedisSaver.from_url(redis_url) as saver:
        latest = saver.get_tuple({"configurable": {"thread_id": cli_session}}).config
        saver.put_writes(latest, [("messages", HumanMessage("pending"))], task_id="task-1", task_path="~")
        key, _ = plant(raw, saver, latest, kind, payload_for(marker, "os.system")[0])
    bad = latest["configurable"]["checkpoint_id"]

    code, out, err = cli("history", "--session", cli_session, "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert rows[0]["checkpoint"] == bad and "refused to build os.system" in rows[0]["unreadable"]
    # Older checkpoints are listed as readable (a blob shared with the one before may take that one along).
    assert sum(row["unreadable"] is None for row in rows) >= 5

    code, out, err = cli("ask", "计算 3+4", "--session", cli_session, "--json")
    assert code == 2 and out == ""
    line = err.strip().replace("\n", " ")  # rich may fold the one line to the terminal's width
    assert line.startswith("error: checkpoint ") and key in line and f"--drop {bad}" in line
    assert "Traceback" not in err and not marker.exists()


# --- the allow-list: react-graph's own state decodes, your types can be added --------------------------------


@dataclass
class Ticket:
    """A state type of a user's own: not on the allow-list until they add it."""

    number: int


def ticket_graph(saver):
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class TicketState(TypedDict):
        ticket: Ticket

    graph = StateGraph(TicketState)
    graph.add_node("open", lambda state: {"ticket": Ticket(state["ticket"].number + 1)})
    graph.add_edge(START, "open")
    graph.add_edge("open", END)
    return graph.compile(checkpointer=saver)


def test_your_own_state_types_are_refused_until_added_to_the_allow_list(redis_url, redis_prefix):
    config = {"configurable": {"thread_id": "tickets"}}
    with RedisSaver.from_url(redis_url, prefix=redis_prefix) as default:
        ticket_graph(default).invoke({"ticket": Ticket(1)}, config)
        # Not "an empty thread": a thread none of whose checkpoints can be read says why.
        with pytest.raises(UnreadableCheckpoint, match=rf"refused to build {__name__}.Ticket: not an allowed type"):
            default.get_tuple(config)
        # What LangGraph's strict mode (LANGGRAPH_STRICT_MSGPACK=true) calls at compile time with the state's types.
        assert default.with_allowlist([(__name__, "Ticket")]).get_tuple(config).checkpoint["channel_values"] == {
            "ticket": Ticket(2)}
    with RedisSaver.from_url(redis_url, prefix=redis_prefix, serde=AllowListSerializer([Ticket])) as extended:
        assert ticket_graph(extended).get_state(config).values == {"ticket": Ticket(2)}


# --- the long-term store: JSON objects only, nothing revived -------------------------------------------------


@pytest.fixture
def store(redis_url: str, redis_prefix: str):
    with RedisStore.from_url(redis_url, prefix=redis_prefix + "store") as store:
        yield store


def overwrite_value(raw: redis.Redis, store: RedisStore, namespace: tuple[str, ...], key: str, value: bytes) -> str:
    """Keep the item's header (created, updated, ttl), replace what follows it."""
    name = f"{store.prefix}i:{'.'.join(namespace)}\0{key}"
    header = raw.get(name).split(b"\0", 3)[:3]
    raw.set(name, b"\0".join([*header, value]))
    return name


@pytest.mark.parametrize("payload", ["a pickle", "os.system", "lc:1 constructor JSON", "a JSON list", "garbage"])
def test_a_crafted_store_value_is_refused_by_get_and_skipped_by_search(payload, store, raw, marker, caplog):
    store.put(("sessions", "s1", "qa"), "turn-1", {"question": "q", "answer": "a"})
    store.put(("sessions", "s1", "qa"), "turn-2", {"question": "q2", "answer": "a2"})
    crafted = {name: data for name, (_, data, _) in crafted_payloads(marker).items()}
    crafted.update({"a JSON list": b"[1, 2]", "garbage": b"\xff\xfe{"})
    name = overwrite_value(raw, store, ("sessions", "s1", "qa"), "turn-1", crafted[payload])
    if payload == "lc:1 constructor JSON":  # valid JSON: it stays the plain dict it is, nothing is constructed
        assert store.get(("sessions", "s1", "qa"), "turn-1").value["id"] == ["subprocess", "Popen"]
    else:
        with pytest.raises(UnreadableItem) as caught:
            store.get(("sessions", "s1", "qa"), "turn-1")
        assert repr(name) in str(caught.value) and "\n" not in str(caught.value)
        with caplog.at_level(logging.WARNING, logger="reactgraph.memory.redis_store"):
            found = store.search(("sessions", "s1"))
        assert [item.key for item in found] == ["turn-2"]
        assert any("unreadable" in r.getMessage() and "turn-1" in r.getMessage() for r in caplog.records)
    assert not marker.exists()


# --- the SQLite store (`--store sqlite:///…`) decodes through the same allow-list ------------------------------


def test_a_crafted_sqlite_row_is_refused_too(tmp_path, marker, cli):
    import sqlite3

    store = f"sqlite:///{tmp_path / 'sessions.db'}"
    assert cli("ask", "计算 2+3", "--session", "s-sqlite", "--store", store, "--json")[0] == 0
    typed, said = payload_for(marker, "os.system")
    with sqlite3.connect(tmp_path / "sessions.db") as db:
        db.execute("UPDATE checkpoints SET type = ?, checkpoint = ? WHERE thread_id = 's-sqlite'", typed)
    code, _, err = cli("history", "--session", "s-sqlite", "--store", store)
    assert code == 2 and said in err and "\n" not in err.strip() and "Traceback" not in err
    assert not marker.exists()
