"""A comparison's results on disk, written so that a crash loses nothing and a resumed run repeats nothing.

`results.jsonl` gets one record a line, appended as each run finishes and fsync'd line by line; `run.json`
holds the settings the records were made under. `--resume DIR` reads both: a run whose key (graph, seed,
task, repeat) is already in the file is not run again, and settings that would make the new records
incomparable with the old (another model, suite or graph list…) are refused in one line naming the difference.
A process killed mid-write leaves at most a torn last line: it is ignored with a warning and cut off before
anything is appended.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from reactgraph.errors import ReactGraphError

RESULTS = "results.jsonl"
SETTINGS = "run.json"
# What makes records comparable: resuming with any of these changed is refused. Seeds, repeats, tags, limit,
# concurrency and the total cost cap only choose which runs are made, so they may change between resumes.
# The settings a resumed run must share with the records it finds: the model and where its requests go (`endpoint`:
# another server with the same model name is another model), the tasks, and everything that shapes a run.
IDENTITY = ("model", "endpoint", "suite", "suite_sha", "graphs", "faults", "max_iterations", "reflection", "protocol",
            "max_tool_calls", "max_model_tokens", "max_cost_usd", "task_timeout_s",
            "max_output_tokens")

RunKey = tuple[str, int, str, int]


class ResultsFileError(ReactGraphError, ValueError):
    """A results directory that cannot be resumed: missing, unreadable, or made under other settings."""


def record_key(record: dict[str, Any]) -> RunKey:
    """The identity of one run: graph, seed, task, repeat."""
    return (str(record["graph"]), int(record.get("seed") or 0), str(record["task"]), int(record.get("repeat") or 0))


def _bad_record(text: str) -> bool:
    try:
        record = json.loads(text)
        record_key(record)
    except (ValueError, KeyError, TypeError):
        return True
    return not isinstance(record, dict)


def read_records(path: Path, warn: Callable[[str], None] | None = None) -> tuple[list[dict[str, Any]], int]:
    """The records of a results file and the byte length of its good part. A last line without its newline (a
    write the process did not finish) is left out with a warning; a bad line before it is an error."""
    if not path.is_file():
        return [], 0
    data = path.read_bytes()
    complete, newline, tail = data.rpartition(b"\n")
    records: list[dict[str, Any]] = []
    for number, raw in enumerate(complete.split(b"\n") if newline else [], 1):
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            continue
        if _bad_record(text):
            raise ResultsFileError(f"{path}:{number}: not a run record; fix or remove the line to resume")
        records.append(json.loads(text))
    if tail.strip() and warn:
        warn(f"warning: {path}: ignoring a torn last line ({len(tail)} bytes), a write cut short")
    return records, len(complete) + len(newline)


class ResultsWriter:
    """Appends records to results.jsonl, each line flushed and fsync'd before `append` returns (thread-safe)."""

    def __init__(self, path: Path, keep_bytes: int = 0) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._file = path.open("r+b" if keep_bytes and path.exists() else "wb")
        self._file.truncate(keep_bytes)  # a torn last line goes; nothing is appended after half a record
        self._file.seek(keep_bytes)

    def append(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            self._file.write(line)
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_json_atomically(path: Path, data: Any) -> None:
    """Write `data` as JSON so that a reader sees the old file or the new one, never half of one."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    os.replace(temporary, path)


def settings_difference(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """The first setting that makes records made under `old` incomparable with those of `new`, in words."""
    for key in IDENTITY:
        if old.get(key) != new.get(key):
            if key == "suite_sha":
                return f"suite {new.get('suite')!r} has changed since the run began"
            return f"{key} was {_shown(old.get(key))}, now {_shown(new.get(key))}"
    return None


def _shown(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else json.dumps(value, ensure_ascii=False)


def open_results(out: Path, settings: dict[str, Any], resume: bool,
                 warn: Callable[[str], None] | None = None) -> tuple[ResultsWriter, list[dict[str, Any]]]:
    """The writer for `out`/results.jsonl and the records already there. A new run starts the file afresh; a
    resumed one keeps its records after checking that they were made under the same settings."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / RESULTS
    if not resume:
        write_json_atomically(out / SETTINGS, settings)
        return ResultsWriter(path), []
    if not (out / SETTINGS).is_file():
        raise ResultsFileError(f"cannot resume {out}: it holds no run ({SETTINGS} is missing); "
                               f"start one with --out {out}")
    try:
        old = json.loads((out / SETTINGS).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ResultsFileError(f"cannot resume {out}: {SETTINGS} is unreadable ({type(exc).__name__})") from None
    difference = settings_difference(old if isinstance(old, dict) else {}, settings)
    if difference:
        raise ResultsFileError(f"cannot resume {out} with other settings: {difference} (start a new --out)")
    records, good = read_records(path, warn)
    return ResultsWriter(path, good), records


def planned_only(records: Iterable[dict[str, Any]], keys: set[RunKey]) -> list[dict[str, Any]]:
    """The records of the planned runs, one per key (the first, should a file hold a key twice)."""
    seen: dict[RunKey, dict[str, Any]] = {}
    for record in records:
        key = record_key(record)
        if key in keys:
            seen.setdefault(key, record)
    return list(seen.values())


def suite_fingerprint(tasks: Iterable[Any]) -> str:
    """A short hash of a suite's tasks, so that a resumed run notices that the suite was edited meanwhile."""
    import dataclasses
    import hashlib

    text = json.dumps([dataclasses.asdict(t) for t in tasks], ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def ordered(records: Iterable[dict[str, Any]], graphs: list[str] | None = None) -> list[dict[str, Any]]:
    """Records in one order whatever order they finished in: by graph (as listed in `graphs`, else by name),
    seed, task and repeat; so the same results file always gives the same report."""
    rank = {g: i for i, g in enumerate(graphs or [])}
    return sorted(records, key=lambda r: (rank.get(str(r["graph"]), len(rank)), *record_key(r)))


def rewrite_results(path: Path, records: Iterable[dict[str, Any]]) -> None:
    """Replace results.jsonl at once (a reader sees the old file or the new one), fsync'd before the swap."""
    temporary = path.with_name(f".{path.name}.tmp")
    with temporary.open("wb") as handle:
        handle.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
