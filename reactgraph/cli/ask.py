"""`reactgraph ask`: answer a question on a session, showing every step live.

The first line (model · store · session) is printed before the graph is imported and built, so a user sees
at once what is about to run; LangGraph, the nodes and the tools are imported only after it.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from reactgraph.cli.approval_prompt import APPROVE_HELP
from reactgraph.cli.history import check_newest, unreadable_as_user_error
from reactgraph.cli.shared import (
    MCP_HELP,
    RETRIEVER_HELP,
    STORE_HELP,
    TOOLS_HELP,
    FallbackModelOption,
    MaxCost,
    MaxTokens,
    MaxToolCalls,
    OtelOption,
    Protocol,
    ProtocolOption,
    Reflection,
    ReflectionOption,
    RequireApproval,
    ResponseFormatOption,
    SkipApproval,
    TtlOption,
    UserError,
    approval_flags,
    budget_flags,
    build_context,
    check_index,
    close_shared_stores,
    gateway_with,
    load_response_format,
    long_term_store,
    model_label,
    open_store,
    parse_ttl,
    question_argument,
    session_option,
    store_errors,
    traced,
)
from reactgraph.graph import GRAPH_BUILDERS

BUSY_EXIT = 75  # EX_TEMPFAIL: the session is busy with another turn; the same command later will run
WAIT_HELP = "Seconds to wait for another turn on the same session to finish before giving up (exit 75)."
INDEX_HELP = ("Knowledge-base index rag_search reads (see `reactgraph ingest`; default: $REACTGRAPH_INDEX, "
              "else the bundled knowledge base).")


# The options of `ask` whose declarations take more than a line.
QuestionArgument = Annotated[str, typer.Argument(metavar="QUESTION", help="The question to answer.")]
SessionOption = Annotated[str | None, typer.Option(metavar="ID", help="Session (thread) id; a new one if omitted.")]
ModelOption = Annotated[str | None, typer.Option(metavar="SPEC", help="offline | openai:<model> | anthropic:<model> "
                                                                      "(default: $REACTGRAPH_MODEL or offline).")]
AllowOption = Annotated[list[str], typer.Option(metavar="TOOL",
                                                help="Allow only these tools (names or tags); repeatable.")]
DenyOption = Annotated[list[str], typer.Option(metavar="TOOL", help="Deny these tools (names or tags); repeatable.")]
FromOption = Annotated[str | None, typer.Option("--from", metavar="CHECKPOINT",
                                                help="Fork the session from this checkpoint "
                                                     "(see `reactgraph history`).")]
ApproveOption = Annotated[list[str], typer.Option("--approve", metavar="all|none|TOOL", help=APPROVE_HELP)]


def _known_graph(name: str | None) -> str | None:
    if name is not None and name not in GRAPH_BUILDERS:
        raise typer.BadParameter(f"unknown graph {name!r}: choose from {', '.join(GRAPH_BUILDERS)}")
    return name


GraphOption = Annotated[str | None, typer.Option(
    "--graph", metavar="|".join(GRAPH_BUILDERS), callback=_known_graph,
    help="Which paradigm answers: ReAct, Plan-and-Solve or Reflexion, each showing its own steps (default: the "
         "session's graph, else react).")]


def ask(
    question: QuestionArgument,
    session: SessionOption = None,
    graph: GraphOption = None,
    model: ModelOption = None,
    max_iterations: Annotated[int, typer.Option(help="Think→act rounds before answering from what was gathered.")] = 5,
    max_tool_calls: MaxToolCalls = None,
    max_tokens: MaxTokens = None,
    max_cost: MaxCost = None,
    reflection: ReflectionOption = Reflection.llm,
    protocol: ProtocolOption = Protocol.tools,
    allow: AllowOption = [],  # noqa: B006
    deny: DenyOption = [],  # noqa: B006
    from_checkpoint: FromOption = None,
    store: Annotated[str | None, typer.Option(metavar="URL", help=STORE_HELP)] = None,
    ttl: TtlOption = None,
    tools: Annotated[list[str], typer.Option("--tools", metavar="MODULE:ATTR", help=TOOLS_HELP)] = [],  # noqa: B006
    mcp: Annotated[Path | None, typer.Option("--mcp", metavar="FILE", help=MCP_HELP)] = None,
    index: Annotated[Path | None, typer.Option("--index", metavar="DIR", help=INDEX_HELP)] = None,
    retriever: Annotated[str | None, typer.Option("--retriever", metavar="MODULE:ATTR", help=RETRIEVER_HELP)] = None,
    response_format: ResponseFormatOption = None,
    fallback_model: FallbackModelOption = [],  # noqa: B006
    wait: Annotated[float, typer.Option("--wait", metavar="SECONDS", min=0, help=WAIT_HELP)] = 300.0,
    no_wait: Annotated[bool, typer.Option("--no-wait", help="If the session is busy, exit 75 at once.")] = False,
    require_approval: RequireApproval = [],  # noqa: B006
    skip_approval: SkipApproval = [],  # noqa: B006
    approve: ApproveOption = [],  # noqa: B006
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object and nothing else.")] = False,
    debug: Annotated[bool, typer.Option(help="Show tracebacks and tool-call logs.")] = False,
    otel: OtelOption = False,
) -> None:
    """Answer QUESTION, showing each step live (--graph: ReAct, Plan-and-Solve or Reflexion, each its own steps).

    With --session, the conversation continues; a run that was interrupted (Ctrl-C stops it after the step under
    way, a second Ctrl-C at once; killed; Redis gone) resumes from its last checkpoint when the same question is
    asked again on the same session. One turn runs at a
    time per session: a second ask on it waits (--wait) or, with --no-wait, exits 75. Calls of tools that
    need approval (http_get, MCP tools) are put to you at a terminal, or answered by --approve.
    """
    question = question_argument(question)
    session = session_option(session)
    context = build_context(model, max_iterations, reflection, protocol, allow, deny,
                            {**budget_flags(max_tool_calls, max_tokens, max_cost),
                             **approval_flags(require_approval, skip_approval),
                             **({"fallback_models": tuple(fallback_model)} if fallback_model else {})})
    if from_checkpoint and not session:
        raise UserError("--from needs --session: a checkpoint belongs to a session")
    check_index(index)
    options = AskOptions(from_checkpoint, store, ttl, tools, mcp, index, 0.0 if no_wait else wait, approve, as_json,
                         otel, retriever, load_response_format(response_format), graph)
    _answer(question, session or uuid.uuid4().hex[:12], context, options)


@dataclass(frozen=True)
class AskOptions:
    """The options of `ask` past its context: where the turn starts, its store and tools, how it is answered."""

    from_checkpoint: str | None
    store: str | None
    ttl: str | None
    tools: list[str]
    mcp: Path | None
    index: Path | None
    wait_s: float
    approve: list[str]
    as_json: bool
    otel: bool
    retriever: str | None = None
    response_format: Any = None  # a models.response_format.ResponseFormat
    graph: str | None = None  # --graph: None is the session's own graph, else react


def _answer(question: str, session: str, context: Any, options: AskOptions) -> None:
    """Load the model and open the store (bad config: one line before anything runs), then run the turn."""
    from reactgraph.models.loader import load_chat_model

    # With fallbacks, a model that cannot be loaded fails over like one that cannot be reached (structured-output.md)
    chat_model = None if context.fallback_models else load_chat_model(context.model, context.temperature)
    opened = open_store(options.store, parse_ttl(options.ttl))
    graph_name = _graph_of(opened.saver, session, options.graph)
    out = None
    if not options.as_json:
        from reactgraph.cli.console_view import SafeConsole
        out = SafeConsole(soft_wrap=False)
        out.print(f"[dim]model: {model_label(context.model)} · store: {opened.description} · "
                  f"session: {session} · graph: {graph_name}[/dim]", soft_wrap=True)
        out.file.flush()

    from reactgraph.graph import graph_builder

    # Metrics go to the store's Redis; breakers stay this process's: a one-shot command sharing them would let
    # failures of unrelated runs refuse its calls (a worker service passes RedisBreakerStore itself).
    gateway = gateway_with(options.tools, options.index, context, options.mcp, shared_url=opened.redis_url,
                           share_breakers=False, retriever=options.retriever)
    approver = _approver(options.approve, gateway, interactive=not options.as_json and sys.stdin.isatty())
    graph = graph_builder(graph_name)(gateway, checkpointer=opened.saver, store=long_term_store(opened),
                                      model=chat_model, response_format=options.response_format)
    try:
        with traced(options.otel), unreadable_as_user_error(session), _stopped_by_ctrl_c(question, session):
            result, elapsed, mode = _turn(graph, question, session, options.from_checkpoint, context, out,
                                          options.wait_s, approver)
    finally:
        gateway.close()  # the MCP servers' sessions (stdio servers' processes end with them)
        close_shared_stores(gateway)  # the calls' metrics reach Redis before this process ends
    _report(result, session, context.model, elapsed, mode, as_json=options.as_json, graph=graph_name)


def _graph_of(saver: Any, session: str, asked: str | None) -> str:
    """The graph that answers: --graph, else the session's own (its checkpoints name it), else react. A session
    holds one paradigm's state, so --graph naming another is refused rather than run on that state."""
    from reactgraph.graph import session_graph

    recorded = session_graph(saver, session)
    if asked and recorded and asked != recorded:
        raise UserError(f"session {session!r} is a {recorded} session: ask it with --graph {recorded} (or leave "
                        f"--graph out), or start a new session for {asked}")
    return asked or recorded or "react"


