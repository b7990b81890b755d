"""Guards: the steps that decide whether a call may run at all, and how much of its result may leave the gateway.

- `Existence`: the named tool must be registered and enabled.
- `Permission`: the session must be allowed to use the tool (by name or tag; deny wins).
- `ArgumentValidation`: arguments must satisfy the tool's pydantic model or JSON schema; field errors go back
  to the model.
- `ApprovalGate`: a call of a tool that needs a person's yes runs only when it comes with one.
- `ResultLimit`: no result leaves the gateway larger than its limit, so none reaches a graph's state whole.

Approval is a gateway policy: the gateway decides which calls need a person (`approval_request`), the graphs ask
(they pause with LangGraph's `interrupt`, nodes/approval.py) and pass the calls a person approved back in with
`approved=True`. Anyone else who calls the gateway — a LangChain agent through `as_langchain_tools()`, a script —
gets `needs_approval` for such a call, so no path runs it unasked. A tool's own setting (`ToolMeta.approval`) can
be overridden per session (`ToolSession.approval`, from `Context.approval`) by tool name or by tag: the name wins
over a tag, and among tags "always" wins over "never", so a tool in two groups is asked about if either asks.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from reactgraph.tools import untrusted
from reactgraph.tools.call import Handler, ToolResult, ToolSession, ToolStatus, tool_fault
from reactgraph.tools.meta import ToolMeta, describe_field_errors, field_errors
from reactgraph.tools.untrusted import terminal_safe

if TYPE_CHECKING:
    from reactgraph.tools.gateway import ToolRegistry  # the gateway holds the registry these steps read


class Existence:
    """Resolves the call's tool; unknown or disabled tools end the call with the list of usable ones."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry

    async def __call__(self, call: ToolResult, proceed: Handler) -> ToolResult:
        meta = self.registry.get(call.name)
        if meta is None:
            available = self.registry.available_names(call.session)
            return call.answer(ToolStatus.UNKNOWN_TOOL, untrusted.unknown_tool(call.name, available))
        if not meta.enabled:
            available = self.registry.available_names(call.session)
            return call.answer(ToolStatus.DENIED, untrusted.disabled_tool(call.name, available),
                               reason="disabled")
        call.meta = meta
        return await proceed(call)


