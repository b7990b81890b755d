"""What the commands share: option types and help texts (`--otel`, `--response-format`, `--fallback-model`
among them), the one-line user error, and the builders of a run's context, tools and store.

Importing this module stays cheap, since `reactgraph --help` imports it: each builder imports its layer when
called, and `traced` imports tracing only when a command asks for it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from reactgraph.errors import ReactGraphError

if TYPE_CHECKING:
    from reactgraph.memory.checkpointer import OpenedCheckpointer
    from reactgraph.nodes.context import Context
    from reactgraph.tools import ToolGateway


class UserError(ReactGraphError):
    """A problem the user can fix; shown as one line, without a traceback."""


class Reflection(StrEnum):
    """How the agent reflects after each observation (`Context.reflection`)."""

    llm = "llm"
    rules = "rules"
    off = "off"
    inline = "inline"


class Protocol(StrEnum):
    """How the model calls tools (`Context.protocol`)."""

    tools = "tools"
    text = "text"


RETRIEVER_HELP = ("rag_search from a LangChain retriever or vector store (or a function returning one) as "
                  "module:attribute, instead of the --index (default: $REACTGRAPH_RETRIEVER).")
TOOLS_HELP = ("Extra tools as module:attribute (repeatable; default: $REACTGRAPH_TOOLS); they replace "
              "built-ins of the same name.")
MCP_HELP = ("MCP servers whose tools the agent may use: a JSON file {\"mcpServers\": {name: {command, args, env, "
            "cwd} or {url, headers}}} as Claude Desktop, Claude Code and Cursor write it, VS Code's mcp.json "
            "({\"servers\": …}) or langchain-mcp-adapters' connections; a server that does not start is named and "
            "left out (default: $REACTGRAPH_MCP).")
STORE_HELP = ("Where sessions are kept: redis://host:port/db, rediss://…, unix:///path.sock, memory, "
              "sqlite:///relative.db or sqlite:////absolute.db (default: $REDIS_URL, else the embedded Redis).")
REFLECTION_HELP = ("After each observation: ask the model (llm), apply fixed rules (rules), read the verdict the model "
                   "gives beside its next step (inline: no extra call), or skip it (off).")
PROTOCOL_HELP = "Tool calls as the provider's tool-calling API (tools) or as text in the reply (text)."
# The `--reflection` and `--protocol` options of `ask` and `compare`.
ReflectionOption = Annotated[Reflection, typer.Option(help=REFLECTION_HELP)]
ProtocolOption = Annotated[Protocol, typer.Option(help=PROTOCOL_HELP)]
TTL_HELP = ("Keep a session (checkpoints and store items) this long after its last use, e.g. 3600, 30m, 12h, 7d "
            "(default: $REACTGRAPH_TTL, else until pruned; Redis stores only).")
TtlOption = Annotated[str | None, typer.Option("--ttl", metavar="DURATION", envvar="REACTGRAPH_TTL", help=TTL_HELP)]


def session_option(session: str | None) -> str | None:
    """`--session` checked by the one rule for session ids (`check_session_id`): one line, before any write."""
    if session is None:
        return None
    from reactgraph.memory.session_id import InvalidSessionId, check_session_id

    try:
        return check_session_id(session)
    except InvalidSessionId as exc:
        raise UserError(str(exc)) from exc


def question_argument(question: str) -> str:
    """QUESTION checked by the one rule for questions (`check_question`): one line, before anything is loaded."""
    from reactgraph.nodes.conversation import EmptyQuestion, check_question

    try:
        return check_question(question)
    except EmptyQuestion as exc:
        raise UserError(f"QUESTION: {exc}") from exc


def store_errors() -> tuple[type[Exception], ...]:
    """The store's failures a user can fix, imported only by the commands that open a store."""
    from reactgraph.memory.checkpointer import CheckpointerConfigError
    from reactgraph.memory.embedded_redis import EmbeddedRedisError
    from reactgraph.memory.redis_checkpoint import CheckpointStoreUnavailable, InvalidRedisSetting, InvalidRedisURL

    return CheckpointStoreUnavailable, InvalidRedisURL, InvalidRedisSetting, CheckpointerConfigError, EmbeddedRedisError


