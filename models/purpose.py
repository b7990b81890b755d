"""What a model request is for, as the model gateway tells the chat model: run metadata, never the wire.

Besides the purpose, a Plan-and-Solve plan or replan request carries its step limit (`reactgraph_max_steps`), a
step request the plan's goals up to the step under way (`reactgraph_plan_steps`), and a text-protocol request that
asks for the inline verdict the block's fields (`reactgraph_verdict_block`): the same structure the prompt states,
given as data rather than as prompt words.

The gateway tags every request's run with `{"reactgraph_purpose": "<purpose>"}` (`Runnable.with_config`); LangChain
hands a run's metadata to its callbacks and to the chat model's run manager, and no provider client sends it to
its server. A real model ignores it, tracing records it, and a model of our own (the scripted offline model, the
test models of `reactgraph.testing`) may read it with `purpose_of(run_manager)`, as it reads bound tools and stop
sequences: structure of the request, not the words of a prompt.
"""

from __future__ import annotations

from typing import Any

PURPOSE_METADATA = "reactgraph_purpose"
PLAN_STEPS_METADATA = "reactgraph_plan_steps"
# A plan or replan request: the most steps it may have (the plan prompt says so in words; this is the limit as data).
MAX_STEPS_METADATA = "reactgraph_max_steps"
# A text-protocol think request that asks for the inline verdict: the fields of the <reflection> block asked for
# (in the tools protocol the verdict is a bound tool's schema, structure the model already sees).
VERDICT_BLOCK_METADATA = "reactgraph_verdict_block"
MAX_PLAN_STEPS = 50  # a plan is a handful of steps; metadata read back is bounded all the same
PURPOSES = frozenset({"summarize", "think", "reflect", "answer", "check", "respond", "plan", "replan", "step",
                      "evaluate", "lesson"})


def purpose_of(run_manager: Any) -> str | None:
    """The request's purpose from its run manager's metadata; None outside the gateway (a direct `invoke`)."""
    metadata = getattr(run_manager, "metadata", None)
    value = metadata.get(PURPOSE_METADATA) if isinstance(metadata, dict) else None
    return value if isinstance(value, str) and value in PURPOSES else None


def plan_steps_of(run_manager: Any) -> tuple[str, ...]:
    """A step request's plan goals up to the step under way (the last), from its run metadata; () otherwise."""
    return _strings_of(run_manager, PLAN_STEPS_METADATA)


def max_steps_of(run_manager: Any) -> int | None:
    """A plan request's step limit, from its run metadata; None when it has none or it is not a sane count."""
    metadata = getattr(run_manager, "metadata", None)
    value = metadata.get(MAX_STEPS_METADATA) if isinstance(metadata, dict) else None
    return value if type(value) is int and 1 <= value <= MAX_PLAN_STEPS else None


def verdict_block_of(run_manager: Any) -> tuple[str, ...]:
    """The verdict block's fields a text-protocol request asks for (its run metadata); () otherwise."""
    return _strings_of(run_manager, VERDICT_BLOCK_METADATA)


def _strings_of(run_manager: Any, key: str) -> tuple[str, ...]:
    """A bounded list of strings from the request's run metadata (read back from outside the model: untrusted)."""
    metadata = getattr(run_manager, "metadata", None)
    value = metadata.get(key) if isinstance(metadata, dict) else None
    if not isinstance(value, list | tuple) or len(value) > MAX_PLAN_STEPS:
        return ()
    return tuple(item for item in value if isinstance(item, str))
