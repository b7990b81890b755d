"""A run request's body turned into what the graph is called with, checked at create time under the operator's
run policy: a bad run is a 422 (or 403) with one line, never a queued run that fails later.

Each run option langgraph-sdk sends is honoured or refused naming it, never taken and then ignored. The
operator is trusted, a client is not: a client's `context` never names a process, a file or an environment
variable (only the operator's MCP servers), never picks a model off the list, never replaces the system prompt
unless allowed, never loosens approval and never passes the operator's caps. The worker builds the same call
from the stored kwargs and applies the policy again, since a run record in Redis is untrusted too.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from langgraph.channels.delta import DeltaChannel
from langgraph.types import Command

from reactgraph.errors import ReactGraphError
from reactgraph.memory.redis_checkpoint.reading import delta_value
from reactgraph.nodes import prompts
from reactgraph.nodes.context import Context, InvalidContext, resolve_context
from reactgraph.service.auth import AUTH_KEYS, AuthUser
from reactgraph.service.records import STRATEGIES, RunKwargs
from reactgraph.service.wire import BadRequest, field

DURABILITIES = ("sync", "async", "exit")
MAX_AFTER_SECONDS = 7 * 24 * 3600  # a run scheduled further out is a cron's job (the /info flags say crons: false)
MAX_TAGS = 64
# Refused rather than honoured, each with why (docs/serving.md lists them).
REFUSED = {
    "webhook": "webhooks are not sent by reactgraph serve (a client-chosen URL fetched by the worker is the "
               "operator's to allow, and there is no setting for it yet); poll the run or join its stream",
    "feedback_keys": "LangSmith feedback URLs are not made by reactgraph serve (the /info flags say langsmith: "
                     "false)",
    "langsmith_tracer": "runs are not traced to LangSmith by reactgraph serve (the /info flags say langsmith: false)",
}
# What a run's `config` may hold beside `configurable`; the rest of RunnableConfig is the service's to set.
_CONFIG_KEYS = ("configurable", "recursion_limit", "tags", "metadata", "run_name", "max_concurrency")


def refuse_unserved(body: Mapping[str, Any]) -> None:
    """A 422 naming the first option of REFUSED the body gives (an empty or null one is not given)."""
    for name, why in REFUSED.items():
        if body.get(name) not in (None, "", [], {}):
            raise BadRequest(422, f"{name!r} is refused: {why}")


class RunOptions(TypedDict):
    """The run options stored with its kwargs (records.RunKwargs)."""

    durability: str  # one of DURABILITIES
    checkpoint_during: bool
    after_seconds: float
    strict_resume: bool


def run_options(body: Mapping[str, Any]) -> RunOptions:
    """`durability`, `after_seconds` and `strict_resume` as stored with the run's kwargs."""
    durability = field(body, "durability", str)
    if durability is None:  # as langgraph-api reads the older flag: False is "exit"
        durability = "exit" if field(body, "checkpoint_during", bool) is False else "async"
    if durability not in DURABILITIES:
        raise BadRequest(422, f"'durability' must be one of {', '.join(DURABILITIES)}, got {durability!r}")
    after = field(body, "after_seconds", (int, float), 0)
    if not 0 <= after <= MAX_AFTER_SECONDS:  # NaN fails this too
        raise BadRequest(422, f"'after_seconds' must be from 0 to {MAX_AFTER_SECONDS}, got {after!r}")
    return {"durability": durability, "checkpoint_during": durability != "exit", "after_seconds": after,
            "strict_resume": bool(field(body, "strict_resume", bool, False))}


def on_disconnect(body: dict[str, Any]) -> str:
    chosen = field(body, "on_disconnect", str, "continue")
    if chosen not in ("continue", "cancel"):
        raise BadRequest(422, f"'on_disconnect' must be continue or cancel, got {chosen!r}")
    return chosen


