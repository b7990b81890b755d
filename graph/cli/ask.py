"""`reactgraph ask`: answer a question on a session, showing every step live.

The first line (model · store · session) is printed before the graph is imported and built, so a user sees
at once what is about to run; LangGraph, the nodes and the tools are imported only after it.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer

from reactgraph.graph.cli.history import check_newest, unreadable_as_user_error
from reactgraph.graph.cli.shared import (
    PROTOCOL_HELP,
    REFLECTION_HELP,
    STORE_HELP,
    TOOLS_HELP,
    Protocol,
    Reflection,
    UserError,
    build_context,
    gateway_with,
    long_term_store,
    model_label,
    open_store,
    store_errors,
)

INDEX_HELP = ("Knowledge-base index rag_search reads (see `reactgraph ingest`; default: $REACTGRAPH_INDEX, "
              "else the bundled knowledge base).")


def ask(
    question: Annotated[str, typer.Argument(metavar="QUESTION", help="The question to answer.")],
    session: Annotated[str | None, typer.Option(metavar="ID",
                                                help="Session (thread) id; a new one if omitted.")] = None,
    model: Annotated[str | None, typer.Option(metavar="SPEC", help="offline | openai:<model> | anthropic:<model> "
                                                   "(default: $REACTGRAPH_MODEL or offline).")] = None,
    max_iterations: Annotated[int, typer.Option(help="Think→act rounds before answering from what was gathered.")] = 5,
    reflection: Annotated[Reflection, typer.Option(help=REFLECTION_HELP)] = Reflection.llm,
    protocol: Annotated[Protocol, typer.Option(help=PROTOCOL_HELP)] = Protocol.tools,
    allow: Annotated[list[str], typer.Option(metavar="TOOL",
                                             help="Allow only these tools (names or tags); repeatable.")] = [],  # noqa: B006
    deny: Annotated[list[str], typer.Option(metavar="TOOL",
                                            help="Deny these tools (names or tags); repeatable.")] = [],  # noqa: B006
    from_checkpoint: Annotated[str | None, typer.Option("--from", metavar="CHECKPOINT",
                                                        help="Fork the session from this checkpoint "
                                                             "(see `reactgraph history`).")] = None,
    store: Annotated[str | None, typer.Option(metavar="URL", help=STORE_HELP)] = None,
    tools: Annotated[list[str], typer.Option("--tools", metavar="MODULE:ATTR", help=TOOLS_HELP)] = [],  # noqa: B006
    index: Annotated[Path | None, typer.Option("--index", metavar="DIR", help=INDEX_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object and nothing else.")] = False,
    debug: Annotated[bool, typer.Option(help="Show tracebacks and tool-call logs.")] = False,
) -> None:
    """Answer QUESTION, showing each Thought → Action → Observation → Reflection step live.

    With --session, the conversation continues; a run that was interrupted (killed, Redis gone) resumes
    from its last checkpoint when the same question is asked again on the same session.
    """
    from reactgraph.models.loader import load_chat_model

    context = build_context(model, max_iterations, reflection, protocol, allow, deny)
    if from_checkpoint and not session:
        raise UserError("--from needs --session: a checkpoint belongs to a session")
    session = session or uuid.uuid4().hex[:12]
    # Loading the model and opening the store first turns bad config into one line before anything runs.
    chat_model = load_chat_model(context.model, context.temperature)
    opened = open_store(store)
    out = None
    if not as_json:
        from rich.console import Console

        out = Console(soft_wrap=False)
        out.print(f"[dim]model: {model_label(context.model)} · store: {opened.description} · "
                  f"session: {session}[/dim]", soft_wrap=True)
        out.file.flush()

    from reactgraph.graph.react import build_react_graph
    from reactgraph.graph.sessions import plan_run

    graph = build_react_graph(gateway_with(tools, index), checkpointer=opened.saver, store=long_term_store(opened),
                              model=chat_model)
    with unreadable_as_user_error(session):
        if not from_checkpoint:
            check_newest(opened.saver, session)
        try:
            plan = plan_run(graph, question, session, from_checkpoint)
        except LookupError as exc:
            raise UserError(str(exc)) from exc
        result, elapsed = _run(graph, plan, context, out, from_checkpoint)
    if not result.get("status"):  # never an exit 0 with "answer": null: the store did not give the turn back
        raise UserError(f"the run on session {session!r} left no answer in the store; "
                        f"see `reactgraph history --session {session}`")
    if as_json:
        sys.stdout.write(json.dumps(_json_payload(result, session, context.model, elapsed, plan.mode),
                                    ensure_ascii=False) + "\n")
    if result.get("status") == "failed":
        raise typer.Exit(1)


def _json_payload(result: dict, session: str, model: str, elapsed: float, mode: str) -> dict[str, Any]:
    """What `--json` prints: the one object documented in the README."""
    return {"answer": result.get("final_answer"), "status": result.get("status"), "session": session,
            "model": model, "iterations": result.get("iteration", 0), "elapsed_s": round(elapsed, 3),
            "resumed": mode == "resume", "steps": result.get("steps", [])}


def _run(graph: Any, plan: Any, context: Any, out: Any, from_checkpoint: str | None) -> tuple[dict, float]:
    """Run the planned turn, printing each step to `out` (none with --json); the final state and wall time."""
    from reactgraph.graph.sessions import run

    printer = None
    if out is not None:
        from reactgraph.graph.cli.console_view import StepPrinter

        printer = StepPrinter(out)
        notes = {"resume": "resuming the unfinished run", "fork": f"forked from {from_checkpoint}"}
        if plan.mode in notes:
            out.print(f"[dim]{notes[plan.mode]}[/dim]", soft_wrap=True)
    started = time.perf_counter()
    try:
        result = run(graph, plan, context, printer.update if printer else None, printer.token if printer else None)
    except store_errors() as exc:
        raise UserError(f"{exc}; the session is saved up to its last checkpoint: run the same command again "
                        "to resume") from exc
    elapsed = time.perf_counter() - started
    if printer:
        printer.final(result, elapsed)
    return result, elapsed