def is_user_error(exc: BaseException) -> bool:
    """A `UserError`, or a model configuration error (only possible once the model loader was imported)."""
    if isinstance(exc, UserError):
        return True
    loader = sys.modules.get("reactgraph.models.loader")
    return loader is not None and isinstance(exc, loader.ModelConfigError)


def model_label(spec: str) -> str:
    from reactgraph.models.loader import parse_spec

    provider, name = parse_spec(spec)
    return "offline (scripted offline model, not an LLM)" if provider == "offline" else f"{provider}:{name}"


def build_context(model: str | None, max_iterations: int, reflection: Reflection | str, protocol: Protocol | str,
                  allow: list[str], deny: list[str], budgets: Mapping[str, Any] | None = None) -> Context:
    """The run's Context from the flags (`budgets`: max_tool_calls / max_model_tokens / max_cost_usd, None for
    no budget); a bad value is one line naming the flag."""
    from reactgraph.models.loader import parse_spec
    from reactgraph.nodes.context import Context

    chosen: dict[str, Any] = {"model": model} if model else {}  # else Context's default: $REACTGRAPH_MODEL
    try:
        context = Context(max_iterations=max_iterations, reflection=Reflection(reflection).value,
                          protocol=Protocol(protocol).value, allowed_tools=allow or None, denied_tools=tuple(deny),
                          **chosen, **(budgets or {}))
        parse_spec(context.model)
        if context.max_cost_usd is not None:  # a bad price file is one line now, not an error mid-run
            from reactgraph.models.prices import price_of

            price_of(context.model)
    except (ValueError, TypeError) as exc:
        message = str(exc)
        for field, flag in _CONTEXT_FLAGS.items():  # the user typed the flag, so name the flag
            message = message.replace(f"Context.{field} =", f"{flag}:")
        raise UserError(message) from exc
    return context


_CONTEXT_FLAGS = {"max_iterations": "--max-iterations", "model": "--model", "allowed_tools": "--allow",
                  "denied_tools": "--deny", "reflection": "--reflection", "protocol": "--protocol",
                  "max_tool_calls": "--max-tool-calls", "max_model_tokens": "--max-tokens",
                  "max_cost_usd": "--max-cost", "approval": "--require-approval / --skip-approval",
                  "fallback_models": "--fallback-model"}


def approval_flags(require: list[str], skip: list[str]) -> dict[str, Any]:
    """Context.approval from --require-approval / --skip-approval (a label in both: asking wins)."""
    setting = dict.fromkeys(skip, "never") | dict.fromkeys(require, "always")
    return {"approval": setting or None}


RequireApproval = Annotated[list[str], typer.Option(
    "--require-approval", metavar="TOOL", help="Ask before each call of these tools (names or tags); repeatable.")]
SkipApproval = Annotated[list[str], typer.Option(
    "--skip-approval", metavar="TOOL", help="Do not ask before calls of these tools (names or tags), e.g. "
                                            "http_get; repeatable.")]

# The budget flags of `ask` and `compare` (a Context field each; unset: no budget).
MaxToolCalls = Annotated[int | None, typer.Option("--max-tool-calls", metavar="N", show_default=False,
                                                  help="Budget: tool calls per question (default: none).")]
MaxTokens = Annotated[int | None, typer.Option("--max-tokens", metavar="N", show_default=False,
                                               help="Budget: model tokens, prompt + completion, per question "
                                                    "(default: none).")]
MaxCost = Annotated[float | None, typer.Option("--max-cost", metavar="USD", show_default=False,
                                               help="Budget: model cost in USD per question, from the price table "
                                                    "($REACTGRAPH_PRICES extends it; default: none).")]


