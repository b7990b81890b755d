"""The LangGraph `RetryPolicy` of the model-calling nodes: a transient model error re-runs the node.

Two layers, outermost last: the provider SDK retries a call a few times within seconds
(REACTGRAPH_MODEL_RETRIES); when the error outlasts that, the node raises it and LangGraph runs the node
again after a longer pause (REACTGRAPH_NODE_RETRIES times, the first after REACTGRAPH_NODE_RETRY_DELAY
seconds, doubling up to a minute). While it waits the run is unfinished, so a process that dies meanwhile
leaves a checkpoint the run resumes from. On the last attempt the error goes to the node's own handling:
the run ends `failed` with one line, as it did without retries. Some errors get fewer re-runs whatever the
policy says (loader.node_retries_for): a timeout at temperature 0 and a stream that closed empty get one. A
timeout is not retried by the SDK at all (models/openai_compat.py), so it is sent at most twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langgraph.types import RetryPolicy

from reactgraph.models.loader import describe_model_error, env_number, is_transient_model_error, node_retries_for

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

DEFAULT_NODE_RETRIES = 2
DEFAULT_NODE_RETRY_DELAY_S = 2.0
MAX_NODE_RETRY_DELAY_S = 60.0


def model_retry_policy(retries: int | None = None, delay_s: float | None = None) -> RetryPolicy:
    """The policy for nodes that call a model: `retries` re-runs after a transient error (default from
    REACTGRAPH_NODE_RETRIES, else 2), the first after `delay_s` seconds (REACTGRAPH_NODE_RETRY_DELAY, else 2)."""
    if retries is None:
        retries = env_number("REACTGRAPH_NODE_RETRIES", DEFAULT_NODE_RETRIES, int)
    if delay_s is None:
        delay_s = env_number("REACTGRAPH_NODE_RETRY_DELAY", DEFAULT_NODE_RETRY_DELAY_S, float)
    # LangGraph's jitter adds up to a whole second: right beside pauses of seconds, not beside short test pauses.
    return RetryPolicy(max_attempts=retries + 1, initial_interval=delay_s, backoff_factor=2.0,
                       max_interval=max(delay_s, MAX_NODE_RETRY_DELAY_S), jitter=delay_s >= 1.0,
                       retry_on=is_transient_model_error)


def _matches(policy: RetryPolicy, exc: Exception) -> bool:
    retry_on = policy.retry_on  # the three forms LangGraph accepts
    if isinstance(retry_on, type):
        return isinstance(exc, retry_on)
    if isinstance(retry_on, Sequence):
        return isinstance(exc, tuple(retry_on))
    return bool(retry_on(exc))


def attempt_of(runtime: Runtime[Any]) -> int:
    """This run of the node: 1, then 2, 3 … on LangGraph's retries (1 where the runtime does not say)."""
    info = runtime.execution_info
    return info.node_attempt if info is not None else 1


def leave_to_retry(policy: RetryPolicy | None, runtime: Runtime[Any], exc: Exception) -> bool:
    """Whether the node should raise `exc` for LangGraph to run it again (attempts are left and it matches).

    Without execution info (a LangGraph that does not count attempts) the node cannot tell its last
    attempt, so it never raises: the error is handled at once, as before retries existed.
    """
    if policy is None or runtime.execution_info is None:
        return False
    attempts = policy.max_attempts
    temperature = getattr(runtime.context, "temperature", 0.0)
    if (retries := node_retries_for(exc, temperature)) is not None:
        attempts = min(attempts, retries + 1)
    return attempt_of(runtime) < attempts and _matches(policy, exc)


def model_failure(exc: BaseException, model: Any, runtime: Runtime[Any]) -> str:
    """The one line a failed run ends with: why the model call failed, and how many node attempts it got."""
    reason = describe_model_error(exc, model)
    attempts = attempt_of(runtime)
    return f"{reason} (gave up after {attempts} attempts)" if attempts > 1 else reason
