"""Who answers an approval request in the CLI: a person at the terminal, or `--approve` in scripts.

`--approve all` approves every call, `--approve none` rejects every call, `--approve TOOL` (repeatable, tool
names or tags) approves those tools' calls and rejects the others. Without `--approve`, a terminal asks: approve,
edit (new arguments as JSON, optionally another tool) or reject (with a reason); when no one is at a terminal
(stdin is not one, or --json), every call is rejected with a reason that says to use `--approve`, so a script
never hangs on a question no one will answer.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from typing import Any, TextIO

from reactgraph.cli.terminal_text import terminal_safe
from reactgraph.errors import ReactGraphError

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
    """The approver `graph.sessions.run` asks; `tags_of(tool)` gives a tool's tags (for `--approve TAG`)."""
    stream: TextIO = out or sys.stderr
    chosen = [value.strip() for value in approve if value.strip()]
    if {"all", "none"} & set(chosen) and len(chosen) > 1:
        raise ApprovalSpecError(f"--approve {' '.join(chosen)}: all and none stand alone, not with tool names")
    if chosen:
        return lambda request: _scripted(request, chosen, tags_of)
    if interactive:
        return lambda request: _interactive(request, ask, stream)
    told: list[bool] = []

    def reject_all(request: dict[str, Any]) -> Any:
        if not told:
            names = ", ".join(sorted({call["name"] for call in request.get("calls", [])}))
            stream.write(f"approval needed for {names}: {NO_TERMINAL}\n")
            told.append(True)
        return {"decision": "reject", "reason": NO_TERMINAL}

    return reject_all


def _scripted(request: dict[str, Any], chosen: list[str], tags_of: Callable[[str], tuple[str, ...]]) -> Any:
    if chosen == ["all"]:
        return {"decision": "approve"}
    if chosen == ["none"]:
        return {"decision": "reject", "reason": "rejected by --approve none"}
    allowed = set(chosen)
    return {call["id"]: {"decision": "approve"} if {call["name"], *tags_of(call["name"])} & allowed
            else {"decision": "reject", "reason": f"not among --approve {' '.join(chosen)}"}
            for call in request.get("calls", [])}


def _interactive(request: dict[str, Any], ask: Callable[[str], str], out: TextIO) -> Any:
    if request.get("error"):
        out.write(terminal_safe(f"  (the last answer was not understood: {request['error']})\n"))
    return {call["id"]: _ask_one(call, ask, out) for call in request.get("calls", [])}


def _ask_one(call: dict[str, Any], ask: Callable[[str], str], out: TextIO) -> dict[str, Any]:
    # The step view has just said why (the approval_requested line); the prompt shows the call to decide on.
    shown = json.dumps(call.get("args"), ensure_ascii=False)
    out.write(terminal_safe(f"   {call['name']}({shown[:300]})\n"))  # the model's call: shown, never obeyed
    out.flush()
    for _ in range(MAX_PROMPTS):
        try:
            key = ask("   [a]pprove, [e]dit or [r]eject? ").strip().lower()[:1]
            if key == "a":
                return {"decision": "approve"}
            if key == "r":
                return {"decision": "reject", "reason": ask("   reason (shown to the model): ").strip()}
            if key == "e":
                edited = _ask_edit(call, ask, out)
                if edited is not None:
                    return edited
        except EOFError:  # stdin closed: nobody will answer
            break
    return {"decision": "reject", "reason": "no answer at the terminal"}


def _ask_edit(call: dict[str, Any], ask: Callable[[str], str], out: TextIO) -> dict[str, Any] | None:
    name = ask(terminal_safe(f"   tool [{call['name']}]: ")).strip() or call["name"]
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
    return {"decision": "edit", "name": name, "args": args}