def background(body: dict[str, Any]) -> None:
    """A background run holds no connection that could go: `on_disconnect="cancel"` would mean nothing."""
    if on_disconnect(body) == "cancel":
        raise BadRequest(422, "'on_disconnect' cancel is for a run streamed or waited on; a background run "
                              "(runs.create) holds no connection: cancel it with runs.cancel")


def on_completion(body: dict[str, Any]) -> str:
    chosen = field(body, "on_completion", str, "delete")
    if chosen not in ("delete", "keep"):
        raise BadRequest(422, f"'on_completion' must be delete or keep, got {chosen!r}")
    return chosen


def config_extras(config: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of a run's `config` that reach the graph's RunnableConfig beside `configurable` and
    `recursion_limit`: `tags`, `metadata`, `run_name`, `max_concurrency`; any other key is a 422 naming it."""
    unknown = sorted(str(key) for key in config if key not in _CONFIG_KEYS)
    if unknown:
        raise BadRequest(422, f"'config' takes {', '.join(_CONFIG_KEYS)}; got {', '.join(map(repr, unknown[:10]))}")
    extras: dict[str, Any] = {}
    tags = field(config, "tags", list)
    if tags is not None:
        if len(tags) > MAX_TAGS or not all(isinstance(tag, str) and len(tag) <= 200 for tag in tags):
            raise BadRequest(422, f"'config.tags' must be at most {MAX_TAGS} strings of 200 characters")
        extras["tags"] = tags
    if (metadata := field(config, "metadata", dict)) is not None:
        extras["metadata"] = metadata
    if (name := field(config, "run_name", str)) is not None:
        extras["run_name"] = name[:200]
    concurrency = field(config, "max_concurrency", int)
    if concurrency is not None:
        if not 1 <= concurrency <= 1000:
            raise BadRequest(422, f"'config.max_concurrency' must be from 1 to 1000, got {concurrency}")
        extras["max_concurrency"] = concurrency
    return extras


def check_nodes(graph: Any, kwargs: RunKwargs) -> None:
    """interrupt_before/after name nodes of the assistant's graph (LangGraph would ignore the others silently)."""
    nodes = sorted(name for name in graph.nodes if not name.startswith("__"))
    for name in ("interrupt_before", "interrupt_after"):
        named = kwargs.get(name)
        if isinstance(named, list) and (unknown := [node for node in named if node not in nodes]):
            raise BadRequest(422, f"'{name}' names no node of this graph: {', '.join(map(repr, unknown[:10]))}; "
                                  f"nodes: {', '.join(nodes)}")


async def check_checkpoint(checkpointer: Any, thread_id: str, checkpoint_id: str | None) -> None:
    """A run from a checkpoint must name one of the thread's (else LangGraph would start from nothing)."""
    if not checkpoint_id:
        return
    found = await checkpointer.aget_tuple(
        {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}})
    if found is None:
        raise BadRequest(422, f"'checkpoint_id' {checkpoint_id[:80]!r} is no checkpoint of thread {thread_id!r}")


def graph_options(kwargs: RunKwargs) -> dict[str, Any]:
    """What the worker passes to the graph's stream beside its input: the run's durability."""
    durability = kwargs.get("durability")
    return {"durability": durability if durability in DURABILITIES else "async"}


class UnknownInterruptError(ReactGraphError, ValueError):
    """A `strict_resume` run's resume answers no interrupt the thread waits on: the run fails before it starts."""


async def check_resume(graph: Any, config: Mapping[str, Any], command: Mapping[str, Any] | None) -> None:
    """Under `strict_resume`: an UnknownInterruptError unless the resume answers what waits — each id of a resume
    keyed by interrupt ids (as LangGraph reads such a map) is a waiting interrupt's, and a plain resume has one."""
    if not command or "resume" not in command:
        return
    snapshot = await graph.aget_state(dict(config))
    waiting = {interrupt.id for interrupt in snapshot.interrupts}
    resume = command["resume"]
    if isinstance(resume, dict) and resume and all(_interrupt_id(key) for key in resume):
        if unknown := sorted(set(resume) - waiting):
            raise UnknownInterruptError(f"the resume answers interrupts the thread does not wait on: "
                                        f"{', '.join(unknown[:10])}")
    elif not waiting:
        raise UnknownInterruptError("the resume answers an interrupt, but the thread waits on none")


