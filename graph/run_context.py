"""The ids of the run in progress (run id, session), for log records: set where a turn starts, read by the
CLI's log formatter. A contextvar, so LangGraph's worker threads and asyncio tasks (which copy the context
of the run that started them) carry the ids of their own run, and two runs in one process never mix."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_CURRENT: ContextVar[dict[str, str] | None] = ContextVar("reactgraph_run", default=None)


@contextmanager
def run_scope(session: str, run_id: str | None = None) -> Iterator[str]:
    """Mark the code inside as run `run_id` (a new uuid by default) of `session`; yields the run id."""
    run_id = run_id or str(uuid.uuid4())
    token = _CURRENT.set({"run_id": run_id, "session": session})
    try:
        yield run_id
    finally:
        _CURRENT.reset(token)


def current_run() -> dict[str, str]:
    """`run_id` and `session` of the run in progress, where known; {} outside any run.

    Outside a `run_scope` (a graph invoked directly from Python) the session still comes from LangChain's
    current runnable config, its `configurable.thread_id`, when a node of a graph is running."""
    ids = _CURRENT.get()
    if ids is not None:
        return ids
    runnable_config = sys.modules.get("langchain_core.runnables.config")  # never imported just to log
    config: Any = runnable_config.var_child_runnable_config.get() if runnable_config is not None else None
    if not isinstance(config, dict):
        return {}
    found: dict[str, str] = {}
    thread = (config.get("configurable") or {}).get("thread_id")
    if thread is not None:
        found["session"] = str(thread)
    if config.get("run_id") is not None:
        found["run_id"] = str(config["run_id"])
    return found