def budget_flags(max_tool_calls: int | None, max_tokens: int | None, max_cost: float | None) -> dict[str, Any]:
    return {"max_tool_calls": max_tool_calls, "max_model_tokens": max_tokens, "max_cost_usd": max_cost}


def gateway_with(tool_specs: list[str], rag_index: Path | None = None, context: Context | None = None,
                 mcp: Path | None = None, shared_url: str | None = None,
                 share_breakers: bool = True, mcp_startup_cap_s: float | None = None,
                 retriever: str | None = None, mcp_all_required: bool = False) -> ToolGateway:
    """The built-in tools plus --tools and the tools of the --mcp servers ($REACTGRAPH_MCP), started now, with
    `rag_search` on the --retriever ($REACTGRAPH_RETRIEVER) when one is named; with
    `context`, its --allow/--deny names checked against them (one line listing the known tools and tags: a
    mistyped --deny would otherwise deny nothing, silently). With `shared_url` (the store's Redis) call metrics
    live there, shared by every process, and so do breaker states unless `share_breakers` is False.
    `mcp_startup_cap_s`: no MCP server start or restart waits longer (the service's: below its lease expiry).
    An MCP server that does not start is named on stderr and left out; with `mcp_all_required`, the command stops."""
    import os

    from reactgraph.nodes.context import unknown_tool_names
    from reactgraph.tools import ToolRegistrationError, default_gateway
    from reactgraph.tools.plugins import load_retriever, load_tools

    mcp_config = str(mcp) if mcp is not None else os.environ.get("REACTGRAPH_MCP", "").strip()
    stores: dict[str, Any] = {}
    if shared_url:
        from reactgraph.tools.resilience import RedisBreakerStore
        from reactgraph.tools.telemetry import RedisMetricsStore

        stores = {"metrics_store": RedisMetricsStore.from_url(shared_url)}
        if share_breakers:
            stores["breaker_store"] = RedisBreakerStore.from_url(shared_url)
    try:
        extra_tools = [*load_tools(tool_specs or None), *filter(None, [load_retriever(retriever)])]
        gateway = default_gateway(extra_tools=extra_tools, rag_index=rag_index, **stores)
        gateway.mcp_startup_cap_s = mcp_startup_cap_s
        if mcp_config:
            gateway.add_mcp_servers(mcp_config)
            say_mcp_failures(gateway, mcp_config, all_required=mcp_all_required)
    except ToolRegistrationError as exc:  # MCP's say which config or server: "MCP config …", "MCP server 'x' …"
        raise UserError(str(exc)) from exc
    if context is not None and (problem := unknown_tool_names(context, gateway.registry)):
        raise UserError(problem.replace("allowed_tools ", "--allow ").replace("denied_tools ", "--deny ")
                        .replace("approval ", "--require-approval/--skip-approval "))
    return gateway


def say_mcp_failures(gateway: ToolGateway, config: str, *, all_required: bool = False) -> None:
    """Each MCP server that did not start, in one line on stderr: the command goes on with the others' tools (a
    config error has stopped it already). With none started, one more line says the run has no MCP tools.

    `all_required` (serve, worker): a service does not start without one of its servers. Its clients name the
    servers (`context.mcp_config`), it would never retry the start, and an orchestrator restarting a service that
    exits is the retry an operator sees; a person at `ask` is better served by the tools that did start."""
    from reactgraph.tools.untrusted import terminal_safe

    level, tail = ("error", "") if all_required else ("warning", "; its tools are left out")
    for line in gateway.mcp_failed.values():  # a stdio server's last output is in the line: made terminal-safe
        print(terminal_safe(f"{level}: {line}{tail}"), file=sys.stderr, flush=True)
    if gateway.mcp_failed and all_required:
        gateway.close()  # the servers that did start
        raise UserError(f"{len(gateway.mcp_failed)} MCP server(s) of {config} did not start (above); the service "
                        "starts only with all of its --mcp servers")
    if gateway.mcp_failed and not gateway.mcp_servers:
        print(terminal_safe(f"warning: no MCP server of {config} started; going on without MCP tools"),
              file=sys.stderr, flush=True)


