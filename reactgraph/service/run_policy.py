"""What a client's run `context` may choose on this service: the operator's run policy, and the one function that
turns a client's context into the Context a run gets (applied at create time and again by the worker: a run
record in Redis is untrusted input too).

The operator (flags, langgraph.json's `reactgraph` section, the environment) is trusted; a client is not. A client
never names a process to start, a file to read or an environment variable to expand (`mcp_config` is at most the
names of the operator's MCP servers), never picks a model off the list, never replaces the system prompt unless
allowed, never loosens approval, and never goes past the operator's caps. A refusal is a `PolicyRefusal`: 403 for
a value that is well-formed but not permitted, 422 for one that is malformed, its one line naming the field.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reactgraph.errors import ReactGraphError
from reactgraph.nodes.prompting import prompts

SECTION = "reactgraph"
CAPPED = ("max_iterations", "max_tool_calls", "max_model_tokens", "max_cost_usd")
# A production server has a ceiling even when the operator set none; null in langgraph.json lifts one.
DEFAULT_CAPS: dict[str, float | None] = {"max_iterations": 20, "max_tool_calls": 100,
                                         "max_model_tokens": 1_000_000, "max_cost_usd": 5.0}
_KEYS = {"models", "allow_system_prompt", "approval", "limits", "mcp", "quotas"}  # quotas: reactgraph/service/quotas.py
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

    models: tuple[str, ...] = field(default_factory=lambda: (server_model(),))
    allow_system_prompt: bool = False
    approval: Mapping[str, str] = field(default_factory=dict)  # operator's overrides, by tool name or tag
    caps: Mapping[str, float | None] = field(default_factory=lambda: dict(DEFAULT_CAPS))

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
        from reactgraph.models.loader import ModelConfigError, parse_spec

        try:
            parse_spec(spec)
        except ModelConfigError as exc:
            raise PolicyRefusal(422, f"'{where}': {exc}") from None
        if spec.strip() not in self.models:
            raise PolicyRefusal(403, f"'{where}' {spec.strip()!r} is not offered by this server; "
                                     f"models: {', '.join(self.models)}")

    def _approval(self, asked: Any, gateway: Any) -> dict[str, str] | None:
        """The operator's overrides plus the client's, which may only add asking: a client's 'never' for a tool
        that asks under the operator's settings is refused."""
        from reactgraph.tools.approval import approval_reason
        from reactgraph.tools.session import ToolSession

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