def _interrupt_id(key: Any) -> bool:
    return isinstance(key, str) and len(key) == 32 and all(c in "0123456789abcdef" for c in key)


SECTION = "reactgraph"
CAPPED = ("max_iterations", "max_tool_calls", "max_model_tokens", "max_cost_usd")
# A production server has a ceiling even when the operator set none; null in langgraph.json lifts one.
DEFAULT_CAPS: dict[str, float | None] = {"max_iterations": 20, "max_tool_calls": 100,
                                         "max_model_tokens": 1_000_000, "max_cost_usd": 5.0}
# read elsewhere: quotas by reactgraph/service/quotas.py, ui (serve's debugger page) by reactgraph/ui/page.py
_KEYS = {"models", "allow_system_prompt", "approval", "limits", "mcp", "quotas", "ui"}
_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class PolicyRefusal(ReactGraphError, ValueError):
    """A run context the policy refuses: `status` 403 (not permitted) or 422 (malformed), one line naming the field."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class BadRunPolicy(ReactGraphError, ValueError):
    """A `reactgraph` section or flag the service cannot start with (one line naming the key)."""


def server_model() -> str:
    """The server's own model: $REACTGRAPH_MODEL, else the scripted offline model."""
    return os.environ.get("REACTGRAPH_MODEL", "").strip() or "offline"


