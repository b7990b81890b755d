"""The model gateway: every model request of a run, the twin of the tool gateway.

A node asks for a model call with a `ModelCall` — what it is for (`purpose`), the messages, the tools to bind,
the schema of a structured reply, stop sequences, a bound on the reply's length — and gets a `ModelReply`: the
message, the parsed value, what the call used, the model that answered and the fallbacks taken on the way. Its
policies run in one order, the same under `invoke` and `ainvoke` (only the request itself is awaited or not):

1. **model** — the run's model, or the fallback that took over earlier in the turn (`ModelTurn.spec`);
2. **bound** — replies of at most `max_output_tokens` (structured replies of the project's own: half of it),
   the tools bound, the schema's structured output, the stop sequences;
3. **request** — `invoke`, or `ainvoke`; the agent's request through its LangChain middleware (models/middleware.py);
4. **usage** — the reply's tokens (the provider's count, else the one estimate), their cost from the price
   table, and the seconds waited (a failed call's too: a timeout spends the model-time budget), added to the
   node's `ModelTurn.usage`;
5. **retry** — a transient error while the node has attempts left is raised for LangGraph's `RetryPolicy`,
   which runs the node again after a pause, from its checkpoint (`model_retry_policy`);
6. **fallback** — an error for good (after the retries, or not transient) with a `Context.fallback_models`
   entry left: that model takes over for the rest of the turn and the request is made again, from step 1,
   without running the node's body again; each switch is a `Fallback` on the reply;
7. **failure** — an error with nothing left goes to the node's own handling (`ModelFailure` carries it out).

**Budget**: the reply carries the turn's usage after it (`turn_usage`), which the nodes and routers hold
against the Context's budgets; the gateway never refuses a call itself: the graph decides where a turn ends
and how its answer is worded. `purpose` is recorded on the request's run (metadata `reactgraph_purpose`,
models/purpose.py) for tracing and for models of our own to read (no provider sends run metadata over the wire),
and on log records. Nothing here reads a prompt's text.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolCall
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.constants import TAG_NOSTREAM
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from langgraph.types import RetryPolicy
from typing_extensions import TypedDict

from reactgraph.errors import ReactGraphError
from reactgraph.models.loader import (
    ModelConfigError,
    UnloadableModel,
    describe_model_error,
    env_number,
    is_transient_model_error,
    load_chat_model,
    node_retries_for,
    structured_runnable,
    without_tool_use,
)
from reactgraph.models.prices import price_of
from reactgraph.models.purpose import MAX_STEPS_METADATA, PLAN_STEPS_METADATA, PURPOSE_METADATA, VERDICT_BLOCK_METADATA
from reactgraph.models.response_format import ResponseFormat
from reactgraph.models.token_estimate import usage_for

logger = logging.getLogger(__name__)

# What a model call is for: tracing and budgets read it, never the prompt's text.
Purpose = Literal["summarize", "think", "reflect", "answer", "check", "respond", "plan", "replan", "step",
                  "evaluate", "lesson"]
STRUCTURED_SHARE = 2  # plans, reflections, lessons and summaries: at most half a reply's tokens
FALLBACK_EVENT = "reactgraph.model_fallback"  # the callback event of a switch (graph/run_spans.py records it)


# --- what goes in, what comes out ------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModelCall:
    """One model request a node body asks for: `reply = yield from ModelCall(...)` (see nodes/driver.py).

    `schema`: a structured reply (a pydantic model or JSON schema of the project's own, or a caller's
    `ResponseFormat`); `tool_choice="none"`: the tools are defined but may not be called (a closing reply over a
    conversation that holds tool calls); `advisory`: a failure goes straight to the node (no re-run of the node,
    no fallback): the call is worth less than repeating what the node did before it."""

    purpose: Purpose
    messages: Sequence[BaseMessage]
    tools: Sequence[dict[str, Any]] = ()
    schema: type | dict[str, Any] | ResponseFormat | None = None
    stop: tuple[str, ...] = ()
    max_output_tokens: int | None = None
    tool_choice: str = "auto"  # or "none"; a middleware may force one ("any", "required", a tool's name)
    advisory: bool = False
    plan_steps: tuple[str, ...] = ()  # a Plan-and-Solve step: the plan's goals up to the one under way (run metadata)
    max_steps: int | None = None  # a plan or its revision: the most steps it may have (run metadata)
    verdict_block: tuple[str, ...] = ()  # text protocol: the fields of the verdict block the reply should begin with
    model_settings: Mapping[str, Any] = field(default_factory=dict)  # a middleware's extra model arguments

    def __iter__(self) -> Generator[ModelCall, Any, ModelReply]:
        return (yield self)


def sendable(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The request's messages as a provider takes them back. A model's malformed tool call (arguments that are not
    JSON: LangChain's `invalid_tool_calls`) goes back as the same call with empty arguments; its error already is
    the call's tool message. Sent as it came, the broken arguments make a server such as llama.cpp's answer every
    later request of the run with a 500 ("Failed to parse tool call arguments as JSON")."""
    out: list[BaseMessage] = []
    for message in messages:
        if isinstance(message, AIMessage) and message.invalid_tool_calls:
            repaired = [ToolCall(name=bad.get("name") or "invalid_tool_call", args={}, id=bad.get("id") or "",
                                 type="tool_call") for bad in message.invalid_tool_calls]
            raw = {k: v for k, v in message.additional_kwargs.items() if k != "tool_calls"}  # the provider's own copy
            message = message.model_copy(update={"tool_calls": [*message.tool_calls, *repaired],
                                                 "invalid_tool_calls": [], "additional_kwargs": raw})
        out.append(message)
    return out


