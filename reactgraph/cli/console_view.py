"""Rendering a run for people: each step as it happens, the final answer, and what the turn used — on a console
that shows text from outside as text.

Tool output, model replies, MCP servers' descriptions, stored sessions and log fields reach the terminal through
`SafeConsole`, which passes every segment rich writes through `terminal_safe` (reactgraph/tools/untrusted.py,
which approval requests use too): rich's `Text` keeps ESC and most controls, so without it an OSC title, a
clear-screen or a bidi override in a tool's output would be obeyed; with it they print as `\\x1b]0;…`. Newlines,
tabs and rich's own styling pass unchanged. `usage_totals` is the turn's usage as the panel shows it and `--json`
prints it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.segment import Segment
from rich.text import Text

from reactgraph.nodes.conversation import pending_calls
from reactgraph.tools.untrusted import terminal_safe

STATUS_STYLE = {"ok": "green", "responded": "yellow", "answered": "green", "partial": "yellow", "no_answer": "yellow",
                "limit_reached": "yellow", "budget_exhausted": "yellow", "failed": "red"}


def _clip(text: str, limit: int = 400) -> str:
    text = terminal_safe(" ".join(text.split()))  # before layout: the escapes take their width in the line
    return text if len(text) <= limit else text[:limit] + "…"


def _format_problem(correction: str) -> str:
    """One line for a format correction: what was wrong with the reply (the format reminder sent back with it
    repeats the prompt, so it is not shown)."""
    problem = correction.strip().splitlines()[0] if correction.strip() else "the reply could not be read"
    problem = problem.split(". Reply in", 1)[0].removeprefix("Invalid format: ").rstrip(".")
    return _clip(problem, 200)


def _args(args: Any) -> str:
    return json.dumps(args, ensure_ascii=False) if isinstance(args, dict) else str(args)


def gateway_event_line(event: dict[str, Any]) -> str | None:
    """One line for a gateway event, e.g. `↻ get_weather retry 2/3 after TimeoutError`; None for unknown kinds."""
    tool, kind = _clip(str(event.get("tool", "?")), 80), event.get("event")
    if kind == "retry":
        return terminal_safe(f"↻ {tool} retry {event.get('attempt')}/{event.get('max_attempts')} after "
                             f"{event.get('error')}")
    if kind == "breaker":
        state = str(event.get("state", "?")).replace("_", "-")
        why = f" ({event.get('failures')} failures)" if state == "open" else ""
        return f"⚠ breaker for {tool} {state}{why}"
    if kind == "timeout":
        return f"⏱ {tool} timed out after {event.get('timeout_s')} s"
    if kind == "approval_requested":
        return f"✋ {tool} needs approval: {_clip(str(event.get('reason', '')), 200)}"
    if kind == "waiting":
        return f"… {tool} waiting for a free slot ({event.get('in_flight')}/{event.get('max_concurrent')} in use)"
    return None


class StepPrinter:
    """Prints graph updates (`stream_mode="updates"`) as Thought / Action / Observation / Reflection lines."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._streaming = False
        self._reply = ""  # the id of the reply being streamed
        self._plan_length = 0  # Plan-and-Solve: the steps in the plan, and the one under way (0-based)
        self._cursor = 0
        self._trial = 0  # Reflexion: the trial under way

    def token(self, node: str, text: str, reply: str = "") -> None:
        """A streamed model token, printed as it arrives. Each reply (each attempt: a node may ask again after a
        reply in the wrong format) streams on one line of its own, its line breaks shown as spaces, and the step
        line that follows starts on a new one."""
        if self._streaming and reply != self._reply:
            self.console.print()
            self._streaming = False
        if not self._streaming:
            self.console.print(Text(f"    ({node}) ", style="dim"), end="")
            self._streaming, self._reply = True, reply
        self.console.print(Text(terminal_safe(text.replace("\n", " ")), style="dim"), end="", soft_wrap=True)

    def line(self, text: Text) -> None:
        if self._streaming:
            self.console.print()
            self._streaming = False
        # Step lines are not re-wrapped by rich: JSON observations have no spaces to break at, and a
        # terminal's own wrapping keeps each step on one logical line (easier to read, grep and copy).
        self.console.print(text, soft_wrap=True)

    def update(self, node: str, update: dict[str, Any] | None) -> None:
        if not update:
            return
        steps = update.get("steps")
        for step in getattr(steps, "value", steps) or []:  # any node may switch to a fallback model (an Overwrite too)
            if step.get("status") == "model_fallback":
                self.line(Text("    Model fallback: ", style="bold yellow") +
                          Text(f"{_clip(step['thought'], 200)} → {step['observation']}"))
        handler = getattr(self, f"_on_{node}", None)
        if handler:
            handler(update)

    def event(self, event: dict[str, Any]) -> None:
        """A gateway event (`custom` stream) as one dim line under the step it belongs to."""
        if text := gateway_event_line(event):
            self.line(Text(f"  {text}", style="dim"))

    def _on_think(self, update: dict[str, Any], label: str = "") -> None:
        for message in update.get("messages", []):
            calls = pending_calls(message) if message.type == "ai" else []
            if not calls:
                continue
            thought = message.text.strip()
            self.line(Text(f"[{label or update.get('iteration', '?')}] Thought: ", style="bold cyan") +
                               Text(_clip(thought) or "(no thought given)"))
            for call in calls:
                self.line(Text("    Action: ", style="bold magenta") +
                                   Text(f"{call['name']}({_clip(_args(call.get('args')), 200)})"))
        for step in update.get("steps", []) if isinstance(update.get("steps"), list) else []:
            if step["status"] == "format_error":  # a text-protocol reply the parser could not use
                self.line(Text("    Format error: ", style="bold yellow") + Text(_format_problem(step["observation"])))
            elif step["status"] in ("model_error", "empty_reply"):
                self.line(Text("    Model: ", style="bold red") + Text(_clip(step["observation"])))

    def _on_observe(self, update: dict[str, Any]) -> None:
        for step in update.get("steps", []):
            style = STATUS_STYLE.get(step["status"], "red")
            self.line(Text("    Observation ", style="bold") +
                               Text(f"[{step['action']} · {step['status']} · {step['latency_ms']:.0f} ms]: ",
                                    style=style) + Text(_clip(step["observation"])))

    def _on_approve(self, update: dict[str, Any]) -> None:
        for step in update.get("steps", []):
            style = {"approved": "green", "edited": "yellow", "responded": "yellow"}.get(step["status"], "red")
            self.line(Text("    Approval ", style="bold") + Text(f"[{step['action']} · {step['status']}]", style=style)
                      + Text(f": {_clip(step['observation'].removeprefix('rejected: '), 200)}"
                           if step["status"] != "approved" else ""))

    def _on_reflect(self, update: dict[str, Any]) -> None:
        verdict = update.get("reflection")
        if not verdict:
            return
        flags = [name for name in ("enough_information", "tool_error", "need_other_tool", "repeated_call")
                 if verdict.get(name)]
        note = f" — {verdict['note']}" if verdict.get("note") else ""
        self.line(Text("    Reflection: ", style="bold yellow") + Text(f"{', '.join(flags) or 'continue'}{note}"))

    # Plan-and-Solve: the plan, each step's rounds (its tool calls as ReAct's think shows them) and result, replans.
    def _on_plan(self, update: dict[str, Any]) -> None:
        plan = update.get("plan") or []
        self._plan_length, self._cursor = len(plan), 0
        self.line(Text("Plan: ", style="bold cyan") + Text(f"{len(plan)} step(s)" if plan else "no steps"))
        for number, step in enumerate(plan, 1):
            tool = f"  [{step['tool']}]" if step.get("tool") else ""
            self.line(Text(f"    {number}. ") + Text(_clip(str(step.get("goal", "")), 200)) + Text(tool, style="dim"))
        self._model_failures(update)

    def _on_execute_step(self, update: dict[str, Any]) -> None:
        self._on_think(update, label=f"step {self._cursor + 1}/{self._plan_length}")
        for step in update.get("steps", []) if isinstance(update.get("steps"), list) else []:
            if step["status"] in ("done", "failed", "skipped"):
                style = "green" if step["status"] == "done" else "red"
                self.line(Text(f"    Step {self._cursor + 1} {step['status']}: ", style=f"bold {style}") +
                          Text(_clip(step["observation"].splitlines()[-1] if step["observation"] else "")))
        if "cursor" in update:
            self._cursor = int(update["cursor"])

    def _on_replan(self, update: dict[str, Any]) -> None:
        if update.get("plan") is not None:
            self._plan_length = len(update["plan"])
        for step in update.get("steps", []):
            if step["status"] in ("replan", "replan_failed"):
                self.line(Text("Replan: ", style="bold yellow") + Text(_clip(step["thought"], 200)))
                for row in step["observation"].splitlines():
                    self.line(Text(f"    {_clip(row, 200)}"))

    # Reflexion: each trial is a ReAct run (its steps print as ReAct's), then its evaluation and, after a
    # failed one, the lesson the next trial is given.
    def _on_load_lessons(self, update: dict[str, Any]) -> None:
        lessons = update.get("lessons") or []
        known = f" · {len(lessons)} lesson(s) from earlier turns" if lessons else ""
        self._trial = 1
        self.line(Text("Trial 1", style="bold cyan") + Text(known, style="dim"))

    def _on_evaluate(self, update: dict[str, Any]) -> None:
        verdict = update.get("evaluation") or {}
        passed = bool(verdict.get("passed"))
        self.line(Text(f"    Evaluation [trial {self._trial} · by {verdict.get('by', '?')}]: ", style="bold") +
                  Text("passed" if passed else "failed", style="green" if passed else "red") +
                  Text(f" — {_clip(str(verdict.get('reason', '')), 200)}" if verdict.get("reason") else ""))

    def _on_self_reflect(self, update: dict[str, Any]) -> None:
        for step in update.get("steps", []):
            if step["status"] == "lesson":
                self.line(Text("    Lesson: ", style="bold yellow") + Text(_clip(step["observation"], 300)))
        self._trial += 1
        self.line(Text(f"Trial {self._trial}", style="bold cyan"))

    def _model_failures(self, update: dict[str, Any]) -> None:
        for step in update.get("steps", []) if isinstance(update.get("steps"), list) else []:
            if step["status"] in ("model_error", "empty_reply", "format_error"):
                self.line(Text("    Model: ", style="bold red") + Text(_clip(step["observation"])))

    def _on_respond(self, update: dict[str, Any]) -> None:
        for step in update.get("steps", []):
            if step["status"] == "structured_response":
                self.line(Text("    Structured response: ", style="bold green") + Text(_clip(step["observation"])))
            else:
                self.line(Text("    No structured response: ", style="bold red") + Text(_clip(step["thought"])))

    def final(self, result: dict[str, Any], elapsed_s: float) -> None:
        if self._streaming:
            self.console.print()
            self._streaming = False
        status = result.get("status") or "failed"
        tokens = usage_totals(result)["total_tokens"]
        # A status no model's account of the question's parts backs says so (statuses.md: coverage "unchecked").
        from reactgraph.nodes.closing import shown_status  # here, not at the top: the CLI starts before LangGraph

        shown = shown_status(status, result.get("coverage"))
        title = (f"Final answer · {shown} · {result.get('iteration', 0)} iteration(s) · {elapsed_s:.2f} s · "
                 f"~{tokens} tokens")
        self.console.print(Panel(Text(terminal_safe(result.get("final_answer") or "(no answer)")), title=title,
                                 border_style=STATUS_STYLE.get(status, "red"), title_align="left"))


def usage_totals(result: dict[str, Any]) -> dict[str, Any]:
    """What the turn used, from its `usage` channel (every model call, the provider's count or the estimate):
    tokens in, out and in all, model calls' seconds, tool calls and cost. A state without the channel (a run
    from before it existed) counts its steps' tokens."""
    usage = result.get("usage") or {}
    tokens_in, tokens_out = int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
    total = tokens_in + tokens_out or sum(int(s.get("tokens", 0)) for s in result.get("steps", []))
    return {"input_tokens": tokens_in, "output_tokens": tokens_out, "total_tokens": total,
            "model_seconds": round(float(usage.get("model_seconds", 0.0)), 3),
            "tool_calls": int(usage.get("tool_calls", 0)), "cost_usd": float(usage.get("cost_usd", 0.0))}




class SafeConsole(Console):
    """A rich `Console` that passes the text of every segment it writes through `terminal_safe` (its own
    control segments and the styles' escape codes are rich's and pass unchanged)."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else Segment(terminal_safe(segment.text), segment.style)
            for segment in buffer)