def close_shared_stores(gateway: ToolGateway, *, breakers: bool = True) -> None:
    """Before the process ends: the calls' metrics written (up to 2 s), the shared stores' clients closed
    (`breakers=False`: the breakers' asyncio client was closed already, on the loop its calls ran on)."""
    from reactgraph.tools.resilience import RedisBreakerStore
    from reactgraph.tools.telemetry import RedisMetricsStore
    from reactgraph.tools.threads import run_sync

    metrics, breaker_store, close_breakers = gateway.telemetry.store, gateway.breakers.store, breakers
    metrics.flush(2.0)
    if isinstance(metrics, RedisMetricsStore):
        metrics.client.close()
    if close_breakers and isinstance(breaker_store, RedisBreakerStore):  # asyncio: closed on the calls' loop
        run_sync(breaker_store.client.aclose())


def shared_redis_url(store: str | None) -> str | None:
    """The Redis whose shared tool state `reactgraph tools` shows: --store or $REDIS_URL when it is Redis, else
    the embedded Redis if it runs (never started just to look); None for memory and SQLite stores."""
    from reactgraph.memory.checkpointer import REDIS_SCHEMES, resolve_url

    chosen = resolve_url(store)
    if chosen == "embedded":
        from reactgraph.memory.embedded_redis_paths import data_dir, socket_path_for

        if not socket_path_for(data_dir().expanduser().resolve()).exists():  # not running: redis is not even loaded
            return None
        from reactgraph.memory.embedded_redis import status

        report = status()
        return report["url"] if report["running"] else None
    return chosen if chosen.startswith(REDIS_SCHEMES) else None


def check_index(index: Path | None) -> None:
    """The index `rag_search` is to read must have been built: a mistyped --index would otherwise search
    nothing, silently. The default index is exempt (it is built from the bundled documents on first use)."""
    import os

    from reactgraph.tools.builtin.rag import INDEX_ENV, is_default_index, resolve_index

    named = index or os.environ.get(INDEX_ENV)
    if not named or is_default_index(resolve_index(named)):
        return
    directory = resolve_index(named)
    if not (directory / "meta.json").is_file():  # what `reactgraph ingest` writes last (VectorStore.exists)
        source = f"--index {named}" if index else f"${INDEX_ENV}={named}"
        reason = "is not a knowledge-base index" if directory.exists() else "does not exist"
        raise UserError(f"{source}: {reason}; build it with `reactgraph ingest PATH --index {named}`")


def parse_ttl(text: str | None) -> float | None:
    """Seconds from a --ttl / $REACTGRAPH_TTL value (None when unset), or one line saying what is accepted."""
    from reactgraph.memory.retention import parse_duration

    if text is None or not text.strip():
        return None
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise UserError(f"--ttl / $REACTGRAPH_TTL: {exc}") from exc


def open_store(store: str | None, ttl: float | None = None) -> OpenedCheckpointer:
    from reactgraph.memory.checkpointer import open_checkpointer

    try:
        return open_checkpointer(store, ttl=ttl)
    except store_errors() as exc:
        raise UserError(str(exc)) from exc


def long_term_store(opened: OpenedCheckpointer) -> Any:
    """The Q&A log and lessons live beside the checkpoints: in the same Redis (and its connection pool, which
    `from_url` on the saver's URL shares) or SQLite file, else in this process."""
    if opened.redis_url:
        from reactgraph.memory import RedisStore
        from reactgraph.memory.retention import store_ttl
        return RedisStore.from_url(opened.redis_url, ttl=store_ttl(opened.ttl))
    if opened.sqlite_path:
        import sqlite3

        from langgraph.store.sqlite import SqliteStore  # installed with the SqliteSaver that opened the file

        # its own connection in autocommit mode: SqliteStore opens its transactions itself (BEGIN … COMMIT)
        try:
            store = SqliteStore(sqlite3.connect(opened.sqlite_path, check_same_thread=False, isolation_level=None))
            store.setup()
        except sqlite3.Error as exc:
            raise UserError(f"cannot use the SQLite file {opened.sqlite_path}: {exc}") from exc
        return store
    from langgraph.store.memory import InMemoryStore
    return InMemoryStore()