@dataclass(frozen=True)
class RunPolicy:
    """The operator's choices for runs. `models[0]` is what a run without `model` gets."""

    models: tuple[str, ...] = dataclasses.field(default_factory=lambda: (server_model(),))
    allow_system_prompt: bool = False
    approval: Mapping[str, str] = dataclasses.field(default_factory=dict)  # operator's overrides, by tool name or tag
    caps: Mapping[str, float | None] = dataclasses.field(default_factory=lambda: dict(DEFAULT_CAPS))

    def run_context(self, context: Mapping[str, Any], gateway: Any) -> dict[str, Any]:
        """The Context fields a run gets for a client's `context`; a PolicyRefusal names the first refused field."""
        if not isinstance(context, Mapping):
            raise PolicyRefusal(422, "'context' must be an object of Context fields")
        chosen = dict(context)
        model = chosen.get("model")
        if isinstance(model, str) and model.strip():
            self._offered(model, "context.model")
        elif model is not None and not isinstance(model, str):
            raise PolicyRefusal(422, "'context.model' must be a model spec (text)")
        chosen["model"] = model.strip() if isinstance(model, str) and model.strip() else self.models[0]
        fallbacks = chosen.get("fallback_models")
        if isinstance(fallbacks, list | tuple):  # each one passes the same list (another type is Context's 422)
            for i, spec in enumerate(fallbacks):
                if isinstance(spec, str) and spec.strip():
                    self._offered(spec, f"context.fallback_models[{i}]")
        prompt = chosen.pop("system_prompt", None)
        if prompt is not None and prompt != prompts.SYSTEM_PROMPT:
            if not self.allow_system_prompt:
                raise PolicyRefusal(403, "'context.system_prompt' is fixed by this server's operator "
                                         "(allow_system_prompt is off)")
            chosen["system_prompt"] = prompt
        for name in CAPPED:
            cap, value = self.caps.get(name), chosen.get(name)
            if cap is None or (isinstance(value, bool) or (value is not None and not isinstance(value, int | float))):
                continue  # a wrong type is Context's to refuse (422)
            if value is None:
                if name != "max_iterations":  # an absent budget is the cap; max_iterations keeps its default
                    chosen[name] = int(cap) if name != "max_cost_usd" else float(cap)
                elif cap < 5:
                    chosen[name] = int(cap)
            elif value > cap:
                raise PolicyRefusal(403, f"'context.{name}' {value:g} is above this server's cap of {cap:g}")
        chosen["approval"] = self._approval(chosen.get("approval"), gateway)
        chosen.pop("mcp_config", None)
        names = mcp_server_names(context.get("mcp_config"), gateway)
        if names is not None:  # the others' tools are denied: a run sees only the named servers' tools
            others = [f"mcp:{server}" for server in operator_servers(gateway) if server not in names]
            denied = chosen.get("denied_tools") or []
            chosen["denied_tools"] = [*denied, *others] if isinstance(denied, list | tuple) else denied
        return chosen

    def _offered(self, spec: str, where: str) -> None:
        """A PolicyRefusal unless `spec` is a model spec (422) on the operator's list (403)."""
        from reactgraph.models.loader import ModelConfigError, canonical_spec

        try:
            asked = canonical_spec(spec)
        except ModelConfigError as exc:
            raise PolicyRefusal(422, f"'{where}': {exc}") from None
        if asked not in {canonical_spec(model) for model in self.models}:  # gpt-4o is openai:gpt-4o
            raise PolicyRefusal(403, f"'{where}' {spec.strip()!r} is not offered by this server; "
                                     f"models: {', '.join(self.models)}")

    def _approval(self, asked: Any, gateway: Any) -> dict[str, str] | None:
        """The operator's overrides plus the client's, which may only add asking: a client's 'never' for a tool
        that asks under the operator's settings is refused."""
        from reactgraph.tools.call import ToolSession
        from reactgraph.tools.guards import approval_reason

        if asked is None:
            return dict(self.approval) or None
        if not isinstance(asked, Mapping):
            raise PolicyRefusal(422, "'context.approval' must be an object of tool name or tag → 'always' or 'never'")
        operator = ToolSession.of(approval=dict(self.approval))  # type: ignore[arg-type]
        for label, setting in asked.items():
            if setting == "always":
                continue
            if setting != "never":
                raise PolicyRefusal(422, f"'context.approval' for {label!r} must be 'always' or 'never'")
            asking = sorted(meta.name for meta in gateway.registry
                            if label in (meta.name, *meta.tags) and approval_reason(meta, operator))
            if asking:
                raise PolicyRefusal(403, f"'context.approval' may only add approval: {label!r} 'never' would "
                                         f"skip it for {', '.join(asking[:10])}, which this server asks about")
        return {**self.approval, **{str(k): v for k, v in asked.items()}}


def operator_servers(gateway: Any) -> list[str]:
    """The names of the MCP servers the operator started with the gateway (`--mcp`), in order."""
    return [server.config.name for server in getattr(gateway, "mcp_servers", [])]


def mcp_server_names(value: Any, gateway: Any) -> set[str] | None:
    """The operator servers a client's `context.mcp_config` names (None: not given, every server's tools).

    Only names: "files,search" or ["files", "search"]. A path or JSON is refused, so nothing a client sends
    reaches the MCP config reader (and its `${VAR}` expansion) or starts a server."""
    if value is None or value == "" or value == []:
        return None
    if isinstance(value, str):
        items = [item.strip() for item in value.split(",")]
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        items = [item.strip() for item in value]
    else:
        raise PolicyRefusal(422, "'context.mcp_config' takes the names of this server's MCP servers, "
                                 "as \"a,b\" or a list")
    known = operator_servers(gateway)
    if any(not _SERVER_NAME.fullmatch(item) for item in items):
        raise PolicyRefusal(403, "'context.mcp_config' takes only the names of this server's MCP servers "
                                 f"({', '.join(known) or 'none configured'}), not a path or a config")
    if unknown := sorted(set(items) - set(known)):
        raise PolicyRefusal(422, f"'context.mcp_config' names unknown MCP server(s) {', '.join(unknown)}; "
                                 f"this server has: {', '.join(known) or 'none'}")
    return set(items)


