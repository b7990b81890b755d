"""The per-task time limit (`--task-timeout`): a run past it stops at its next step and is recorded as timed out.

A Python thread cannot be stopped from outside, so the limit is kept in two ways: a callback on every node,
model and tool start raises `TaskTimedOut` once the deadline has passed (the run ends at its next step, without
another paid call), and the scheduler stops waiting for a run still busy a grace period later (one stuck in a
single long call): it records the run as timed out and leaves the thread to finish on its own.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler

from reactgraph.errors import ReactGraphError

TIMED_OUT = "timed_out"  # the status and failure mode of a run past its time limit


class TaskTimedOut(ReactGraphError):
    """Raised into a run by `DeadlineGuard` when its time limit has passed."""


class DeadlineGuard(BaseCallbackHandler):
    """Stops a run at its next node, model or tool start once `deadline` (time.monotonic()) has passed."""

    raise_error = True  # LangChain swallows a callback's errors unless the handler asks for them to be raised

    def __init__(self, deadline: float, limit_s: float) -> None:
        self.deadline = deadline
        self.limit_s = limit_s
        self.expired = False

    def _check(self) -> None:
        if time.monotonic() >= self.deadline:
            self.expired = True
            raise TaskTimedOut(f"task timed out after {self.limit_s:g} s")

    def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
        self._check()

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self._check()

    def on_tool_start(self, serialized: Any, input_str: str, **kwargs: Any) -> None:
        self._check()


class _QuietTimeouts(logging.Filter):
    """LangChain logs a warning for every error a callback raises, even one it raises on purpose: not for ours."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "TaskTimedOut" not in record.getMessage()


logging.getLogger("langchain_core.callbacks.manager").addFilter(_QuietTimeouts())


def mark_timed_out(record: dict[str, Any], limit_s: float) -> dict[str, Any]:
    """The record of a run that its time limit stopped: failed, status and failure mode `timed_out`."""
    return {**record, "status": TIMED_OUT, "success": False, "failure_mode": TIMED_OUT,
            "error": f"task timed out after {limit_s:g} s"}
