"""A run request's body → what the graph is called with. Checked at create time, so a bad run is a 422 with
one line, never a queued run that fails later; the worker rebuilds the same values from the stored kwargs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langgraph.types import Command

from reactgraph.nodes.state.context import Context, InvalidContext, resolve_context
from reactgraph.service.auth import AUTH_KEYS, AuthUser
from reactgraph.service.records import STRATEGIES
from reactgraph.service.run_options import config_extras, refuse_unserved, run_options
from reactgraph.service.run_policy import PolicyRefusal, RunPolicy
from reactgraph.service.wire import BadRequest, field

# What the worker can stream (reactgraph/service/events.py); LangGraph's `tools` and `lifecycle` are not.
STREAM_MODES = ("values", "updates", "messages", "messages-tuple", "events", "custom", "debug", "tasks",
                "checkpoints")
MAX_RECURSION_LIMIT = 10_000
_COMMAND_KEYS = frozenset({"resume", "update", "goto"})
# The service sets these itself; `__…` keys are LangGraph's internals (`__pregel_…`), never a client's to set;
# `langgraph_auth_*` say who the run is for: only the authenticated caller's are ever used (api_runs adds them).
_SET_BY_THE_SERVICE = ("thread_id", "checkpoint_id", "checkpoint_ns", *AUTH_KEYS)


def run_kwargs(body: Mapping[str, Any], policy: RunPolicy | None = None, gateway: Any = None) -> dict[str, Any]:
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
    interrupts = {name: _node_list(body, name) for name in ("interrupt_before", "interrupt_after")}
    return {"input": graph_input, "command": command, "stream_mode": modes, "context": context,
            "config": {"configurable": {k: v for k, v in configurable.items()
                                        if k not in _SET_BY_THE_SERVICE and not str(k).startswith("__")},
                       "metadata": {}, **({"recursion_limit": limit} if limit else {}), **config_extras(config)},
            "checkpoint_id": checkpoint_id, "stream_subgraphs": bool(body.get("stream_subgraphs")), **interrupts,
            # what the Agent Server also records with a run; kept as given, not acted on beyond what it says
            "subgraphs": bool(body.get("stream_subgraphs")), "resumable": bool(body.get("stream_resumable")),
            "webhook": None, "feedback_keys": None, "temporary": False, **run_options(body)}


async def check_graph_input(graph: Any, kwargs: Mapping[str, Any],
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


async def channel_values(checkpointer: Any, thread_id: str, known: bool) -> dict[str, Any]:
    """The channel values of the thread's latest checkpoint ({} when it has none, or is not `known`)."""
    if not known:
        return {}
    found = await checkpointer.aget_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    return dict(found.checkpoint.get("channel_values") or {}) if found is not None else {}


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


def graph_call(kwargs: Mapping[str, Any], thread_id: str, run_id: str, *, resumed: bool
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
    if kwargs.get("command") is not None:
        return Command(**kwargs["command"]), config
    return kwargs.get("input"), config


def _node_list(body: Mapping[str, Any], name: str) -> list[str] | str | None:
    value = body.get(name)
    if value is None or value == "*":
        return value
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRequest(422, f"'{name}' must be \"*\" or a list of node names")
    return value