class Usage(TypedDict, total=False):
    """What a turn has used so far; every key adds up across the nodes of the turn (the `usage` channel)."""

    tool_calls: int
    tool_calls_refused: int  # calls answered "not run" because a budget did not allow them
    input_tokens: int
    output_tokens: int
    cost_usd: float
    model_seconds: float  # time spent waiting for model calls, failed ones included


@dataclass(frozen=True)
class Fallback:
    """A switch to a fallback model: which model failed and why, and which one answers from then on."""

    failed: str
    model: str
    error: str


@dataclass(frozen=True)
class ModelReply:
    """What a model call came to: the reply message (a structured call's raw reply), the parsed value and why
    there is none, what the call used, the turn's usage after it, the model that answered, the switches made."""

    message: AIMessage | None
    parsed: Any = None
    parsing_error: BaseException | None = None
    usage: Usage = field(default_factory=lambda: Usage())
    turn_usage: Usage = field(default_factory=lambda: Usage())
    model: str = ""
    fallbacks: tuple[Fallback, ...] = ()


class ModelRefusal(ReactGraphError):
    """The model declined the request (OpenAI's `refusal` in place of content): a failed call, whose line is what
    the model said. Not retried and no fallback is asked: a refusal is the model's answer to this request."""


class ModelFailure(ReactGraphError):
    """A model call failed for good; the node driver throws `error` into the node's body."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class RunSettings(Protocol):
    """What the gateway reads of a run's Context."""

    @property
    def model(self) -> str: ...
    @property
    def temperature(self) -> float: ...
    @property
    def max_output_tokens(self) -> int: ...
    @property
    def protocol(self) -> str: ...
    @property
    def fallback_models(self) -> tuple[str, ...]: ...


@dataclass
class ModelTurn:
    """One node run's model calls: the model in use (`spec`: a fallback once one took over), the node's
    attempt and retry policy, the turn's usage before the node (`spent`), what its calls used, the switches."""

    settings: RunSettings
    node: str
    retry: RetryPolicy | None = None
    attempt: int | None = None  # LangGraph's count of the node's runs (None: it does not count them)
    spec: str | None = None
    spent: Usage = field(default_factory=lambda: Usage())
    usage: Usage = field(default_factory=lambda: Usage())
    fallbacks: list[Fallback] = field(default_factory=list)
    # The node's state and runtime, for the middleware that wrap the agent's model request (models/middleware.py).
    state: Any = None
    runtime: Any = None


# --- usage ------------------------------------------------------------------------------------------------------

