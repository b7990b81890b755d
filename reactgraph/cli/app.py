"""The `reactgraph` command: ask a question and watch every step; list the tools; compare graphs; ingest.

This module is what `reactgraph --help` and `--version` import, so it imports typer and the command modules
only; each command imports the layers it uses (LangGraph, LangChain, Redis, numpy, faiss) when it runs.
"""

from __future__ import annotations

import functools
import sys
from typing import Annotated, Any

import typer
import typer.main
from typer.exceptions import TyperException

from reactgraph.cli.ask import ask
from reactgraph.cli.compare import compare
from reactgraph.cli.history import show_history, show_trace
from reactgraph.cli.ingest import ingest
from reactgraph.cli.prune import prune
from reactgraph.cli.serve import serve, worker
from reactgraph.cli.server import server_app
from reactgraph.cli.shared import is_user_error
from reactgraph.cli.tool_list import list_tools
from reactgraph.cli.ui import ui

# Plain (click-style) help: rich's boxed help would import rich and markdown-it first, doubling the time
# `reactgraph --help` takes (0.10x → 0.21x of `import langgraph.graph` measured by benchmarks/startup.py).
app = typer.Typer(add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="ReAct agents as explicit LangGraph state machines.")


def _print_version(value: bool) -> None:
    if value:
        from reactgraph import __version__

        typer.echo(f"reactgraph {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    log_format: Annotated[str | None, typer.Option(
        "--log-format", metavar="json|text", envvar="REACTGRAPH_LOG_FORMAT", show_envvar=False,
        help="Log records to stderr: one JSON object per line, or text (default: $REACTGRAPH_LOG_FORMAT, "
             "else none; --debug shows text).")] = None,
) -> None:
    """ReAct agents as explicit LangGraph state machines."""
    from reactgraph.cli.logs import check_format, configure

    state = ctx.obj if isinstance(ctx.obj, dict) else {}
    state["undo_logging"] = configure(check_format(log_format), bool(state.get("debug")))


# Short help: one line each in `reactgraph --help` at 80 columns; `reactgraph COMMAND --help` tells the rest.
app.command("ask", short_help="Answer a question, showing each step live.")(ask)
app.command("history", short_help="List a session's checkpoints, to fork from one.")(show_history)
app.command("tools", short_help="List the tools, their limits and breaker states.")(list_tools)
app.command("trace", short_help="Show a turn's timeline: nodes, model and tool calls.")(show_trace)
app.command("compare", short_help="Compare graphs on a task suite.")(compare)
app.command("ingest", short_help="Add documents to the knowledge base.")(ingest)
app.command("prune", short_help="Remove old checkpoints and idle sessions.")(prune)
app.command("serve", short_help="Serve the graphs over HTTP (LangGraph Agent Server API).")(serve)
app.command("worker", short_help="Execute the service's runs from Redis.")(worker)
app.command("ui", short_help="Open the local debugger page in a browser.")(ui)

# Sub-apps (groups of commands) are registered here; their modules, like the commands above, import only
# typer at module level.
app.add_typer(server_app, name="server", short_help="Show or stop the embedded Redis.")


@app.command(short_help="Serve the graphs to LangGraph Studio.")
def studio(
    host: Annotated[str, typer.Option(help="Interface to serve on.")] = "127.0.0.1",
    port: Annotated[int | None, typer.Option(help="Port (default: a free one; 2024 may be taken).")] = None,
    browser: Annotated[bool, typer.Option(help="Open LangGraph Studio in a browser.")] = False,
    store: Annotated[str | None, typer.Option(metavar="URL", help="The Redis where threads and sessions live: "
                                              "redis://host:port/db, rediss://…, unix:///path.sock (default: "
                                              "$REDIS_URL, else the embedded Redis).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", help="Print the dev server's log lines here (default: "
                                                            "to .langgraph_api/studio-server.log).")] = False,
) -> None:
    """Serve the graphs to LangGraph Studio (`langgraph dev`), with no analytics or version checks.

    Studio's threads are the CLI's sessions, in the same Redis: `reactgraph history --session ID` lists a thread
    made in Studio, and a session named by a UUID (`reactgraph ask --session UUID`) appears in Studio. The
    langgraph.json is ./langgraph.json if there is one, else the one shipped with react-graph.
    """
    from reactgraph.studio.launcher import run_studio  # imported on demand: it needs the dev extra's langgraph-cli

    raise typer.Exit(run_studio(host, port, browser, store=store, verbose=verbose))


@functools.cache
def click_command() -> Any:  # typer's own click (typer._click), not the click package
    """`app` as the click command typer makes of it, made once per process: typer reads every command's
    annotations to make it (≈ 30 ms of CPU), and a process may run `main` more than once (a test harness, a
    notebook, a process forked from one that has made it). What `app(...)` does, less typer's exception hook,
    which with pretty exceptions off hands every exception to Python's own."""
    return typer.main.get_command(app)


def _error(message: str) -> None:
    from reactgraph.cli.console_view import SafeConsole

    SafeConsole(stderr=True, soft_wrap=True).print(message, highlight=False, markup=False)


def _not_utf8(argv: list[str]) -> str | None:
    """The one-line error for the first argument that is not valid UTF-8, if any.

    Python hands undecodable argv bytes over as lone surrogates, which fail later, wherever the text is
    first encoded (a checkpoint, the terminal); refused here, before anything runs or is saved.
    """
    for position, arg in enumerate(argv, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            try:
                shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            except UnicodeEncodeError:  # a lone surrogate not from undecodable bytes (passed in by a caller)
                shown = arg.encode("utf-8", "backslashreplace").decode("utf-8")
            shown = shown if len(shown) <= 60 else shown[:59] + "…"
            return (f"error: argument {position} is not valid UTF-8 text: \"{shown}\"; "
                    "pass it in UTF-8 (check the terminal's or the file's encoding)")
    return None


def main(argv: list[str] | None = None) -> int:
    """Entry point: user errors become one line on stderr and a non-zero exit; tracebacks only with --debug."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if (bad_argument := _not_utf8(argv)) is not None:
        _error(bad_argument)
        return 2
    debug = "--debug" in argv
    state: dict = {"debug": debug}  # the callback configures logging (--log-format, --debug); undone on the way out
    try:
        # Without standalone mode the exit code of a `typer.Exit` comes back as the return value.
        code = click_command().main(args=argv, prog_name="reactgraph", standalone_mode=False, obj=state)
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        _error("aborted")
        return 130
    except TyperException as exc:  # usage errors: unknown option, bad value, missing argument
        if type(exc).__name__ == "NoArgsIsHelpError":  # a bare command or group: its help, and no error
            typer.echo(exc.format_message())
            return 0
        _error(f"error: {exc.format_message()}")
        return exc.exit_code
    except Exception as exc:  # the last line of defence: one line, not a traceback
        if debug:
            raise
        if is_user_error(exc):
            _error(f"error: {exc}")
            return 2
        import logging  # with --log-format, the log gets the traceback the terminal is spared

        logging.getLogger("reactgraph.cli").error("the command failed: %s", type(exc).__name__, exc_info=exc,
                                                  extra={"swallowed": {"error_type": type(exc).__name__}})
        _error(f"error: {type(exc).__name__}: {exc} (run with --debug for details)")
        return 1
    finally:
        if (undo := state.get("undo_logging")) is not None:
            undo()
    return code if isinstance(code, int) else 0


def entry_point() -> None:
    sys.exit(main())
