"""Approval as a gateway policy: which calls need a person's yes before they run, and the step that holds the
ones that came without it.

The gateway decides; the graphs ask (they pause with LangGraph's `interrupt`, see nodes/approval.py)
and pass the calls a person approved back in with `approved=True`. Anyone else who calls the gateway — a
LangChain agent through `as_langchain_tools()`, a script — gets `needs_approval` for such a call, so no path
runs it unasked.

A tool's own setting (`ToolMeta.approval`) can be overridden per session (`ToolSession.approval`, from
`Context.approval`) by tool name or by tag: the name wins over a tag, and among tags "always" wins over
"never", so a tool in two groups is asked about if either group asks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reactgraph.tools import untrusted
from reactgraph.tools.call import Handler, ToolResult, ToolSession, ToolStatus
from reactgraph.tools.guards import check_arguments, coerce_args
from reactgraph.tools.meta import ToolMeta
from reactgraph.tools.untrusted import terminal_safe

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