OTEL_HELP = ("Send OpenTelemetry traces over OTLP/HTTP to $OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT or "
             "http://localhost:4318/v1/traces (on by itself when one of those variables is set; needs the otel extra).")
TIMEOUT_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
EXPORT_TIMEOUT_S = 3.0
OtelOption = Annotated[bool, typer.Option("--otel", help=OTEL_HELP)]


@contextmanager
def traced(flag: bool) -> Iterator[None]:
    """Trace what runs inside when asked (`--otel` or the standard endpoint variables); export it all on the way out.

    Without the extra, `--otel` is an error; an endpoint variable alone (perhaps set for other programs) only
    earns a one-line notice, and the command runs untraced.
    """
    from reactgraph.graph.tracing import TracingUnavailable, disable_tracing, enable_tracing, tracing_requested

    if not tracing_requested(flag):
        yield
        return
    # A collector that is down must not hold the answer back long at exit: 3 s unless the standard variables say.
    timeout_s = None if any(os.environ.get(v) for v in TIMEOUT_ENVS) else EXPORT_TIMEOUT_S
    try:
        enable_tracing(timeout_s=timeout_s)
    except TracingUnavailable as exc:
        if flag:
            raise UserError(str(exc)) from None
        print(f"note: OTEL_EXPORTER_OTLP_ENDPOINT is set, but {exc}; running untraced", file=sys.stderr)
        yield
        return
    try:
        yield
    finally:
        disable_tracing()  # flushes the batch processor: the run's spans leave before the process does


RESPONSE_FORMAT_HELP = ("Also answer in this structure (state's structured_response, --json's too): MODULE:ATTR "
                        "(a pydantic model, TypedDict, dataclass or JSON schema dict) or a .json file holding a JSON "
                        "schema.")
MAX_SCHEMA_BYTES = 256 * 1024


def _model_specs(specs: list[str] | None) -> list[str] | None:
    """--fallback-model's specs, each checked as --model's is (a bad one: typer's usage error naming the flag)."""
    if specs:
        from reactgraph.models.loader import ModelConfigError, parse_spec

        for spec in specs:
            try:
                parse_spec(spec)
            except ModelConfigError as exc:
                raise typer.BadParameter(str(exc)) from None
    return specs


FALLBACK_HELP = ("A model to answer when --model fails for good (after its retries); repeat for more, tried in "
                 "order (Context.fallback_models).")
FallbackModelOption = Annotated[list[str], typer.Option("--fallback-model", metavar="SPEC", callback=_model_specs,
                                                        help=FALLBACK_HELP)]
ResponseFormatOption = Annotated[str | None, typer.Option("--response-format", metavar="MODULE:ATTR|FILE",
                                                          help=RESPONSE_FORMAT_HELP)]


def load_response_format(spec: str | None) -> Any:
    """The `ResponseFormat` a --response-format names (None: none); a UserError in one line when it is unusable."""
    if spec is None or not spec.strip():
        return None
    from reactgraph.models.response_format import response_format_of
    from reactgraph.tools.call import ToolRegistrationError
    from reactgraph.tools.plugins import load_attribute

    spec = spec.strip()
    try:
        value = _schema_file(Path(spec)) if spec.endswith(".json") else load_attribute(spec, "a response format")
        return response_format_of(value)
    except (ToolRegistrationError, TypeError, ValueError, OSError) as exc:
        raise UserError(f"--response-format {spec!r}: {exc}") from None


def _schema_file(path: Path) -> Any:
    if path.stat().st_size > MAX_SCHEMA_BYTES:
        raise ValueError(f"a JSON schema file of at most {MAX_SCHEMA_BYTES // 1024} KB is read")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc})") from None
