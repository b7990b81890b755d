"""`Context`: the per-run configuration of a graph, passed as LangGraph's `context_schema`.

Each field carries a description so LangGraph Studio renders the dataclass as a form; defaults come from
environment variables where a user would expect to set them once (REACTGRAPH_MODEL).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from functools import cache
from types import UnionType
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from reactgraph.errors import ReactGraphError
from reactgraph.nodes import prompts

if TYPE_CHECKING:  # Context itself must stay importable without langgraph (the CLI's start-up)
    from langgraph.runtime import Runtime

Protocol = Literal["tools", "text"]
ReflectionMode = Literal["llm", "rules", "off", "inline"]
ToolLabel = Annotated[str, Field(min_length=1, max_length=100)]  # a tool's name or one of its tags
ApprovalSetting = Literal["always", "never"]
ApprovalMode = Literal["batched", "per_call"]
ModelSpec = Annotated[str, Field(min_length=1, max_length=200)]  # as `Context.model` takes it
MAX_FALLBACK_MODELS = 5


class InvalidContext(ReactGraphError, ValueError):
    """A Context field with a value it does not accept; the message names each field, value and what is accepted."""


def _env_model() -> str:
    return os.environ.get("REACTGRAPH_MODEL", "").strip() or "offline"


@dataclass(kw_only=True)
class Context:
    """How one run behaves: which model, how it acts, how long it may loop, which tools it may use."""

    model: Annotated[str, Field(max_length=200, description=(
        "Model spec: 'offline' (scripted offline model, not an LLM; the default), 'openai:<model>' "
        "(OPENAI_API_KEY, OPENAI_BASE_URL for any OpenAI-compatible server) or 'anthropic:<model>'. "
        "Empty means $REACTGRAPH_MODEL, else offline."))] = ""
    protocol: Annotated[Protocol, Field(description=(
        "How the model acts: 'tools' (native tool calling) or 'text' (classic Thought/Action/Observation "
        "prompt, for models without tool calling)."))] = "tools"
    max_iterations: Annotated[int, Field(ge=1, le=50, description=(
        "Think→act rounds allowed per question; at the limit the agent answers from what it gathered."))] = 5
    # One budget for every graph, so that the paradigms compare on equal terms (see nodes/text_protocol.py: read_reply).
    max_format_errors: Annotated[int, Field(ge=0, le=20, description=(
        "Text protocol: replies in the wrong format (no Action or Final Answer, no numbered plan) a run may have "
        "corrected, each answered with a short format note and asked again; the next one ends the run's steps "
        "and it answers from what it gathered (status limit_reached). The same in every graph."))] = 2
    reflection: Annotated[ReflectionMode, Field(description=(
        "Self-check after each round: 'llm' (structured verdict from the model), 'rules' (deterministic "
        "checks, no model call), 'inline' (the model's verdict carried by its next think reply, beside its tool "
        "calls or answer: no extra call) or 'off'."))] = "llm"
    closing_check: Annotated[bool, Field(description=(
        "Close each answer with one self-check call: the model names the question's parts and those its answer "
        "leaves unanswered (status partial / no_answer). Skipped when a reflection verdict already named the "
        "parts. Off: no extra call, and the coverage is marked 'unchecked'."))] = True
    allowed_tools: Annotated[list[ToolLabel] | None, Field(max_length=100, description=(
        "Tool names or tags this run may use; empty/None allows every enabled tool."))] = None
    denied_tools: Annotated[tuple[ToolLabel, ...], Field(max_length=100, description=(
        "Tool names or tags this run may not use (wins over allowed_tools)."))] = ()
    approval: Annotated[dict[ToolLabel, ApprovalSetting] | None, Field(max_length=100, description=(
        "Per tool name or tag: 'always' (a person approves each call: the run pauses with an interrupt) or "
        "'never' (runs unasked). Overrides each tool's own setting; http_get and MCP tools ask by default. "
        "Empty keeps the tools' settings."))] = None
    approval_mode: Annotated[ApprovalMode, Field(description=(
        "How calls that need approval are asked about, as LangChain's HumanInTheLoopMiddleware does: 'batched' "
        "(one interrupt for a reply's calls, answered {'decisions': [...]} in order) or 'per_call' (one interrupt "
        "per call, in order, each answered with one decision)."))] = "batched"
    observation_budget: Annotated[int, Field(ge=200, le=100_000, description=(
        "Maximum characters of one tool result shown to the model; longer results are truncated."))] = 4000
    memory_window: Annotated[int, Field(ge=2, le=1000, description=(
        "Messages kept verbatim in the prompt; older ones are folded into a running summary."))] = 8
    temperature: Annotated[float, Field(ge=0.0, le=2.0, description="Sampling temperature of the model.")] = 0.0
    # One field for every reply's length: plans, reflections and summaries get a fixed share of it
    # (models/gateway.py), so a degenerate model stops early everywhere without a field per purpose.
    max_output_tokens: Annotated[int, Field(ge=16, le=100_000, description=(
        "Most tokens one model reply may have (sent as max_tokens); plans, reflections and summaries get half. "
        "A reply cut there is marked truncated."))] = 1024
    system_prompt: Annotated[str, Field(max_length=20_000, description=(
        "System prompt of the think step."))] = prompts.SYSTEM_PROMPT
    # Plan-and-Solve only; off by default so the classic static plan stays measurable against replanning.
    replan: Annotated[bool, Field(description=(
        "Plan-and-Solve: after a failed or surprising step, revise the remaining steps. Off: the plan made "
        "at the start is carried out as it is. (There, max_iterations counts executed plan steps.)"))] = False
    # Budgets (None: no budget). When one runs out the run wraps up from what it gathered (status budget_exhausted).
    max_tool_calls: Annotated[int | None, Field(ge=0, le=10_000, description=(
        "Budget: tool calls allowed per question (0: answer without tools); the calls of a reply that do not "
        "fit are not run. Empty means no budget."))] = None
    max_model_tokens: Annotated[int | None, Field(ge=1, le=100_000_000, description=(
        "Budget: model tokens (prompt + completion, from the provider's usage, else estimated) per question. "
        "Empty means no budget."))] = None
    max_cost_usd: Annotated[float | None, Field(gt=0, le=10_000, description=(
        "Budget: model cost in USD per question, from the price table (nodes/budget.py, extended by "
        "$REACTGRAPH_PRICES); a model without a price counts 0. Empty means no budget."))] = None

    max_model_seconds: Annotated[float | None, Field(gt=0, le=86_400, description=(
        "Budget: seconds spent waiting for model replies per question (failed calls included). Empty means no "
        "budget."))] = None

    # Tried in order once the retry policy gives up on the model in use (models/gateway.py).
    fallback_models: Annotated[tuple[ModelSpec, ...], Field(max_length=MAX_FALLBACK_MODELS, description=(
        "Model specs (as for model, at most 5) tried in order when the model in use fails for good, after its "
        "retries: the first that answers stands in for the rest of the question; the steps record the switch. "
        "Empty: none."))] = ()

    mcp_config: Annotated[str, Field(max_length=4096, description=(
        "Path of an MCP config file ({\"mcpServers\": {name: {...}}}, as for `--mcp`) whose servers' tools this "
        "run may use: started on the first run that names it, then kept; runs that do not name it do not see "
        "them. Empty: only the graph's own tools."))] = ""

    def __post_init__(self) -> None:
        # A plain "" default (not a factory) so Studio's form shows it; resolved here, once per run.
        if isinstance(self.model, str):
            self.model = self.model.strip() or _env_model()
        # JSON (the HTTP API, Studio) has no tuples: a list of names is taken for either sequence field.
        if isinstance(self.denied_tools, list) or self.denied_tools is None:
            self.denied_tools = tuple(self.denied_tools or ())
        if isinstance(self.fallback_models, list) or self.fallback_models is None:
            self.fallback_models = tuple(self.fallback_models or ())
        if isinstance(self.fallback_models, tuple) and all(isinstance(spec, str) for spec in self.fallback_models):
            self.fallback_models = tuple(spec.strip() for spec in self.fallback_models)
        if isinstance(self.allowed_tools, tuple):
            self.allowed_tools = list(self.allowed_tools)
        # Catch bad values at construction (CLI flags, Studio form, API mapping) rather than deep inside a run.
        problems = [problem for name in _field_checks() if (problem := _check_field(self, name))]
        if problems:
            raise InvalidContext("; ".join(problems))


@cache
def _field_checks() -> dict[str, tuple[TypeAdapter[Any], str]]:
    """Per field: a strict validator built from its annotation (the same bounds Studio's form shows) and a
    phrase saying what it accepts. Strict: JSON true is no 1, "5" no 5 (a form sends typed values)."""
    hints = get_type_hints(Context, include_extras=True)
    strict = ConfigDict(strict=True)
    return {f.name: (TypeAdapter(hints[f.name], config=strict), _accepted(hints[f.name])) for f in fields(Context)}


def _accepted(annotation: Any) -> str:
    """What a field accepts, in words, from its type and bounds (`Field(ge=…, le=…, max_length=…)`)."""
    base, *extras = get_args(annotation) if get_origin(annotation) is Annotated else (annotation,)
    constraints = [item for info in extras for item in getattr(info, "metadata", ())]
    ge, gt, le, most = (next((getattr(c, key) for c in constraints if hasattr(c, key)), None)
                        for key in ("ge", "gt", "le", "max_length"))
    span = f" from {ge:g} to {le:g}" if ge is not None and le is not None else f" of at least {ge:g}" if ge else ""
    span = f" above {gt:g} and at most {le:g}" if gt is not None and le is not None else span
    options = get_args(base)
    if get_origin(base) in (Union, UnionType) and type(None) in options and {int, float} & set(options):
        number = "an integer" if int in options else "a number"
        return f"{number}{span}, or null for no budget"
    if get_origin(base) is Literal:
        return "one of " + ", ".join(repr(option) for option in options)
    if base is bool:
        return "true or false"
    if base in (int, float):
        return ("an integer" if base is int else "a number") + span
    if base is str:
        return f"text of at most {most:,} characters" if most else "text"
    nullable = get_origin(base) is Union and type(None) in options
    if any(get_origin(option) is dict for option in options):
        return ("a mapping from tool names or tags (1 to 100 characters, at most 100) to 'always' or 'never', "
                "or null")
    if base == tuple[ModelSpec, ...]:
        return f"a list of model specs (at most {most}), each 1 to 200 characters"
    limit = f" (at most {most})" if most else ""
    return (f"a list of tool names or tags{limit}, each 1 to 100 characters"
            + (", or null for every enabled tool" if nullable else ""))


def _check_field(context: Context, name: str) -> str:
    """"" when the field's value is accepted, else one clause naming the field, the value and what is accepted."""
    adapter, accepted = _field_checks()[name]
    value = getattr(context, name)
    try:
        adapter.validate_python(value)
    except ValidationError:
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:59] + "…"
        return f"Context.{name} = {shown} is not accepted: expected {accepted}"
    return ""