def run_policy_from(section: Mapping[str, Any], *, where: str = "langgraph.json", models: Iterable[str] = (),
                    allow_system_prompt: bool | None = None, caps: Mapping[str, float | None] | None = None
                    ) -> RunPolicy:
    """The policy from the `reactgraph` section and the serve/worker flags (a flag wins over the file)."""
    from reactgraph.models.loader import ModelConfigError, parse_spec

    where = f"{where}: {SECTION}"
    if unknown := sorted(set(map(str, section)) - _KEYS):
        raise BadRunPolicy(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_KEYS))}")
    listed = list(models) or section.get("models") or [server_model()]
    if not isinstance(listed, list) or not all(isinstance(m, str) and m.strip() for m in listed):
        raise BadRunPolicy(f"{where}.models must be a list of model specs")
    for spec in listed:
        try:
            parse_spec(spec)
        except ModelConfigError as exc:
            raise BadRunPolicy(f"{where}.models: {exc}") from None
    allow = section.get("allow_system_prompt", False) if allow_system_prompt is None else allow_system_prompt
    if not isinstance(allow, bool):
        raise BadRunPolicy(f"{where}.allow_system_prompt must be true or false")
    approval = section.get("approval", {})
    if not isinstance(approval, dict) or not all(v in ("always", "never") for v in approval.values()):
        raise BadRunPolicy(f"{where}.approval must be an object of tool name or tag → 'always' or 'never'")
    limits = section.get("limits", {})
    if not isinstance(limits, dict) or (bad := sorted(set(limits) - set(CAPPED))):
        raise BadRunPolicy(f"{where}.limits takes {', '.join(CAPPED)}" + (f"; got {', '.join(bad)}" if limits else ""))
    chosen = {**DEFAULT_CAPS, **limits, **{k: v for k, v in (caps or {}).items() if v is not None}}
    for name, cap in chosen.items():
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int | float) or cap < 0
                                or (name == "max_iterations" and cap < 1)):
            raise BadRunPolicy(f"{where}.limits.{name} must be a non-negative number or null, not {cap!r}")
    return RunPolicy(tuple(spec.strip() for spec in listed), allow, dict(approval), chosen)


def mcp_file_of(section: Mapping[str, Any], base: Any) -> Any:
    """The MCP config file named by `reactgraph.mcp` (relative to the langgraph.json), or None."""
    from pathlib import Path

    name = section.get("mcp")
    if name is None:
        return None
    if not isinstance(name, str) or not name.strip():
        raise BadRunPolicy(f"langgraph.json: {SECTION}.mcp must be the path of an MCP config file")
    path = Path(name).expanduser()
    return path if path.is_absolute() or base is None else Path(base).parent / path


# What the worker can stream (reactgraph/service/events.py); LangGraph's `tools` and `lifecycle` are not.
STREAM_MODES = ("values", "updates", "messages", "messages-tuple", "events", "custom", "debug", "tasks",
                "checkpoints")
MAX_RECURSION_LIMIT = 10_000
_COMMAND_KEYS = frozenset({"resume", "update", "goto"})
# The service sets these itself; `__…` keys are LangGraph's internals (`__pregel_…`), never a client's to set;
# `langgraph_auth_*` say who the run is for: only the authenticated caller's are ever used (api_runs adds them).
_SET_BY_THE_SERVICE = ("thread_id", "checkpoint_id", "checkpoint_ns", *AUTH_KEYS)