def _report(result: dict, session: str, model: str, elapsed: float, mode: str, *, as_json: bool,
            graph: str) -> None:
    """The --json object (the steps were printed live otherwise); exit 1 unless the turn gave an answer."""
    if not result.get("status"):  # never an exit 0 with "answer": null: the store did not give the turn back
        raise UserError(f"the run on session {session!r} left no answer in the store; "
                        f"see `reactgraph history --session {session}`")
    if as_json:
        payload = _json_payload(result, session, model, elapsed, mode, graph)
        sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
    from reactgraph.nodes.closing import SUCCESS_STATUSES

    if result.get("status") not in SUCCESS_STATUSES:  # exit 0 only for an answer: answered or partial
        raise typer.Exit(1)


def _approver(approve: list[str], gateway: Any, *, interactive: bool) -> Any:
    """Who answers approval requests: --approve, else the person at the terminal, else a rejection."""
    from reactgraph.cli.approval_prompt import ApprovalSpecError, make_approver

    def tags_of(name: str) -> tuple[str, ...]:
        meta = gateway.registry.get(name)
        return meta.tags if meta is not None else ()

    try:
        return make_approver(approve, tags_of, interactive=interactive)
    except ApprovalSpecError as exc:
        raise UserError(str(exc)) from exc


def _turn(graph: Any, question: str, session: str, from_checkpoint: str | None, context: Any, out: Any,
          wait_s: float, approver: Any = None) -> tuple[dict, float, str]:
    """One turn under the session's lease, planned under it too (resume or new is decided by the holder)."""
    from reactgraph.graph.sessions import plan_run

    with ExitStack() as turn:
        _hold_session(turn, graph, session, wait_s)
        if not from_checkpoint:  # a damaged newest checkpoint stops the turn with a hint, never loses it
            check_newest(graph.checkpointer, session)
        try:
            plan = plan_run(graph, question, session, from_checkpoint)
        except LookupError as exc:
            raise UserError(str(exc)) from exc
        result, elapsed = _run(graph, plan, context, out, from_checkpoint, approver, _resume_hint(question, session))
    return result, elapsed, plan.mode


