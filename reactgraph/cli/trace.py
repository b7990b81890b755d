"""`reactgraph trace`: the timeline of one turn of a session (nodes, model calls, tool calls, durations and
statuses), read from its checkpoints: for users without a tracing backend."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from reactgraph.cli.shared import STORE_HELP, TtlOption, UserError, open_store, parse_ttl, session_option


def show_trace(
    session: Annotated[str, typer.Option(metavar="ID", help="Session (thread) id.")],
    turn: Annotated[int | None, typer.Option(metavar="N", show_default=False,
                                             help="Which turn, 1 for the first (default: the last).")] = None,
    store: Annotated[str | None, typer.Option(metavar="URL", help=STORE_HELP)] = None,
    ttl: TtlOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show how a turn ran: each node in order with its start offset and duration, the model calls (tokens)
    and tool calls (status, latency) it made, and the turn's final status."""
    session = session_option(session) or session
    opened = open_store(store, parse_ttl(ttl))
    from reactgraph.cli.history import unreadable_as_user_error
    from reactgraph.graph.react import build_react_graph
    from reactgraph.graph.timeline import TraceError, turn_timeline

    try:
        with unreadable_as_user_error(session):
            timeline = turn_timeline(build_react_graph(checkpointer=opened.saver), session, turn)
    except TraceError as exc:
        raise UserError(str(exc)) from exc
    if as_json:
        sys.stdout.write(json.dumps(timeline, ensure_ascii=False, default=str) + "\n")
        return
    from reactgraph.cli.console_view import SafeConsole

    SafeConsole(highlight=False).print(render(timeline), markup=False, soft_wrap=True)


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


def render(t: dict[str, Any]) -> str:
    """The timeline as indented text: a header, one line per node, its calls beneath it, the outcome."""
    usage = t["usage"]
    tokens = (f" · {usage.get('input_tokens', 0)} tokens in, {usage.get('output_tokens', 0)} out"
              if usage.get("input_tokens") is not None else "")
    status = "unfinished (next: " + ", ".join(t["next"]) + ")" if t["unfinished"] else (t["status"] or "-")
    lines = [f"Turn {t['turn']} of {t['turns']} · session {t['session']} · {status} · {_ms(t['duration_ms'])}"
             f"{tokens} · {t['model_calls']} model call(s), {t['tool_calls']} tool call(s)"]
    if t["question"]:
        lines.append(f"Q: {t['question'][:200]}")
    width = max([len(node["node"]) for node in t["nodes"]] + [4])
    for node in t["nodes"]:
        lines.append(f"  {'+' + _ms(node['start_ms']):>9}  {node['node']:<{width}}  {_ms(node['duration_ms']):>8}")
        for call in node["model_calls"]:
            wants = f" → {', '.join(call['tool_calls'])}" if call["tool_calls"] else ""
            model = f" {call['model']}" if call["model"] else ""
            lines.append(f"      model{model}: {call['input_tokens'] or 0} tokens in, "
                         f"{call['output_tokens'] or 0} out{wants}")
        for call in node["tool_calls"]:
            args = json.dumps(call["args"], ensure_ascii=False, default=str)
            lines.append(f"      tool {call['tool']}({args[:80]}) · {call['status']} · {_ms(call['latency_ms'])}")
        for record in node["records"]:
            tokens_used = f" · {record['tokens']} tokens" if record["tokens"] else ""
            lines.append(f"      {record['node']}: {record['status']}{tokens_used}")
    if t["answer"]:
        answer = t["answer"].strip().replace("\n", " ")
        lines.append(f"Final ({t['status']}): {answer[:200]}{'…' if len(answer) > 200 else ''}")
    return "\n".join(lines)
