"""Telling a tool's own failure (reported to the model as a result) from the caller stopping the run (re-raised).

Tools may raise anything, BaseExceptions included (SystemExit, KeyboardInterrupt, GeneratorExit, CancelledError,
custom ones); none of them may end the gateway's caller. Only two things stop a run from outside, and each can
be recognised:
- cancellation of the run's task (a caller's timeout, `task.cancel()`, and a user's Ctrl-C under `asyncio.run`,
  whose SIGINT handler cancels the main task): the task then reports `cancelling() > 0`. A CancelledError the
  tool raised on its own leaves that count at 0.
- a user's Ctrl-C while a synchronous caller runs the event loop on the main thread: Python's SIGINT handler
  raises KeyboardInterrupt in whatever code the main thread runs, which may be an async tool's. Python runs
  signal handlers only on the main thread and only between instructions (at calls and loop jumps), never at
  a `raise` statement; so a KeyboardInterrupt off the main thread, or thrown by a `raise`, is the tool's own.
Sync tools run on worker threads, where no signal ever arrives: whatever they raise is theirs.
"""

from __future__ import annotations

import asyncio
import dis
import logging
import threading

from reactgraph.tools import observations
from reactgraph.tools.policies.base import CallContext
from reactgraph.tools.result import ToolResult, ToolStatus
from reactgraph.tools.threads import ToolAborted

log = logging.getLogger("reactgraph.tools.containment")

_RAISE = dis.opmap["RAISE_VARARGS"]


def delivered_by_signal(interrupt: KeyboardInterrupt) -> bool:
    """Whether this KeyboardInterrupt came from the SIGINT handler (a user's Ctrl-C) rather than a tool's `raise`."""
    if threading.current_thread() is not threading.main_thread():
        return False
    tb = interrupt.__traceback__
    if tb is None:
        return True  # nothing to tell by: let the interrupt stop the run, as a Ctrl-C should
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code.co_code
    return not (0 <= tb.tb_lasti < len(code) and code[tb.tb_lasti] == _RAISE)


def stopped_from_outside(exc: BaseException) -> bool:
    """Whether `exc` means the caller is stopping the run (so it must propagate), not that the tool failed."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        return True
    return isinstance(exc, KeyboardInterrupt) and delivered_by_signal(exc)


def tool_fault(call: CallContext, exc: BaseException) -> ToolResult:
    """The `error` result for whatever tool code raised; re-raises instead when the run is being stopped."""
    if stopped_from_outside(exc):
        if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt)):
            raise exc
        # The tool swallowed the cancellation and raised something else: the cancellation still wins.
        raise asyncio.CancelledError(f"cancelled while {call.name} ran") from exc
    cause = exc.cause if isinstance(exc, ToolAborted) else exc
    # The call's own record (the telemetry step's) says it failed; its traceback only at DEBUG, for the tool's author.
    if log.isEnabledFor(logging.DEBUG):
        log.debug("tool %s raised %s (contained as an error result)", call.name, type(cause).__name__,
                  exc_info=cause, extra={"swallowed": {"tool": call.name, "error_type": type(cause).__name__}})
    return call.result(ToolStatus.ERROR, observations.failed(call.name, cause), error_type=type(cause).__name__)
