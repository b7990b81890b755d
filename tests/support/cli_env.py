"""The environment a test gives a `reactgraph` subprocess: the developer's own settings removed, but the
test session's REACTGRAPH_HOME kept, so no test ever starts a Redis or builds an index in the real home."""

from __future__ import annotations

import os

CLEARED = ("REACTGRAPH_", "OPENAI_", "ANTHROPIC_")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED) or k == "REACTGRAPH_HOME"}
    env.update(extra)
    return env
