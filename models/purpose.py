"""What a model request is for, as the model gateway tells the chat model: run metadata, never the wire.

The gateway tags every request's run with `{"reactgraph_purpose": "<purpose>"}` (`Runnable.with_config`); LangChain
hands a run's metadata to its callbacks and to the chat model's run manager, and no provider client sends it to
its server. A real model ignores it, tracing records it, and a model of our own (the scripted offline model, the
test models of `reactgraph.testing`) may read it with `purpose_of(run_manager)`, as it reads bound tools and stop
sequences: structure of the request, not the words of a prompt.
"""

from __future__ import annotations

from typing import Any

PURPOSE_METADATA = "reactgraph_purpose"
PURPOSES = frozenset({"summarize", "think", "reflect", "answer", "check", "respond", "plan", "replan", "step",
                      "evaluate", "lesson"})


def purpose_of(run_manager: Any) -> str | None:
    """The request's purpose from its run manager's metadata; None outside the gateway (a direct `invoke`)."""
    metadata = getattr(run_manager, "metadata", None)
    value = metadata.get(PURPOSE_METADATA) if isinstance(metadata, dict) else None
    return value if isinstance(value, str) and value in PURPOSES else None
