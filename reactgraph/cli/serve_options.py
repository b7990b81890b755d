"""The options of `reactgraph serve` and `reactgraph worker`: where the service keeps its state and finds its
tools, retention, who may call and what HTTP it accepts (serve only), and what a client's run may choose."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from reactgraph.cli.ask import INDEX_HELP
from reactgraph.cli.shared import MCP_HELP, STORE_HELP, TOOLS_HELP

Store = Annotated[str | None, typer.Option(metavar="URL", help=STORE_HELP + " Must be Redis: workers share it.")]
Tools = Annotated[list[str], typer.Option("--tools", metavar="MODULE:ATTR", help=TOOLS_HELP)]
Mcp = Annotated[Path | None, typer.Option("--mcp", metavar="FILE", help=MCP_HELP)]
Index = Annotated[Path | None, typer.Option("--index", metavar="DIR", help=INDEX_HELP)]
ThreadTtl = Annotated[str | None, typer.Option("--thread-ttl", metavar="DURATION",
                                               help="Sweep threads idle this long (7d, 12h, 30m; default: "
                                                    "checkpointer.ttl of --config, else never).")]
TtlStrategy = Annotated[str, typer.Option("--ttl-strategy", metavar="delete|keep_latest",
                                          help="What the sweep does to an idle thread.")]
SweepEvery = Annotated[str, typer.Option("--sweep-every", metavar="DURATION", help="How often to sweep.")]
Config = Annotated[Path | None, typer.Option("--config", metavar="FILE",
                                             help="A langgraph.json: its auth section (a langgraph_sdk.Auth, "
                                                  "\"path\": \"./auth.py:auth\"), checkpointer.ttl (retention), "
                                                  "http.cors and http.allowed_hosts (the HTTP checks), the "
                                                  "reactgraph section (what a client's run may set).")]
ApiKeys = Annotated[Path | None, typer.Option("--api-keys", metavar="FILE", envvar="REACTGRAPH_API_KEYS",
                                              help="One team's keys, one `name: key` per line: clients send "
                                                   "x-api-key; the caller is the key's name.")]
NoAuth = Annotated[bool, typer.Option("--no-auth", help="Serve a non-loopback address with no auth at all "
                                                        "(anyone who reaches it may do anything).")]
Drain = Annotated[float, typer.Option("--drain", metavar="SECONDS", min=0,
                                      help="On SIGTERM, let running runs finish for this long; the rest are "
                                           "resumed by another worker.")]
InProcessWorkers = Annotated[int, typer.Option(min=0, max=64, help="Workers in this process (0: only serve; run "
                                                                     "`reactgraph worker` processes).")]
MaxResumes = Annotated[int, typer.Option("--max-resumes", metavar="N", min=0, max=100,
                                          help="Times a run whose worker stopped without ending it (a crash, a "
                                               "kill) is resumed by another before it ends with an error.")]
AllowedHosts = Annotated[list[str], typer.Option(
    "--allowed-hosts", metavar="HOST[:PORT],…",
    help="Host headers to answer besides the bind address and localhost (a reverse proxy's public name; "
         "'*' for any). Also http.allowed_hosts in --config.")]
MaxBody = Annotated[int, typer.Option("--max-body-bytes", metavar="BYTES", help="Largest request body (413 above).")]
MaxStreams = Annotated[int, typer.Option("--max-streams", metavar="N", min=1, max=100_000,
                                         help="Open SSE streams, joins and waits in this process (429 above).")]
HeaderTimeout = Annotated[float, typer.Option("--header-timeout", metavar="SECONDS", min=0.1, max=3600,
                                              help="A request's line and headers must arrive within this.")]
BodyTimeout = Annotated[float, typer.Option("--body-timeout", metavar="SECONDS", min=0.1, max=3600,
                                            help="A request's body must arrive within this (408 after).")]
Quota = Annotated[list[str], typer.Option(
    "--quota", metavar="NAME=N",
    help="What one caller may keep or hold (repeatable; 0: no limit): threads, assistants, versions, "
         "runs_in_flight, stream_slots. Also reactgraph.quotas in --config.")]

# What a client's run may choose.
AllowModels = Annotated[list[str], typer.Option("--allow-model", metavar="SPEC", help=(
    "A model a client's run may choose (repeatable; the first is the default; default: $REACTGRAPH_MODEL, "
    "else offline; or reactgraph.models in --config)."))]
AllowSystemPrompt = Annotated[bool | None, typer.Option("--allow-system-prompt/--fixed-system-prompt", help=(
    "Whether a client's run may replace the system prompt (default: fixed, or reactgraph.allow_system_prompt)."),
    show_default=False)]
CapIterations = Annotated[int | None, typer.Option("--cap-iterations", metavar="N", min=1, show_default=False,
                                                   help="Cap of a run's max_iterations (default 20).")]
CapToolCalls = Annotated[int | None, typer.Option("--cap-tool-calls", metavar="N", min=0, show_default=False,
                                                  help="Cap of a run's max_tool_calls, also its default (100).")]
CapTokens = Annotated[int | None, typer.Option("--cap-tokens", metavar="N", min=1, show_default=False,
                                               help="Cap of a run's max_model_tokens, also its default (1000000).")]
CapCost = Annotated[float | None, typer.Option("--cap-cost", metavar="USD", min=0, show_default=False,
                                               help="Cap of a run's max_cost_usd, also its default (5).")]
