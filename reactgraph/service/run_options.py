"""The run options langgraph-sdk sends beside a run's input, each honoured or refused with a 422 naming it (never
taken and then ignored): when the run may start (`after_seconds`), how often it checkpoints (`durability`, and the
older `checkpoint_during`), whether a resume must answer a waiting interrupt (`strict_resume`), the graph config's
own keys, and what this service does not do (`webhook`, `feedback_keys`, `langsmith_tracer`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reactgraph.errors import ReactGraphError
from reactgraph.service.wire import BadRequest, field

DURABILITIES = ("sync", "async", "exit")
MAX_AFTER_SECONDS = 7 * 24 * 3600  # a run scheduled further out is a cron's job (the /info flags say crons: false)
MAX_TAGS = 64
# Refused rather than honoured, each with why (docs/serving.md lists them).
REFUSED = {
    "webhook": "webhooks are not sent by reactgraph serve (a client-chosen URL fetched by the worker is the "
               "operator's to allow, and there is no setting for it yet); poll the run or join its stream",
    "feedback_keys": "LangSmith feedback URLs are not made by reactgraph serve (the /info flags say langsmith: "
                     "false)",
    "langsmith_tracer": "runs are not traced to LangSmith by reactgraph serve (the /info flags say langsmith: false)",
}
# What a run's `config` may hold beside `configurable`; the rest of RunnableConfig is the service's to set.
_CONFIG_KEYS = ("configurable", "recursion_limit", "tags", "metadata", "run_name", "max_concurrency")


def refuse_unserved(body: Mapping[str, Any]) -> None:
    """A 422 naming the first option of REFUSED the body gives (an empty or null one is not given)."""
    for name, why in REFUSED.items():
        if body.get(name) not in (None, "", [], {}):
            raise BadRequest(422, f"{name!r} is refused: {why}")


def run_options(body: Mapping[str, Any]) -> dict[str, Any]:
    """`durability`, `after_seconds` and `strict_resume` as stored with the run's kwargs."""
    durability = field(body, "durability", str)
    if durability is None:  # as langgraph-api reads the older flag: False is "exit"
        durability = "exit" if field(body, "checkpoint_during", bool) is False else "async"
    if durability not in DURABILITIES:
        raise BadRequest(422, f"'durability' must be one of {', '.join(DURABILITIES)}, got {durability!r}")
    after = field(body, "after_seconds", (int, float), 0)
    if not 0 <= after <= MAX_AFTER_SECONDS:  # NaN fails this too
        raise BadRequest(422, f"'after_seconds' must be from 0 to {MAX_AFTER_SECONDS}, got {after!r}")
    return {"durability": durability, "checkpoint_during": durability != "exit", "after_seconds": after,
            "strict_resume": bool(field(body, "strict_resume", bool, False))}


def on_disconnect(body: dict[str, Any]) -> str:
    chosen = field(body, "on_disconnect", str, "continue")
    if chosen not in ("continue", "cancel"):
        raise BadRequest(422, f"'on_disconnect' must be continue or cancel, got {chosen!r}")
    return chosen


def background(body: dict[str, Any]) -> None:
    """A background run holds no connection that could go: `on_disconnect="cancel"` would mean nothing."""
    if on_disconnect(body) == "cancel":
        raise BadRequest(422, "'on_disconnect' cancel is for a run streamed or waited on; a background run "
                              "(runs.create) holds no connection: cancel it with runs.cancel")


def on_completion(body: dict[str, Any]) -> str:
    chosen = field(body, "on_completion", str, "delete")
    if chosen not in ("delete", "keep"):
        raise BadRequest(422, f"'on_completion' must be delete or keep, got {chosen!r}")
    return chosen


def config_extras(config: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of a run's `config` that reach the graph's RunnableConfig beside `configurable` and
    `recursion_limit`: `tags`, `metadata`, `run_name`, `max_concurrency`; any other key is a 422 naming it."""
    unknown = sorted(str(key) for key in config if key not in _CONFIG_KEYS)
    if unknown:
        raise BadRequest(422, f"'config' takes {', '.join(_CONFIG_KEYS)}; got {', '.join(map(repr, unknown[:10]))}")
    extras: dict[str, Any] = {}
    tags = field(config, "tags", list)
    if tags is not None:
        if len(tags) > MAX_TAGS or not all(isinstance(tag, str) and len(tag) <= 200 for tag in tags):
            raise BadRequest(422, f"'config.tags' must be at most {MAX_TAGS} strings of 200 characters")
        extras["tags"] = tags
    if (metadata := field(config, "metadata", dict)) is not None:
        extras["metadata"] = metadata
    if (name := field(config, "run_name", str)) is not None:
        extras["run_name"] = name[:200]
    concurrency = field(config, "max_concurrency", int)
    if concurrency is not None:
        if not 1 <= concurrency <= 1000:
            raise BadRequest(422, f"'config.max_concurrency' must be from 1 to 1000, got {concurrency}")
        extras["max_concurrency"] = concurrency
    return extras


def check_nodes(graph: Any, kwargs: dict[str, Any]) -> None:
    """interrupt_before/after name nodes of the assistant's graph (LangGraph would ignore the others silently)."""
    nodes = sorted(name for name in graph.nodes if not name.startswith("__"))
    for name in ("interrupt_before", "interrupt_after"):
        named = kwargs.get(name)
        if isinstance(named, list) and (unknown := [node for node in named if node not in nodes]):
            raise BadRequest(422, f"'{name}' names no node of this graph: {', '.join(map(repr, unknown[:10]))}; "
                                  f"nodes: {', '.join(nodes)}")


async def check_checkpoint(checkpointer: Any, thread_id: str, checkpoint_id: str | None) -> None:
    """A run from a checkpoint must name one of the thread's (else LangGraph would start from nothing)."""
    if not checkpoint_id:
        return
    found = await checkpointer.aget_tuple(
        {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}})
    if found is None:
        raise BadRequest(422, f"'checkpoint_id' {checkpoint_id[:80]!r} is no checkpoint of thread {thread_id!r}")


def graph_options(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """What the worker passes to the graph's stream beside its input: the run's durability."""
    durability = kwargs.get("durability")
    return {"durability": durability if durability in DURABILITIES else "async"}


class UnknownInterruptError(ReactGraphError, ValueError):
    """A `strict_resume` run's resume answers no interrupt the thread waits on: the run fails before it starts."""


async def check_resume(graph: Any, config: Mapping[str, Any], command: Mapping[str, Any] | None) -> None:
    """Under `strict_resume`: an UnknownInterruptError unless the resume answers what waits — each id of a resume
    keyed by interrupt ids (as LangGraph reads such a map) is a waiting interrupt's, and a plain resume has one."""
    if not command or "resume" not in command:
        return
    snapshot = await graph.aget_state(dict(config))
    waiting = {interrupt.id for interrupt in snapshot.interrupts}
    resume = command["resume"]
    if isinstance(resume, dict) and resume and all(_interrupt_id(key) for key in resume):
        if unknown := sorted(set(resume) - waiting):
            raise UnknownInterruptError(f"the resume answers interrupts the thread does not wait on: "
                                        f"{', '.join(unknown[:10])}")
    elif not waiting:
        raise UnknownInterruptError("the resume answers an interrupt, but the thread waits on none")


def _interrupt_id(key: Any) -> bool:
    return isinstance(key, str) and len(key) == 32 and all(c in "0123456789abcdef" for c in key)