class Permission:
    """Refuses tools the session's allow/deny lists exclude, naming the ones it may use."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry

    async def __call__(self, call: ToolResult, proceed: Handler) -> ToolResult:
        meta = call.tool
        if not call.session.permits(meta.name, meta.tags):
            available = self.registry.available_names(call.session)
            return call.answer(ToolStatus.DENIED, untrusted.denied(meta.name, available),
                               reason="session policy")
        return await proceed(call)


def coerce_args(args: object) -> object:
    """A call's arguments as a mapping when they can be one: some providers hand them over as a JSON string.

    The JSON string is parsed (empty: `{}`), None becomes `{}`, anything else is returned as it came, for
    validation to reject if it is not a mapping.
    """
    if isinstance(args, str):
        try:
            return json.loads(args) if args.strip() else {}
        except (ValueError, RecursionError):  # bad JSON, an int past Python's digit limit, absurd nesting
            return args
    return {} if args is None else args


def schema_hint(meta: ToolMeta) -> str:
    """A one-line summary of the expected arguments, e.g. `expression: string (required)`."""
    if meta.params_model is None:
        return _hint_from(meta.json_schema or {})
    return _schema_hint(meta.params_model)


@functools.lru_cache(maxsize=256)  # building a JSON schema costs ~1 ms, and models resend bad arguments often
def _schema_hint(params_model: type[BaseModel]) -> str:
    return _hint_from(params_model.model_json_schema())


def _hint_from(schema: dict) -> str:
    required = set(schema.get("required", ()))
    parts = []
    for field_name, spec in (schema.get("properties") or {}).items():
        spec = spec if isinstance(spec, dict) else {}
        kind = spec.get("type") or "/".join(str(a.get("type", "?")) if isinstance(a, dict) else "any"
                                            for a in spec.get("anyOf", [])) or "any"
        parts.append(f"{field_name}: {kind}{' (required)' if field_name in required else ''}")
    return ", ".join(parts) or "no arguments"


class ArgumentValidation:
    """Validates arguments before anything runs, so a malformed call never reaches the tool."""

    async def __call__(self, call: ToolResult, proceed: Handler) -> ToolResult:
        refused = check_arguments(call)
        return refused if refused is not None else await proceed(call)


def check_arguments(call: ToolResult) -> ToolResult | None:
    """Set `call.params` from valid arguments (None returned), or the `invalid_args` (or fault) result.

    Synchronous, so the approval check can ask it before a graph pauses: a call that would be refused
    anyway is not put to a person."""
    meta = call.tool
    args = coerce_args(call.args)
    if not isinstance(args, dict):
        return call.answer(ToolStatus.INVALID_ARGS, untrusted.invalid_args(
            meta.name, f"arguments must be a JSON object, got {type(args).__name__}", schema_hint(meta)))
    if meta.params_model is None:
        errors = field_errors(meta.validator, args)
        if errors:
            return call.answer(ToolStatus.INVALID_ARGS, untrusted.invalid_args(
                meta.name, describe_field_errors(errors), schema_hint(meta)), field_errors=errors)
        call.params = args
        return None
    try:
        call.params = meta.params_model.model_validate(args)
    except ValidationError as exc:
        return call.answer(ToolStatus.INVALID_ARGS,
                           untrusted.invalid_args(meta.name, exc, schema_hint(meta)),
                           field_errors=[{"loc": list(e["loc"]), "msg": e["msg"]} for e in exc.errors()])
    except BaseException as exc:  # noqa: BLE001 - the tool's own validators may raise anything (pydantic
        return tool_fault(call, exc)  # turns only ValueError and AssertionError into a ValidationError)
    return None


class ResultLimit:
    """Cuts a result's text to the tool's `max_result_chars` (else the gateway's), saying how much was cut.

    A cut result also drops its raw `value`: the point is that a 100 MB tool output is gone before the
    result is returned, not only from the text (results become messages, checkpoints and pending writes).
    """

    def __init__(self, max_chars: int) -> None:
        if max_chars < 1:
            raise ValueError("max_result_chars must be >= 1")
        self.max_chars = max_chars

    async def __call__(self, call: ToolResult, proceed: Handler) -> ToolResult:
        result = await proceed(call)
        meta = call.meta
        limit = self.max_chars if meta is None or meta.max_result_chars is None else meta.max_result_chars
        total = len(result.content)
        if total > limit:
            result.content = result.content[:limit] + untrusted.cut_note(limit, total)
            result.value = None
            result.detail["cut"] = {"kept_chars": limit, "total_chars": total}
        return result


if TYPE_CHECKING:
    from reactgraph.tools.gateway import ToolRegistry  # the gateway holds the registry these steps read


def approval_reason(meta: ToolMeta, session: ToolSession) -> str:
    """Why a call of this tool needs approval in this session ("" when it does not)."""
    overrides = dict(session.approval)
    if meta.name in overrides:
        return f"approval of {meta.name} is required by this run's settings" if overrides[meta.name] == "always" \
            else ""
    by_tag = {tag: overrides[tag] for tag in meta.tags if tag in overrides}
    if by_tag:
        asking = sorted(tag for tag, setting in by_tag.items() if setting == "always")
        return f"tools tagged {asking[0]!r} need approval in this run's settings" if asking else ""
    return f"{meta.name} needs a person's approval for each call" if meta.approval == "always" else ""


def approval_request(registry: ToolRegistry, call: Mapping[str, Any], session: ToolSession) -> dict[str, Any] | None:
    """The request to put to a person for this call, or None when it needs none.

    A call the pipeline would refuse anyway (unknown tool, not permitted, invalid arguments) needs none: it is
    answered by the pipeline without anyone being asked about a call that cannot run.
    """
    name, call_id = call.get("name"), str(call.get("id") or "")
    meta = registry.get(name) if isinstance(name, str) else None
    if meta is None or not meta.enabled or not session.permits(meta.name, meta.tags):
        return None
    reason = approval_reason(meta, session)
    if not reason:
        return None
    record = ToolResult(name=meta.name, args=call.get("args"), call_id=call_id, session=session, meta=meta)
    if check_arguments(record) is not None:
        return None
    args = coerce_args(call.get("args"))
    return {"id": call_id, "name": meta.name, "args": args if isinstance(args, dict) else {}, "reason": reason,
            "decisions": list(meta.approval_decisions)}


def describe_call(name: str, args: Any, reason: str) -> str:
    """What a person reads about a call put to them: why it asks, then the tool and its arguments (as LangChain's
    HumanInTheLoopMiddleware lays out its default description), control and bidi characters escaped as the CLI
    shows them (a model wrote the arguments: a bidi override there would reorder what the person approves)."""
    return terminal_safe(f"{reason}\n\nTool: {name}\nArgs: {json.dumps(args, ensure_ascii=False, default=str)}")


@dataclass(frozen=True)
class _Description:
    """A HumanInTheLoopMiddleware description factory: the call described as the graphs' approve step does."""

    reason: str

    def __call__(self, tool_call: Mapping[str, Any], state: Any, runtime: Any) -> str:
        return describe_call(str(tool_call.get("name")), tool_call.get("args"), self.reason)


def interrupt_on(registry: ToolRegistry, session: ToolSession) -> dict[str, dict[str, Any]]:
    """LangChain `HumanInTheLoopMiddleware`'s `interrupt_on` for the tools that need approval in this session:
    tool name → `{"allowed_decisions", "description"}` (a factory that says why the tool asks, then the call)."""
    return {meta.name: {"allowed_decisions": list(meta.approval_decisions), "description": _Description(reason)}
            for meta in registry.available(session) if (reason := approval_reason(meta, session))}


class ApprovalGate:
    """The approval gate: a call that needs a person's approval runs only if it carries one."""

    async def __call__(self, call: ToolResult, proceed: Handler) -> ToolResult:
        if not call.approved and (reason := approval_reason(call.tool, call.session)):
            return call.answer(ToolStatus.NEEDS_APPROVAL, untrusted.needs_approval(call.name, reason),
                               reason=reason)
        return await proceed(call)
