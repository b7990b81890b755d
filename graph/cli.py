"""The `reactgraph` command: ask a question and watch every step; list the tools."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from typing import Annotated, Any

import typer
from typer.exceptions import TyperException
from langchain_core.messages import HumanMessage
from rich.console import Console
from rich.table import Table

from graph.console_view import StepPrinter
from graph.react import build_react_graph
from nodes.context import Context
from nodes.models.loader import ModelConfigError, load_chat_model, parse_spec
from tools import default_gateway

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="ReAct agents as explicit LangGraph state machines.")
err = Console(stderr=True, soft_wrap=True)


class UserError(Exception):
    """A problem the user can fix; shown as one line, without a traceback."""


def model_label(spec: str) -> str:
    provider, name = parse_spec(spec)
    return "offline (scripted offline model, not an LLM)" if provider == "offline" else f"{provider}:{name}"


def build_context(model: str | None, max_iterations: int, reflection: str, protocol: str,
                  allow: list[str], deny: list[str]) -> Context:
    try:
        context = Context(max_iterations=max_iterations, reflection=reflection, protocol=protocol,
                          allowed_tools=allow or None, denied_tools=deny, **({"model": model} if model else {}))
        parse_spec(context.model)
    except (ValueError, TypeError) as exc:
        raise UserError(str(exc)) from exc
    return context


async def run_question(graph, question: str, context: Context, session: str, printer: StepPrinter | None):
    config = {"configurable": {"thread_id": session}}
    async for node_updates in graph.astream({"messages": [HumanMessage(question)]}, config=config,
                                            context=context, stream_mode="updates"):
        for node, update in node_updates.items():
            if printer:
                printer.update(node, update)
    return (await graph.aget_state(config)).values


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question to answer.")],
    session: Annotated[str | None, typer.Option(help="Session (thread) id; a new one if omitted.")] = None,
    model: Annotated[str | None, typer.Option(help="offline | openai:<model> | anthropic:<model> "
                                                   "(default: $REACTGRAPH_MODEL or offline).")] = None,
    max_iterations: Annotated[int, typer.Option(help="Think→act rounds before answering from what was gathered.")] = 5,
    reflection: Annotated[str, typer.Option(help="llm | rules | off")] = "llm",
    protocol: Annotated[str, typer.Option(help="tools | text")] = "tools",
    allow: Annotated[list[str], typer.Option(help="Allow only these tools (names or tags); repeatable.")] = [],  # noqa: B006
    deny: Annotated[list[str], typer.Option(help="Deny these tools (names or tags); repeatable.")] = [],  # noqa: B006
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object and nothing else.")] = False,
    debug: Annotated[bool, typer.Option(help="Show tracebacks and tool-call logs.")] = False,
) -> None:
    """Answer QUESTION, showing each Thought → Action → Observation → Reflection step live."""
    context = build_context(model, max_iterations, reflection, protocol, allow, deny)
    session = session or uuid.uuid4().hex[:12]
    out = Console(soft_wrap=False)
    printer = None if as_json else StepPrinter(out)
    # Loading the model first turns a bad spec or a missing key into one line before anything runs.
    chat_model = load_chat_model(context.model, context.temperature)
    graph = build_react_graph(default_gateway(), checkpointer=_checkpointer(), model=chat_model)
    if not as_json:
        out.print(f"[dim]model: {model_label(context.model)} · store: in-process memory · session: {session}[/dim]")
    started = time.perf_counter()
    result = asyncio.run(run_question(graph, question, context, session, printer))
    elapsed = time.perf_counter() - started
    if as_json:
        payload = {"answer": result.get("final_answer"), "status": result.get("status"), "session": session,
                   "model": context.model, "iterations": result.get("iteration", 0),
                   "elapsed_s": round(elapsed, 3), "steps": result.get("steps", [])}
        sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
    else:
        printer.final(result, elapsed)
    if result.get("status") == "failed":
        raise typer.Exit(1)


@app.command("tools")
def list_tools(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List the tools: description, parameters, limits and circuit-breaker state."""
    rows = asyncio.run(default_gateway().status())
    if as_json:
        sys.stdout.write(json.dumps(rows, ensure_ascii=False, indent=2) + "\n")
        return
    table = Table(title="Tools (every call goes through the gateway pipeline)")
    for column in ("tool", "parameters", "timeout", "tags", "breaker", "description"):
        table.add_column(column)
    for row in rows:
        params = ", ".join(f"{k}{'' if k in row['schema'].get('required', []) else '?'}"
                           for k in row["schema"].get("properties", {}))
        table.add_row(row["name"], params, f"{row['timeout_s']:g}s", ",".join(row["tags"]),
                      row["breaker"]["state"], row["description"].split("\n")[0][:80])
    Console().print(table)


def _checkpointer() -> Any:
    from langgraph.checkpoint.memory import InMemorySaver
    return InMemorySaver()


def main(argv: list[str] | None = None) -> int:
    """Entry point: user errors become one line on stderr and a non-zero exit; tracebacks only with --debug."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    if debug:
        import logging
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")
    try:
        app(args=argv, prog_name="reactgraph", standalone_mode=False)
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        err.print("aborted")
        return 130
    except TyperException as exc:  # usage errors: unknown option, bad value, missing argument
        err.print(f"error: {exc.format_message()}", highlight=False, markup=False)
        return exc.exit_code
    except (UserError, ModelConfigError) as exc:
        if debug:
            raise
        err.print(f"error: {exc}", highlight=False, markup=False)
        return 2
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, not a traceback
        if debug:
            raise
        err.print(f"error: {type(exc).__name__}: {exc} (run with --debug for details)", highlight=False, markup=False)
        return 1
    return 0


def entry_point() -> None:
    sys.exit(main())