def _hold_session(turn: ExitStack, graph: Any, session: str, wait_s: float) -> None:
    """Take the session's lease for this turn, saying on stderr that (and why) we wait; busy: exit 75."""
    from reactgraph.memory.session_lease import LeaseHolder, SessionBusy, session_lease

    def waiting(session: str, holder: LeaseHolder | None, wait_s: float) -> None:
        since = f" ({holder.describe()})" if holder else ""
        sys.stderr.write(f"session {session!r} is busy with another turn{since}; waiting up to {wait_s:g} s…\n")
        sys.stderr.flush()

    try:
        turn.enter_context(session_lease(graph, session, wait_s=wait_s, on_wait=waiting))
    except SessionBusy as exc:
        sys.stderr.write(f"error: {exc}\n")
        raise typer.Exit(BUSY_EXIT) from exc
    except store_errors() as exc:
        raise UserError(str(exc)) from exc


def _json_payload(result: dict, session: str, model: str, elapsed: float, mode: str,
                  graph: str) -> dict[str, Any]:
    """What `--json` prints: the one object documented in the README, the same keys for every graph (a
    paradigm's own steps, plan and replan or trial and lesson, are among its `steps` records)."""
    from reactgraph.cli.console_view import usage_totals
    from reactgraph.models.response_format import jsonable

    return {"answer": result.get("final_answer"), "status": result.get("status"), "coverage": result.get("coverage"),
            "session": session, "graph": graph, "model": model, "iterations": result.get("iteration", 0),
            "elapsed_s": round(elapsed, 3), "resumed": mode == "resume", "usage": usage_totals(result),
            "steps": result.get("steps", []), "structured_response": jsonable(result.get("structured_response"))}