def run_kwargs(body: Mapping[str, Any], policy: RunPolicy | None = None, gateway: Any = None) -> RunKwargs:
    """The run's kwargs as stored with it (plain JSON), after checking each field; its context as the client sent
    it, checked against the operator's run policy (the worker applies the policy again when it runs it)."""
    refuse_unserved(body)
    graph_input = body.get("input")
    command = field(body, "command", dict)
    if command is not None and graph_input == {}:
        graph_input = None  # agent-chat-ui and useStream's submit({}, {command}) resume so; LangGraph ignores it
    if graph_input is not None and command is not None:
        raise BadRequest(422, "give 'input' or 'command', not both (an empty input beside a command is ignored)")
    if command is not None and not set(command) <= _COMMAND_KEYS:
        raise BadRequest(422, f"'command' takes {', '.join(sorted(_COMMAND_KEYS))}; "
                              f"got {', '.join(sorted(map(str, set(command) - _COMMAND_KEYS)))}")
    if graph_input is not None and not isinstance(graph_input, dict):
        raise BadRequest(422, "'input' must be an object of the graph's input fields, "
                              f"not {type(graph_input).__name__}")
    modes = body.get("stream_mode") or ["values"]
    modes = [modes] if isinstance(modes, str) else modes
    if not isinstance(modes, list) or not modes or any(m not in STREAM_MODES for m in modes):
        raise BadRequest(422, f"'stream_mode' must be one or more of {', '.join(STREAM_MODES)}; got {modes!r}")
    context = field(body, "context", dict, {})
    try:
        run_context(context, policy, gateway)
    except PolicyRefusal as exc:
        raise BadRequest(exc.status, str(exc)) from None
    except InvalidContext as exc:
        raise BadRequest(422, f"'context': {exc}") from None
    config = field(body, "config", dict, {})
    configurable = field(config, "configurable", dict, {})
    limit = field(config, "recursion_limit", int)
    if limit is not None and not 1 <= limit <= MAX_RECURSION_LIMIT:
        raise BadRequest(422, f"'config.recursion_limit' must be from 1 to {MAX_RECURSION_LIMIT}, got {limit}")
    checkpoint = field(body, "checkpoint", dict, {})
    if field(checkpoint, "checkpoint_ns", str) or checkpoint.get("checkpoint_map"):  # a subgraph's checkpoint
        raise BadRequest(422, "'checkpoint' of a subgraph (checkpoint_ns, checkpoint_map) is refused: a run starts "
                              "from one of the thread's own checkpoints (checkpoint_id)")
    checkpoint_id = field(body, "checkpoint_id", str) or field(checkpoint, "checkpoint_id", str)
    before, after = _node_list(body, "interrupt_before"), _node_list(body, "interrupt_after")
    return {"input": graph_input, "command": command, "stream_mode": modes, "context": context,
            "config": {"configurable": {k: v for k, v in configurable.items()
                                        if k not in _SET_BY_THE_SERVICE and not str(k).startswith("__")},
                       "metadata": {}, **({"recursion_limit": limit} if limit else {}), **config_extras(config)},
            "checkpoint_id": checkpoint_id, "stream_subgraphs": bool(body.get("stream_subgraphs")),
            "interrupt_before": before, "interrupt_after": after,
            # what the Agent Server also records with a run; kept as given, not acted on beyond what it says
            "subgraphs": bool(body.get("stream_subgraphs")), "resumable": bool(body.get("stream_resumable")),
            "webhook": None, "feedback_keys": None, "temporary": False, **run_options(body)}


async def check_graph_input(graph: Any, kwargs: RunKwargs,
                            current: Callable[[], Awaitable[Mapping[str, Any]]]) -> None:
    """Refuse (422, naming the field) an input or a command's update that the graph's own channels cannot take —
    a message LangChain cannot coerce, a list reducer given a number — so such a run is never queued: in the graph
    it would fail at its first step and leave a checkpoint that no later read of the thread could decode.

    Each value is given to an empty copy of its channel, the reducer the graph would apply being the judge; a value
    refused there is tried once more on the thread's current value (`current()`: channel values of its latest
    checkpoint), since some updates only make sense against it (removing a message by its id)."""
    command = kwargs.get("command") or {}
    channels = getattr(graph, "channels", {})
    thread_values: Mapping[str, Any] | None = None
    for where, values in (("input", kwargs.get("input")), ("command.update", command.get("update"))):
        if not isinstance(values, Mapping):
            continue
        for name, value in values.items():
            channel = channels.get(name) if isinstance(name, str) and not name.startswith("__") else None
            if channel is None or _takes(channel.copy(), value) is None:
                continue
            thread_values = await current() if thread_values is None else thread_values
            if name in thread_values and _takes(channel.from_checkpoint(thread_values[name]), value) is None:
                continue
            cause = _takes(channel.copy(), value)
            raise BadRequest(422, f"'{where}.{name}' cannot be taken by the graph: {cause}")


