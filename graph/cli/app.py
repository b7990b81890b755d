"""The `reactgraph` command: ask a question and watch every step; list the tools."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from typer.exceptions import TyperException

from reactgraph.graph.cli.console_view import StepPrinter
from reactgraph.graph.react import build_react_graph
from reactgraph.graph.sessions import history, plan_run, run
from reactgraph.memory.checkpointer import CheckpointerConfigError, open_checkpointer
from reactgraph.memory.embedded_redis import EmbeddedRedisError
from reactgraph.memory.redis_checkpoint import CheckpointStoreUnavailable, InvalidRedisURL
from reactgraph.nodes.shared.context import Context
from reactgraph.models.loader import ModelConfigError, load_chat_model, parse_spec
from reactgraph.tools import ToolRegistrationError, default_gateway
from reactgraph.tools.plugins import load_tools

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="ReAct agents as explicit LangGraph state machines.")
err = Console(stderr=True, soft_wrap=True)


class UserError(Exception):
    """A problem the user can fix; shown as one line, without a traceback."""


STORE_ERRORS = (CheckpointStoreUnavailable, InvalidRedisURL, CheckpointerConfigError, EmbeddedRedisError)


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


TOOLS_HELP = ("Extra tools as module:attribute (repeatable; default: $REACTGRAPH_TOOLS); they replace "
              "built-ins of the same name.")


def gateway_with(tool_specs: list[str], rag_index: Path | None = None):
    try:
        return default_gateway(extra_tools=load_tools(tool_specs or None), rag_index=rag_index)
    except ToolRegistrationError as exc:
        raise UserError(str(exc)) from exc


STORE_HELP = ("Where sessions are kept: redis://host:port/db, rediss://…, unix:///path.sock, memory, "
              "sqlite:///path (default: $REDIS_URL, else the embedded Redis).")


def open_store(store: str | None):
    try:
        return open_checkpointer(store)
    except STORE_ERRORS as exc:
        raise UserError(str(exc)) from exc


def long_term_store(opened):
    """The Q&A log and lessons live beside the checkpoints: in the same Redis, else in this process."""
    if opened.redis_url:
        from reactgraph.memory import RedisStore
        return RedisStore.from_url(opened.redis_url)
    from langgraph.store.memory import InMemoryStore
    return InMemoryStore()


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
    from_checkpoint: Annotated[str | None, typer.Option("--from", help="Fork the session from this checkpoint "
                                                                       "(see `reactgraph history`).")] = None,
    store: Annotated[str | None, typer.Option(help=STORE_HELP)] = None,
    tools: Annotated[list[str], typer.Option("--tools", help=TOOLS_HELP)] = [],  # noqa: B006
    index: Annotated[Path | None, typer.Option("--index", help="Knowledge-base index rag_search reads (see "
                                                               "`reactgraph ingest`; default: $REACTGRAPH_INDEX, "
                                                               "else the bundled knowledge base).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object and nothing else.")] = False,
    debug: Annotated[bool, typer.Option(help="Show tracebacks and tool-call logs.")] = False,
) -> None:
    """Answer QUESTION, showing each Thought → Action → Observation → Reflection step live.

    With --session, the conversation continues; a run that was interrupted (killed, Redis gone) resumes
    from its last checkpoint when the same question is asked again on the same session.
    """
    context = build_context(model, max_iterations, reflection, protocol, allow, deny)
    if from_checkpoint and not session:
        raise UserError("--from needs --session: a checkpoint belongs to a session")
    session = session or uuid.uuid4().hex[:12]
    # Loading the model and opening the store first turns bad config into one line before anything runs.
    chat_model = load_chat_model(context.model, context.temperature)
    opened = open_store(store)
    graph = build_react_graph(gateway_with(tools, index), checkpointer=opened.saver, store=long_term_store(opened),
                              model=chat_model)
    try:
        plan = plan_run(graph, question, session, from_checkpoint)
    except LookupError as exc:
        raise UserError(str(exc)) from exc
    out = Console(soft_wrap=False)
    printer = None if as_json else StepPrinter(out)
    if printer:
        resumed = {"resume": " · resuming the unfinished run", "fork": f" · forked from {from_checkpoint}"}
        out.print(f"[dim]model: {model_label(context.model)} · store: {opened.description} · "
                  f"session: {session}{resumed.get(plan.mode, '')}[/dim]", soft_wrap=True)
    started = time.perf_counter()
    try:
        result = run(graph, plan, context, printer.update if printer else None, printer.token if printer else None)
    except STORE_ERRORS as exc:
        raise UserError(f"{exc}; the session is saved up to its last checkpoint: run the same command again "
                        "to resume") from exc
    elapsed = time.perf_counter() - started
    if as_json:
        payload = {"answer": result.get("final_answer"), "status": result.get("status"), "session": session,
                   "model": context.model, "iterations": result.get("iteration", 0),
                   "elapsed_s": round(elapsed, 3), "resumed": plan.mode == "resume", "steps": result.get("steps", [])}
        sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
    else:
        printer.final(result, elapsed)
    if result.get("status") == "failed":
        raise typer.Exit(1)


@app.command("history")
def show_history(
    session: Annotated[str, typer.Option(help="Session (thread) id.")],
    limit: Annotated[int, typer.Option(help="Show at most this many checkpoints.")] = 50,
    store: Annotated[str | None, typer.Option(help=STORE_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List a session's checkpoints, newest first; fork from one with `ask --session ID --from CHECKPOINT`."""
    graph = build_react_graph(default_gateway(), checkpointer=open_store(store).saver)
    rows = list(history(graph, session, limit))
    if not rows:
        raise UserError(f"session {session!r} has no checkpoints in this store")
    if as_json:
        sys.stdout.write(json.dumps(rows, ensure_ascii=False, default=str) + "\n")
        return
    table = Table(title=f"Checkpoints of session {session} (newest first)")
    for column in ("checkpoint", "step", "node", "next", "time", "summary"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(row["checkpoint"], str(row["step"]), row["node"], ",".join(row["next"]) or "-",
                      str(row["time"])[:19], row["summary"])
    Console().print(table)


@app.command("tools")
def list_tools(
    tools: Annotated[list[str], typer.Option("--tools", help=TOOLS_HELP)] = [],  # noqa: B006
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the tools: description, parameters, limits and circuit-breaker state."""
    rows = asyncio.run(gateway_with(tools).status())
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


from reactgraph.graph.cli.compare import compare  # noqa: E402 - registered here, beside the other commands

app.command("compare")(compare)

from reactgraph.graph.cli.ingest import ingest  # noqa: E402 - registered here, beside the other commands

app.command("ingest")(ingest)


@app.command()
def studio(
    host: Annotated[str, typer.Option(help="Interface to serve on.")] = "127.0.0.1",
    port: Annotated[int | None, typer.Option(help="Port (default: a free one; 2024 may be taken).")] = None,
    browser: Annotated[bool, typer.Option(help="Open LangGraph Studio in a browser.")] = False,
) -> None:
    """Serve the graphs to LangGraph Studio (`langgraph dev`), with no analytics or version checks."""
    from reactgraph.graph.studio import run_studio  # imported on demand: it needs the dev extra's langgraph-cli

    raise typer.Exit(run_studio(host, port, browser))


def main(argv: list[str] | None = None) -> int:
    """Entry point: user errors become one line on stderr and a non-zero exit; tracebacks only with --debug."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    if debug:
        import logging
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")
    try:
        # Without standalone mode the exit code of a `typer.Exit` comes back as the return value.
        code = app(args=argv, prog_name="reactgraph", standalone_mode=False)
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
    return code if isinstance(code, int) else 0


def entry_point() -> None:
    sys.exit(main())
