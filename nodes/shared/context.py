"""`Context`: the per-run configuration of a graph, passed as LangGraph's `context_schema`.

Each field carries a description so LangGraph Studio renders the dataclass as a form; defaults come from
environment variables where a user would expect to set them once (REACTGRAPH_MODEL).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from reactgraph.nodes.shared import prompts

if TYPE_CHECKING:  # Context itself must stay importable without langgraph (the CLI's start-up)
    from langgraph.runtime import Runtime

Protocol = Literal["tools", "text"]
ReflectionMode = Literal["llm", "rules", "off"]


def _env_model() -> str:
    return os.environ.get("REACTGRAPH_MODEL", "").strip() or "offline"


@dataclass(kw_only=True)
class Context:
    """How one run behaves: which model, how it acts, how long it may loop, which tools it may use."""

    model: Annotated[str, Field(description=(
        "Model spec: 'offline' (scripted offline model, not an LLM; the default), 'openai:<model>' "
        "(OPENAI_API_KEY, OPENAI_BASE_URL for any OpenAI-compatible server) or 'anthropic:<model>'. "
        "Empty means $REACTGRAPH_MODEL, else offline."))] = ""
    protocol: Annotated[Protocol, Field(description=(
        "How the model acts: 'tools' (native tool calling) or 'text' (classic Thought/Action/Observation "
        "prompt, for models without tool calling)."))] = "tools"
    max_iterations: Annotated[int, Field(ge=1, le=50, description=(
        "Think→act rounds allowed per question; at the limit the agent answers from what it gathered."))] = 5
    reflection: Annotated[ReflectionMode, Field(description=(
        "Self-check after each round: 'llm' (structured verdict from the model), 'rules' (deterministic "
        "checks, no model call) or 'off'."))] = "llm"
    allowed_tools: Annotated[list[str] | None, Field(description=(
        "Tool names or tags this run may use; empty/None allows every enabled tool."))] = None
    denied_tools: Annotated[tuple[str, ...], Field(description=(
        "Tool names or tags this run may not use (wins over allowed_tools)."))] = ()
    observation_budget: Annotated[int, Field(ge=200, description=(
        "Maximum characters of one tool result shown to the model; longer results are truncated."))] = 4000
    memory_window: Annotated[int, Field(ge=2, description=(
        "Messages kept verbatim in the prompt; older ones are folded into a running summary."))] = 8
    temperature: Annotated[float, Field(ge=0.0, le=2.0, description="Sampling temperature of the model.")] = 0.0
    system_prompt: Annotated[str, Field(description="System prompt of the think step.")] = prompts.SYSTEM_PROMPT
    # Plan-and-Solve only; off by default so the classic static plan stays measurable against replanning.
    replan: Annotated[bool, Field(description=(
        "Plan-and-Solve: after a failed or surprising step, revise the remaining steps. Off: the plan made "
        "at the start is carried out as it is. (There, max_iterations counts executed plan steps.)"))] = False

    def __post_init__(self) -> None:
        # A plain "" default (not a factory) so Studio's form shows it; resolved here, once per run.
        self.model = self.model.strip() or _env_model()
        self.denied_tools = tuple(self.denied_tools or ())
        # Catch bad values at construction (CLI flags, Studio form) rather than deep inside a run.
        if self.protocol not in ("tools", "text"):
            raise ValueError(f"protocol must be 'tools' or 'text', not {self.protocol!r}")
        if self.reflection not in ("llm", "rules", "off"):
            raise ValueError(f"reflection must be 'llm', 'rules' or 'off', not {self.reflection!r}")
        if not isinstance(self.max_iterations, int) or not 1 <= self.max_iterations <= 50:
            raise ValueError(f"max_iterations must be an integer from 1 to 50, not {self.max_iterations!r}")
        if not isinstance(self.memory_window, int) or self.memory_window < 2:
            raise ValueError(f"memory_window must be an integer >= 2, not {self.memory_window!r}")
        if self.observation_budget < 200:
            raise ValueError("observation_budget must be at least 200 characters")
        if not isinstance(self.replan, bool):
            raise ValueError(f"replan must be true or false, not {self.replan!r}")


def resolve_context(value: Context | Mapping[str, Any] | None) -> Context:
    """A run's Context from what the caller passed: defaults for None, coerced from a mapping (the HTTP API
    sends JSON; LangGraph coerces a dict itself, older releases and direct callers may not)."""
    if isinstance(value, Context):
        return value
    if value is None:
        return Context()
    if isinstance(value, Mapping):
        return Context(**value)
    raise TypeError(f"context must be a Context or a mapping of its fields, not {type(value).__name__}")


def context_of(runtime: Runtime[Context]) -> Context:
    """The running graph's Context (see `resolve_context`); the one place a node or router reads it from."""
    return resolve_context(runtime.context)