def _run(graph: Any, plan: Any, context: Any, out: Any, from_checkpoint: str | None, approver: Any,
         resume_hint: str) -> tuple[dict, float]:
    """Run the planned turn, printing each step to `out` (none with --json); the final state and wall time."""
    from langgraph.runtime import RunControl

    from reactgraph.cli.prune import refresh_session
    from reactgraph.graph.sessions import run
    from reactgraph.memory.session_lease import SessionLeaseLost

    printer = None
    if out is not None:
        from reactgraph.cli.console_view import StepPrinter

        printer = StepPrinter(out)
        notes = {"resume": "resuming the unfinished run", "fork": f"forked from {from_checkpoint}"}
        if plan.mode in notes:
            out.print(f"[dim]{notes[plan.mode]}[/dim]", soft_wrap=True)
    started = time.perf_counter()
    control = RunControl()
    try:
        with _drain_on_ctrl_c(control, resume_hint):
            result = run(graph, plan, context, printer.update if printer else None,
                         printer.token if printer else None, on_event=printer.event if printer else None,
                         approver=approver, control=control)
        refresh_session(graph.store, plan.config["configurable"]["thread_id"])  # its Q&A log lives on with it
    except store_errors() as exc:
        raise UserError(f"{exc}; the session is saved up to its last checkpoint: run the same command again "
                        "to resume") from exc
    except SessionLeaseLost as exc:
        raise UserError(str(exc)) from exc
    elapsed = time.perf_counter() - started
    if printer:
        printer.final(result, elapsed)
    return result, elapsed


INTERRUPTED_EXIT = 130  # as a shell reports a command stopped by Ctrl-C (128 + SIGINT)


@contextmanager
def _drain_on_ctrl_c(control: Any, resume_hint: str) -> Iterator[None]:
    """While the turn runs, the first Ctrl-C asks it to stop at the next step boundary (the step under way
    finishes and is saved; `GraphDrained` then ends the run) and the second stops the process at once.

    At once means without waiting for the calls under way: LangGraph's executor waits for its running tasks
    before an exception leaves `stream`, so a KeyboardInterrupt would wait out a slow tool. The process ends
    instead, and loses nothing finished: each step and each finished call is saved as it ends (durability
    "sync"); the session's lease, left behind, is taken over at once by the next turn on this machine.

    A thread of its own answers both Ctrl-Cs, from the bytes the interpreter's C-level handler writes to the wakeup
    fd at once, whichever thread the signal reached. Python runs a signal's Python handler on the main thread only,
    when that thread next runs Python code; a main thread waiting on a tool that never ends may not get there (the
    suite saw a second Ctrl-C go unanswered for a minute once under load, and a first one for 30 s: the drain never
    asked). The Python handler is there only so that no KeyboardInterrupt is raised."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return

    def drain() -> None:
        control.request_drain("Ctrl-C")  # one attribute write: safe from any thread (LangGraph's RunControl)
        sys.stderr.write("\nstopping after the step under way (Ctrl-C again stops at once)…\n")
        sys.stderr.flush()

    def stop_now() -> None:
        os.write(2, ("\n" + resume_hint).encode())
        os._exit(INTERRUPTED_EXIT)

    previous = signal.signal(signal.SIGINT, _answered_by_the_watching_thread)
    watch_end, wake_end = os.pipe()
    os.set_blocking(wake_end, False)
    previous_wakeup = signal.set_wakeup_fd(wake_end, warn_on_full_buffer=False)
    threading.Thread(target=_count_ctrl_c, args=(watch_end, drain, stop_now), name="reactgraph-ctrl-c",
                     daemon=True).start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous_wakeup)
        signal.signal(signal.SIGINT, previous)
        os.close(wake_end)  # the watching thread reads the end of the pipe and closes its end


def _answered_by_the_watching_thread(_signum: int, _frame: object) -> None:
    """SIGINT's Python handler while a turn runs: nothing to do (see `_drain_on_ctrl_c`)."""


def _count_ctrl_c(watch_end: int, drain: Callable[[], None], stop_now: Callable[[], None]) -> None:
    """Until the pipe closes: each byte is the number of a signal the process received; the first SIGINT drains
    the turn, the second stops the process (both in one read: stopped at once)."""
    seen = 0
    try:
        while chunk := os.read(watch_end, 64):
            before, seen = seen, seen + chunk.count(signal.SIGINT)
            if seen >= 2:
                stop_now()
            elif seen == 1 and before == 0:
                drain()
    finally:
        os.close(watch_end)


@contextmanager
def _stopped_by_ctrl_c(question: str, session: str) -> Iterator[None]:
    """A turn stopped by Ctrl-C (drained at a step boundary, or interrupted at once) ends the command with one
    line saying that the turn is saved and how to resume it, and exit 130."""
    from langgraph.errors import GraphDrained

    try:
        yield
    except (GraphDrained, KeyboardInterrupt):
        sys.stderr.write(_resume_hint(question, session))
        raise typer.Exit(INTERRUPTED_EXIT) from None


def _resume_hint(question: str, session: str) -> str:
    return (f"interrupted: the turn is saved up to its last finished step; to resume it, ask the same question on "
            f"the session: reactgraph ask --session {shlex.quote(session)} {shlex.quote(question)}\n")