def add_usage(left: Mapping[str, Any] | None, right: Mapping[str, Any] | None) -> Usage:
    """The reducer of the `usage` channel: the sum of two usages, key by key."""
    total: dict[str, Any] = dict(left or {})
    for key, value in (right or {}).items():
        total[key] = round(total.get(key, 0) + value, 9) if isinstance(value, float) else total.get(key, 0) + value
    return Usage(**total)  # type: ignore[typeddict-item]


def reply_usage(messages: Sequence[BaseMessage], reply: AIMessage | None, spec: str) -> Usage:
    """A reply's tokens — its `usage_metadata`, else the one estimate over prompt and reply, written onto the
    reply so that its step records it too — and their cost at `spec`'s price."""
    if reply is None:
        return Usage()
    metadata: dict[str, Any] = dict(reply.usage_metadata or {})
    if not metadata.get("total_tokens"):
        reply.usage_metadata = usage_for(list(messages), reply)
        metadata = dict(reply.usage_metadata)
    tokens_in, tokens_out = int(metadata.get("input_tokens") or 0), int(metadata.get("output_tokens") or 0)
    tokens_in = tokens_in or max(int(metadata.get("total_tokens") or 0) - tokens_out, 0)
    price = price_of(spec) or (0.0, 0.0)
    cost = (tokens_in * price[0] + tokens_out * price[1]) / 1_000_000
    return Usage(input_tokens=tokens_in, output_tokens=tokens_out, cost_usd=round(cost, 9))


# --- retry: LangGraph's RetryPolicy runs the node again ---------------------------------------------------------
# Two layers, outermost last: the provider SDK retries a call a few times within seconds
# (REACTGRAPH_MODEL_RETRIES); when the error outlasts that, the node raises it and LangGraph runs the node again
# after a longer pause (REACTGRAPH_NODE_RETRIES times, the first after REACTGRAPH_NODE_RETRY_DELAY seconds,
# doubling up to a minute). While it waits the run is unfinished, so a process that dies meanwhile leaves a
# checkpoint the run resumes from. Some errors get fewer re-runs (loader.node_retries_for).

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


def attempt_of(runtime: Runtime[Any]) -> int | None:
    """This run of the node: 1, then 2, 3 … on LangGraph's retries (None where the runtime does not say)."""
    info = runtime.execution_info
    return info.node_attempt if info is not None else None


def _left_to_retry(turn: ModelTurn, exc: Exception) -> bool:
    """Whether the node should raise `exc` for LangGraph to run it again (attempts are left and it matches).
    Without an attempt count the node cannot tell its last attempt, so it never raises."""
    policy = turn.retry
    if policy is None or turn.attempt is None:
        return False
    attempts = policy.max_attempts
    if (retries := node_retries_for(exc, turn.settings.temperature)) is not None:
        attempts = min(attempts, retries + 1)
    return turn.attempt < attempts and _matches(policy, exc)


def _log_retry(turn: ModelTurn, call: ModelCall, failure: Exception) -> None:
    """A transient model error the node is run again for: a WARNING with the attempt."""
    if logger.isEnabledFor(logging.WARNING) and turn.retry is not None and turn.attempt is not None:
        logger.warning("%s: transient model error, the node runs again (attempt %d of %d)", turn.node,
                       turn.attempt + 1, turn.retry.max_attempts,
                       extra={"retry": {"node": turn.node, "attempt": turn.attempt, "next_attempt": turn.attempt + 1,
                                        "max_attempts": turn.retry.max_attempts, "purpose": call.purpose,
                                        "error": describe(failure)}})


