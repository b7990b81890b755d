"""Where the CLI's log records go: JSON lines (`--log-format json`) or text on stderr, each with the record's
structured fields and the ids of the run it belongs to. Only the CLI configures logging; the library adds a
NullHandler and logs with `extra={"<kind>": {...}}` (tool_call, fallback, retry, redis, swallowed)."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

FORMATS = ("json", "text")
FORMAT_ENV = "REACTGRAPH_LOG_FORMAT"
# What every LogRecord has: anything else on a record came from `extra=` and is a structured field.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "run_ids"}


class RunIds(logging.Filter):
    """Stamps each record, in the thread that logs it, with the run id, session and trace id known there."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "run_ids"):
            record.run_ids = current_ids()
        return True


def current_ids() -> dict[str, str]:
    """run_id and session of the run in progress, and the active OpenTelemetry span's trace id, where known."""
    from reactgraph.graph.run_context import current_run

    ids = dict(current_run())
    # Imported by whoever traces; no span is active without it. A node's span is found from the run's config.
    if sys.modules.get("opentelemetry.trace") is not None:
        from reactgraph.graph.tracing import current_span_context

        context = current_span_context()
        if context.is_valid:
            ids["trace_id"] = format(context.trace_id, "032x")
            ids["span_id"] = format(context.span_id, "016x")
    return ids


def fields(record: logging.LogRecord) -> dict[str, Any]:
    """The record's structured fields, as the code that logged passed them (nested, not flattened)."""
    return {key: value for key, value in vars(record).items() if key not in _STANDARD and not key.startswith("_")}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, msg, the run's ids, then the structured fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname, "logger": record.name, "msg": record.getMessage(),
            **getattr(record, "run_ids", {})}
        for key, value in fields(record).items():
            entry.setdefault(key, value)  # a field never overwrites the envelope
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """`LEVEL logger message key=value …`: a nested field's keys shown on their own (tool=… status=…)."""

    def __init__(self, timestamps: bool) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s" if timestamps
                         else "%(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        from reactgraph.tools.untrusted import terminal_safe

        return terminal_safe(self._line(record))  # messages and fields carry tool and model text: for a terminal

    def _line(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        pairs = dict(getattr(record, "run_ids", {}))
        for key, value in fields(record).items():
            pairs.update(value if isinstance(value, dict) else {key: value})
        shown = " ".join(f"{key}={_text(value)}" for key, value in pairs.items())
        if not shown:
            return line
        head, newline, rest = line.partition("\n")  # after the message, before any traceback
        return f"{head} {shown}{newline}{rest}"


def _text(value: Any) -> str:
    if isinstance(value, str) and value and not any(c.isspace() or c in "\"=" for c in value):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def configure(log_format: str | None, debug: bool, stream: TextIO | None = None) -> Callable[[], None]:
    """Records of react-graph (INFO and up, DEBUG with --debug) and warnings of other libraries to stderr;
    returns what undoes it (`main` calls it on the way out, so in-process callers keep their own logging).

    Neither a format nor --debug: nothing is configured, and the CLI stays quiet as it always was. --debug
    alone keeps the plain text it always printed, now with the structured fields.
    """
    if log_format is None and not debug:
        return lambda: None
    root, ours = logging.getLogger(), logging.getLogger("reactgraph")
    levels = root.level, ours.level
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(RunIds())
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter(timestamps=log_format == "text"))
    root.addHandler(handler)
    root.setLevel(logging.INFO if debug else logging.WARNING)  # --debug has always shown other libraries' INFO
    ours.setLevel(logging.DEBUG if debug else logging.INFO)

    def undo() -> None:
        root.removeHandler(handler)
        root.setLevel(levels[0])
        ours.setLevel(levels[1])

    return undo


def check_format(value: str | None) -> str | None:
    """--log-format / $REACTGRAPH_LOG_FORMAT: json or text (any case), else one line saying so."""
    if value is None or not value.strip():
        return None
    chosen = value.strip().lower()
    if chosen not in FORMATS:
        from reactgraph.cli.shared import UserError

        raise UserError(f"--log-format / ${FORMAT_ENV}: {value!r} is not one of json, text")
    return chosen


def announce_server(url: str, where: str, workers: int, auth_settings: Any, no_auth: bool) -> None:
    """Say where `reactgraph serve` serves; and a request that failed (a 500 with a request id) is logged to stderr
    under that id even without --log-format, which configures the rest of the log: the id a client reports must
    lead somewhere."""
    auth = auth_settings.describe() if auth_settings is not None else "none (loopback)" if not no_auth else "none"
    print(f"reactgraph serve on {url} · store: {where} · workers in this process: {workers} · auth: {auth}",
          file=sys.stderr, flush=True)
    if not logging.getLogger().handlers:
        logging.getLogger("reactgraph.service.requests").addHandler(logging.StreamHandler())