def resolve_context(value: Context | Mapping[str, Any] | None) -> Context:
    """A run's Context from what the caller passed: defaults for None, coerced from a mapping (the HTTP API
    sends JSON; LangGraph coerces a dict itself, older releases and direct callers may not)."""
    if isinstance(value, Context):
        return value
    if value is None:
        return Context()
    if isinstance(value, Mapping):
        known = {f.name for f in fields(Context)}
        if unknown := sorted(str(key) for key in value if key not in known):
            raise InvalidContext(f"unknown Context field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return Context(**value)
    raise TypeError(f"context must be a Context or a mapping of its fields, not {type(value).__name__}")


def context_of(runtime: Runtime[Context]) -> Context:
    """The running graph's Context (see `resolve_context`); the one place a node or router reads it from."""
    return resolve_context(runtime.context)


class UnknownToolNames(ReactGraphError, UserWarning):
    """allowed_tools / denied_tools / approval name something that is neither a tool nor a tag of the gateway."""


def unknown_tool_names(context: Context, tools: Iterable[Any]) -> str:
    """"" when every name in allowed_tools / denied_tools / approval is a tool's name or tag among `tools` (ToolMetas),
    else one line naming the unknown ones and listing the known tools and tags."""
    tools = list(tools)
    names = {meta.name for meta in tools}
    tags = {tag for meta in tools for tag in meta.tags} - names
    unknown = [f"{field} {label!r}" for field, labels in (("allowed_tools", context.allowed_tools or ()),
                                                          ("denied_tools", context.denied_tools),
                                                          ("approval", tuple(context.approval or ())))
               for label in labels if label not in names and label not in tags]
    if not unknown:
        return ""
    return (f"{', '.join(unknown)}: not a tool or a tag; tools: {', '.join(sorted(names)) or 'none'}; "
            f"tags: {', '.join(sorted(tags)) or 'none'}")
