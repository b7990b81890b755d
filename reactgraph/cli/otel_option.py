"""`--otel`: the option that sends a command's run to an OpenTelemetry collector, and its set-up and flush."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from reactgraph.cli.shared import UserError

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
