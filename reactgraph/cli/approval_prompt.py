"""Who answers an approval request in the CLI: a person at the terminal, or `--approve` in scripts.

The request and the answers are LangChain's HITL format (nodes/approval.py), batched or per call.
`--approve all` approves every call, `--approve none` rejects every call, `--approve TOOL` (repeatable, tool
names or tags) approves those tools' calls and rejects the others. Without `--approve`, a terminal asks, among
the decisions the tool allows: approve, edit (new arguments as JSON, optionally another tool when batched),
reject (with a reason) or respond (the person's text is the call's result); when no one is at a terminal
(stdin is not one, or --json), every call is rejected with a reason that says to use `--approve`, so a script
never hangs on a question no one will answer.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from typing import Any, TextIO

from reactgraph.errors import ReactGraphError
from reactgraph.tools.untrusted import terminal_safe

APPROVE_HELP = ("Answer approval requests without asking: all | none | TOOL (names or tags whose calls are "
                "approved; the others are rejected); repeatable. Default: ask at a terminal, else reject.")
NO_TERMINAL = "no one could approve it: not run at a terminal (use --approve all|none|TOOL)"
MAX_PROMPTS = 5  # wrong keys or bad JSON before a call is rejected: a closed stdin must not loop forever


class ApprovalSpecError(ReactGraphError, ValueError):
    """`--approve` values that mix all/none with tool names."""


def read_line(prompt: str) -> str:
    """One answer typed at the terminal; the prompt goes to stderr, so stdout keeps only the run's output."""
    sys.stderr.write(prompt)
    sys.stderr.flush()
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.rstrip("\n")


def make_approver(approve: Iterable[str], tags_of: Callable[[str], tuple[str, ...]], *, interactive: bool,
                  ask: Callable[[str], str] = read_line, out: TextIO | None = None) -> Callable[[dict[str, Any]], Any]:
    """The approver `graph.sessions.run` asks; `tags_of(tool)` gives a tool's tags (for `--approve TAG`). It is
    given LangChain's HITL request (batched or per call) and answers with its decisions."""
    # imported here, not at the top: `ask` reads APPROVE_HELP from this module, and `reactgraph --help` must not
    # load the nodes and tools
    from reactgraph.nodes.approval import answer_with, requested_calls

    stream: TextIO = out or sys.stderr
    chosen = [value.strip() for value in approve if value.strip()]
    if {"all", "none"} & set(chosen) and len(chosen) > 1:
        raise ApprovalSpecError(f"--approve {' '.join(chosen)}: all and none stand alone, not with tool names")
    if chosen:
        return lambda request: answer_with(request, [_scripted(call, chosen, tags_of)
                                                     for call in requested_calls(request)])
    if interactive:
        return lambda request: _interactive(request, ask, stream)
    told: list[bool] = []

    def reject_all(request: dict[str, Any]) -> Any:
        calls = requested_calls(request)
        if not told:
            names = ", ".join(sorted({str(call["name"]) for call in calls}))
            stream.write(f"approval needed for {names}: {NO_TERMINAL}\n")
            told.append(True)
        return answer_with(request, [{"type": "reject", "message": NO_TERMINAL}] * len(calls))

    return reject_all


def _scripted(call: dict[str, Any], chosen: list[str], tags_of: Callable[[str], tuple[str, ...]]) -> dict[str, Any]:
    if chosen == ["all"]:
        return {"type": "approve"}
    if chosen == ["none"]:
        return {"type": "reject", "message": "rejected by --approve none"}
    if {call["name"], *tags_of(str(call["name"]))} & set(chosen):
        return {"type": "approve"}
    return {"type": "reject", "message": f"not among --approve {' '.join(chosen)}"}


def _interactive(request: dict[str, Any], ask: Callable[[str], str], out: TextIO) -> Any:
    from reactgraph.nodes.approval import TOOL_APPROVAL, answer_with, requested_calls

    if request.get("error"):
        out.write(terminal_safe(f"  (the last answer was not understood: {request['error']})\n"))
    same_tool = request.get("type") == TOOL_APPROVAL  # a per-call edit keeps the tool
    return answer_with(request, [_ask_one(call, ask, out, same_tool) for call in requested_calls(request)])


KEYS = {"a": ("approve", "[a]pprove"), "e": ("edit", "[e]dit"), "r": ("reject", "[r]eject"),
        "s": ("respond", "re[s]pond")}


def _ask_one(call: dict[str, Any], ask: Callable[[str], str], out: TextIO, same_tool: bool) -> dict[str, Any]:
    # The step view has just said why (the approval_requested line); the prompt shows the call to decide on.
    shown = json.dumps(call.get("args"), ensure_ascii=False)
    out.write(terminal_safe(f"   {call['name']}({shown[:300]})\n"))  # the model's call: shown, never obeyed
    out.flush()
    allowed = call["allowed_decisions"] or [kind for kind, _label in KEYS.values()]
    keys = {key: kind for key, (kind, _label) in KEYS.items() if kind in allowed}
    labels = [label for key, (_kind, label) in KEYS.items() if key in keys]
    question = f"   {', '.join(labels[:-1])} or {labels[-1]}? " if len(labels) > 1 else f"   {labels[0]}? "
    for _ in range(MAX_PROMPTS):
        try:
            kind = keys.get(ask(question).strip().lower()[:1])
            if kind in ("approve", "reject", "respond"):
                return _simple(kind, ask)
            if kind == "edit" and (edited := _ask_edit(call, ask, out, same_tool)) is not None:
                return edited
        except EOFError:  # stdin closed: nobody will answer
            break
    if "reject" not in keys:
        return {"type": "reject"}  # not allowed: the graph asks again, then rejects (no answer is no approval)
    return {"type": "reject", "message": "no answer at the terminal"}


def _simple(kind: str, ask: Callable[[str], str]) -> dict[str, Any]:
    if kind == "reject":
        return {"type": "reject", "message": ask("   reason (shown to the model): ").strip()}
    if kind == "respond":
        return {"type": "respond", "message": ask("   answer (the call's result, shown to the model): ").strip()}
    return {"type": "approve"}


def _ask_edit(call: dict[str, Any], ask: Callable[[str], str], out: TextIO, same_tool: bool) -> dict[str, Any] | None:
    name = call["name"] if same_tool else ask(terminal_safe(f"   tool [{call['name']}]: ")).strip() or call["name"]
    shown = json.dumps(call.get("args"), ensure_ascii=False)[:200]
    text = ask(terminal_safe(f"   arguments as JSON [{shown}]: ")).strip()
    try:
        args = json.loads(text) if text else call.get("args")
    except ValueError as exc:
        out.write(f"   not JSON: {exc}\n")
        return None
    if not isinstance(args, dict):
        out.write("   arguments must be a JSON object\n")
        return None
    return {"type": "edit", "edited_action": {"name": name, "args": args}}