def describe(exc: BaseException) -> str:
    """The exception as one short line: its type and the start of its message (never its arguments' values)."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - an exception whose __str__ fails is still described, by its type
        text = ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


_FAILED_MODEL = "_reactgraph_failed_model"


def failure_line(exc: BaseException, runtime: Runtime[Any], *, name_model: bool = True) -> str:
    """The one line a failed run ends with: why the model call failed (with the failed model's endpoint and
    retries when `name_model`), and how many node attempts it got."""
    reason = describe_model_error(exc, getattr(exc, _FAILED_MODEL, None) if name_model else None)
    attempts = attempt_of(runtime) or 1
    return f"{reason} (gave up after {attempts} attempts)" if attempts > 1 else reason


# --- fallback: the next model in Context.fallback_models takes over ---------------------------------------------

def _next_model(turn: ModelTurn, failure: Exception) -> str | None:
    """The fallback after the model in use, or None (none left, or an interrupt, which is no failure)."""
    if isinstance(failure, GraphBubbleUp):
        return None
    specs = list(dict.fromkeys(turn.settings.fallback_models))  # each once: a repeat would be tried forever
    if turn.spec is not None and turn.spec in specs:
        specs = specs[specs.index(turn.spec) + 1:]
    return specs[0] if specs else None


def _label(model: Any, turn: ModelTurn) -> str:
    """The model's name: the run's spec, unless the graph was given a model object of another name."""
    if turn.spec is not None:
        return turn.spec
    spec = turn.settings.model
    name = str(getattr(model, "model_name", None) or getattr(model, "model", None) or "")
    if not isinstance(model, BaseChatModel) or spec.endswith(f":{name}"):
        return spec
    return name or type(model).__name__


def _switch(turn: ModelTurn, call: ModelCall, model: Any, failure: Exception, spec: str) -> None:
    """The fallback takes over for the rest of the turn; the node is not run again for it (its attempts were
    the failed model's)."""
    switch = Fallback(failed=_label(model, turn), model=spec, error=describe(failure))
    turn.fallbacks.append(switch)
    turn.spec, turn.retry = spec, None
    if logger.isEnabledFor(logging.WARNING):
        reason = f"{switch.failed} failed ({switch.error}); {spec} takes over"
        logger.warning("%s fell back: %s (%s)", turn.node, "model_fallback", reason,
                       extra={"fallback": {"node": turn.node, "kind": "model_fallback", "reason": reason,
                                           "purpose": call.purpose}})


# --- the gateway --------------------------------------------------------------------------------------------------

class ModelGateway:
    """Every model request of one compiled graph's nodes; a model per (spec, temperature), each derived runnable
    (bounded, with tools, structured) built once and reused across runs."""

    def __init__(self, model: BaseChatModel | None = None, retry: RetryPolicy | None = None,
                 wraps: Any = None) -> None:
        # An explicit model (tests' scripted models, a user's configured client) stands for Context.model.
        self.fixed_model = model
        self.wraps = wraps  # LangChain middleware around the agent's model request (a models/middleware.ModelWraps)
        self.retry = retry if retry is not None else model_retry_policy()
        self._models: dict[tuple[str, float], BaseChatModel] = {}
        # Keyed by object ids; the objects are kept alongside, so an id is never reused while it is a key.
        self._derived: dict[tuple[Any, ...], tuple[Any, Runnable]] = {}

    def invoke(self, call: ModelCall, turn: ModelTurn, config: RunnableConfig | None = None) -> ModelReply:
        """The call made with sync requests (the policies in the module's order)."""
        while True:
            model, started = self._model(turn), time.perf_counter()
            try:
                output = self._send(model, call, turn, config)
            except Exception as exc:  # noqa: BLE001 - to the retry, fallback and failure steps
                self._failed(call, turn, model, exc, started)
                continue
            return self._reply(call, turn, model, output, started)

    async def ainvoke(self, call: ModelCall, turn: ModelTurn,
                      config: RunnableConfig | None = None) -> ModelReply:
        """The call made with awaited requests (the same policies, in the same order)."""
        while True:
            model, started = self._model(turn), time.perf_counter()
            try:
                output = await self._asend(model, call, turn, config)
            except Exception as exc:  # noqa: BLE001 - to the retry, fallback and failure steps
                self._failed(call, turn, model, exc, started)
                continue
            return self._reply(call, turn, model, output, started)

    # 3. request (through the agent's middleware, for the purposes they wrap)
    def _send(self, model: BaseChatModel, call: ModelCall, turn: ModelTurn, config: RunnableConfig | None) -> Any:
        def send(chosen: BaseChatModel, asked: ModelCall) -> Any:
            runnable, request_config = self._runnable(chosen, asked, turn, config)
            return runnable.invoke(sendable(asked.messages), request_config)
        if self.wraps is None or not self.wraps.applies(call.purpose):
            return send(model, call)
        return self.wraps.invoke(model, call, turn.state, turn.runtime, send)

    async def _asend(self, model: BaseChatModel, call: ModelCall, turn: ModelTurn,
                     config: RunnableConfig | None) -> Any:
        async def send(chosen: BaseChatModel, asked: ModelCall) -> Any:
            runnable, request_config = self._runnable(chosen, asked, turn, config)
            return await runnable.ainvoke(sendable(asked.messages), request_config)
        if self.wraps is None or not self.wraps.applies(call.purpose):
            return await send(model, call)
        return await self.wraps.ainvoke(model, call, turn.state, turn.runtime, send)

    # 1. model
    def _model(self, turn: ModelTurn) -> BaseChatModel:
        """The model in use: the graph's own model object or the run's spec, or the fallback that took over."""
        if self.fixed_model is not None and turn.spec is None:
            return self.fixed_model
        key = (turn.spec or turn.settings.model, turn.settings.temperature)
        if key not in self._models:
            try:
                self._models[key] = load_chat_model(*key)
            except ModelConfigError as exc:
                if not (turn.settings.fallback_models or turn.spec):
                    raise  # no model at all: the run cannot start (not a failed call for the node to handle)
                # With fallbacks, a model that cannot be loaded fails its calls as one that cannot be reached does.
                return UnloadableModel(model_name=key[0], error=exc)
        return self._models[key]

    # 2. bound
    def _runnable(self, model: BaseChatModel, call: ModelCall, turn: ModelTurn,
                  config: RunnableConfig | None) -> tuple[Runnable, RunnableConfig]:
        """The model bounded, with the call's tools, schema and stop sequences; and the node's config with the
        request's metadata (its purpose, read by tracing and the scripted models) added as `with_config` would add
        it, the config's own keys winning, without the binding layer that merged the whole config again per call."""
        settings = turn.settings
        if call.max_output_tokens is not None:
            limit = call.max_output_tokens
        elif call.schema is not None and not isinstance(call.schema, ResponseFormat):
            limit = max(16, settings.max_output_tokens // STRUCTURED_SHARE)
        else:  # a caller's response format restates a whole answer: a whole reply's tokens
            limit = settings.max_output_tokens
        bounded = self._bounded(model, limit)
        runnable: Runnable
        if call.schema is not None:
            runnable = self._structured(bounded, call.schema, settings.protocol == "text")
        elif call.tool_choice == "none":
            runnable = without_tool_use(bounded, list(call.tools))
        elif call.tools:
            tools, choice = list(call.tools), call.tool_choice
            runnable = self._derive(("tools", id(bounded), choice, *map(id, tools)), (bounded, tools),
                                    lambda: bounded.bind_tools(tools) if choice == "auto"
                                    else bounded.bind_tools(tools, tool_choice=choice))
        else:
            runnable = bounded
        if call.model_settings:
            runnable = runnable.bind(**call.model_settings)
        if call.stop:
            runnable = runnable.bind(stop=list(call.stop))
        extra = ((PLAN_STEPS_METADATA, list(call.plan_steps)), (VERDICT_BLOCK_METADATA, list(call.verdict_block)),
                 (MAX_STEPS_METADATA, call.max_steps))
        config = config or {}
        metadata = {PURPOSE_METADATA: call.purpose, **{key: value for key, value in extra if value},
                    **(config.get("metadata") or {})}
        return runnable, {**config, "metadata": metadata}

    def _bounded(self, model: BaseChatModel, limit: int) -> BaseChatModel:
        """The model with replies of at most `limit` tokens; one without that setting (a scripted test model)
        as it is."""
        if "max_tokens" not in type(model).model_fields:
            return model
        return cast(BaseChatModel, self._derive(("bounded", id(model), limit), model,
                                                lambda: model.model_copy(update={"max_tokens": limit})))

    def _structured(self, model: BaseChatModel, schema: Any, text_protocol: bool) -> Runnable:
        """The model's structured output, raw reply included, unstreamed. In the text protocol the model is asked
        for JSON in its text (it may offer no tool calling or JSON schema); a caller's response format only with
        its automatic strategy."""
        if isinstance(schema, ResponseFormat):
            plain = text_protocol and schema.strategy == "auto"
            return self._derive(("response", id(model), id(schema), plain), (model, schema),
                                lambda: (structured_runnable(_unstreamed(model), schema.json_schema, plain_json=True)
                                         if plain else schema.runnable(_unstreamed(model)))
                                .with_config(tags=[TAG_NOSTREAM]))
        key = ("structured", id(model), id(schema) if isinstance(schema, dict) else schema, text_protocol)
        return self._derive(key, (model, schema),
                            lambda: structured_runnable(_unstreamed(model), schema, plain_json=text_protocol)
                            .with_config(tags=[TAG_NOSTREAM]))  # nor is the whole reply a `messages` event

    def _derive(self, key: tuple[Any, ...], keep: Any, build: Any) -> Runnable:
        cached = self._derived.get(key)
        if cached is None:
            cached = self._derived[key] = (keep, build())
        return cached[1]

    # 4. usage (a failed call's seconds), 5. retry, 6. fallback, 7. failure
    def _failed(self, call: ModelCall, turn: ModelTurn, model: Any, failure: Exception, started: float) -> None:
        """A failed request: raised for LangGraph's retry, or a fallback takes over (the caller asks again), or
        `ModelFailure` for the node."""
        turn.usage = add_usage(turn.usage, Usage(model_seconds=round(time.perf_counter() - started, 6)))
        if not call.advisory and _left_to_retry(turn, failure):
            _log_retry(turn, call, failure)
            raise failure
        if not call.advisory and (spec := _next_model(turn, failure)):
            _switch(turn, call, model, failure, spec)
            return
        # The failed model names the endpoint and its retries in the node's one line (failure_line).
        with contextlib.suppress(AttributeError, TypeError):
            setattr(failure, _FAILED_MODEL, model)
        raise ModelFailure(failure) from failure

    # 4. usage
    def _reply(self, call: ModelCall, turn: ModelTurn, model: Any, output: Any, started: float) -> ModelReply:
        message: AIMessage | None
        if isinstance(output, AIMessage):
            message, parsed, error = output, None, None
        elif isinstance(output, Mapping):
            raw = output.get("raw")
            message = raw if isinstance(raw, AIMessage) else None
            parsed, error = output.get("parsed"), output.get("parsing_error")
        else:
            message, parsed, error = None, output, None
        used = add_usage(reply_usage(call.messages, message, turn.spec or turn.settings.model),
                         Usage(model_seconds=round(time.perf_counter() - started, 6)))
        turn.usage = add_usage(turn.usage, used)  # a refusal's tokens are spent too
        if refusal := refusal_of(message):
            raise ModelFailure(ModelRefusal(f"the model declined to answer: {refusal}"))
        return ModelReply(message=message, parsed=parsed, parsing_error=error, usage=used,
                          turn_usage=add_usage(turn.spent, turn.usage), model=_label(model, turn),
                          fallbacks=tuple(turn.fallbacks))


def refusal_of(message: AIMessage | None) -> str | None:
    """What the model said in declining (OpenAI's `refusal`, which LangChain keeps beside an empty content), on one
    line and bounded; None for a reply with content or tool calls."""
    if message is None or message.content or message.tool_calls:
        return None
    refusal = (message.additional_kwargs or {}).get("refusal")
    return " ".join(str(refusal).split())[:300] or None if refusal else None


def _unstreamed(model: BaseChatModel) -> BaseChatModel:
    """The model with token streaming off, for structured output: its tokens are JSON, not text to show, and
    langchain-openai's streamed structured path (`beta.chat.completions.stream`) model_dump()s each event, which
    makes pydantic warn on stderr (PydanticSerializationUnexpectedValue, field `parsed`). Unstreamed, the
    reply is parsed once, warning-free, and the verdict is shown as its note (reactgraph/cli/console_view.py)."""
    return model.model_copy(update={"disable_streaming": True}) if isinstance(model, BaseChatModel) else model