async def channel_values(checkpointer: Any, graph: Any, thread_id: str, known: bool) -> dict[str, Any]:
    """The channel values of the thread's latest checkpoint ({} when it has none, or is not `known`); the graph's
    delta channels, which a checkpoint stores as writes since a snapshot, rebuilt from the saver's history."""
    if not known:
        return {}
    found = await checkpointer.aget_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    if found is None:
        return {}
    values = dict(found.checkpoint.get("channel_values") or {})
    specs = getattr(graph, "channels", {})
    delta = [name for name, spec in specs.items() if isinstance(spec, DeltaChannel) and name not in values
             and name in found.checkpoint.get("channel_versions", {})]
    if delta:
        histories = await checkpointer.aget_delta_channel_history(config=found.config, channels=delta)
        values.update({name: delta_value(specs[name], histories[name]) for name in delta})
    return values


def _takes(channel: Any, value: Any) -> str | None:
    """None when `channel` takes `value` as one update, else the first line of why not."""
    try:
        channel.update([value])
    except Exception as exc:  # noqa: BLE001 - any reducer's refusal, whatever it raises, is the client's input
        return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    return None


def run_context(context: Mapping[str, Any], policy: RunPolicy | None, gateway: Any) -> Context:
    """The Context a run gets for a client's context under the operator's policy (the default policy when None):
    a PolicyRefusal or InvalidContext names the refused field."""
    return resolve_context((policy or RunPolicy()).run_context(context, gateway))


def strategy(body: Mapping[str, Any]) -> str:
    chosen = field(body, "multitask_strategy", str, "enqueue")
    if chosen not in STRATEGIES:
        raise BadRequest(422, f"'multitask_strategy' must be one of {', '.join(STRATEGIES)}, got {chosen!r}")
    return chosen


def graph_call(kwargs: RunKwargs, thread_id: str, run_id: str, *, resumed: bool
               ) -> tuple[Any, dict[str, Any]]:
    """(input or Command, config) for the graph. A resumed run (its worker died) goes on from its last checkpoint;
    one with durability "exit" has none of its own (it writes only when it ends), so it starts again."""
    resumed = resumed and kwargs.get("durability") != "exit"
    configurable = {**kwargs["config"].get("configurable", {}), "thread_id": thread_id}
    if isinstance(configurable.get("langgraph_auth_user"), Mapping):  # stored as plain JSON with the run
        configurable["langgraph_auth_user"] = AuthUser(configurable["langgraph_auth_user"])
    if kwargs.get("checkpoint_id") and not resumed:
        configurable["checkpoint_id"] = kwargs["checkpoint_id"]
    stored = kwargs["config"]
    config: dict[str, Any] = {**{key: stored[key] for key in ("tags", "run_name", "max_concurrency") if key in stored},
                              "configurable": configurable, "metadata": {**(stored.get("metadata") or {}),
                                                                         "run_id": run_id},
                              **({"recursion_limit": stored["recursion_limit"]} if stored.get("recursion_limit")
                                 else {})}
    if resumed:
        return None, config
    if (command := kwargs.get("command")) is not None:
        return Command(**command), config
    return kwargs.get("input"), config


def _node_list(body: Mapping[str, Any], name: str) -> list[str] | str | None:
    value = body.get(name)
    if value is None or value == "*":
        return value
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRequest(422, f"'{name}' must be \"*\" or a list of node names")
    return value
