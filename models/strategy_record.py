"""Which structured-output strategy a server accepts, remembered per (base URL, model) across processes.

A server that refuses `json_schema` (llama.cpp's llama-server: 400 "error initializing grammar sampler") or
ignores a forced tool call refuses it in every process: without a record each new `reactgraph ask` pays the
refused request again. The record is a small JSON file in the user's cache directory —
`$REACTGRAPH_STRATEGY_FILE`, else `$XDG_CACHE_HOME/reactgraph/structured-output.json`, else
`~/.cache/reactgraph/structured-output.json`; `REACTGRAPH_STRATEGY_FILE=off` keeps it in the process only.

A file, not Redis: every process that talks to a model has a cache directory, not every one has a Redis (the
Python API with no store, `ask --store sqlite:…`), and the fact belongs to a server, not to a session; losing it
costs one refused request. The file is untrusted on read: at most `MAX_FILE_BYTES`, keys bounded, every value
checked against the strategies' allow-list (anything else is ignored), at most `MAX_ENTRIES` servers (the oldest
go). It is written only when a strategy changes, atomically (a reader never sees half a file); two processes that
write at once keep the later's view, which at worst costs the other's server one refused request again.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from pathlib import Path

logger = logging.getLogger(__name__)

FILE_ENV = "REACTGRAPH_STRATEGY_FILE"
MAX_FILE_BYTES = 64_000
MAX_ENTRIES = 64
MAX_KEY_CHARS = 400

_lock = threading.Lock()
_known: dict[str, str] = {}  # this process's view: key → strategy
_loaded_from: Path | bool | None = False  # the file _known was read from (False: not read yet)


def strategy_key(base_url: str | None, model: str) -> str:
    """The record's key: where the requests go and which model answers."""
    return f"{(base_url or 'https://api.openai.com/v1').rstrip('/')}|{model}"[:MAX_KEY_CHARS]


def record_path() -> Path | None:
    """The file, or None when the record is kept in the process only."""
    setting = os.environ.get(FILE_ENV, "").strip()
    if setting.lower() == "off":
        return None
    if setting:
        return Path(setting).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "reactgraph" / "structured-output.json"


def _read(path: Path, allowed: tuple[str, ...]) -> dict[str, tuple[str, float]]:
    """The file's entries that pass the allow-list; {} for a missing, oversized or unreadable file."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
        data = json.loads(raw) if len(raw) <= MAX_FILE_BYTES else None
    except (OSError, ValueError, RecursionError):
        return {}
    entries = data.get("servers") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        return {}
    kept: dict[str, tuple[str, float]] = {}
    for key, entry in list(entries.items())[:MAX_ENTRIES]:
        if not (isinstance(key, str) and 0 < len(key) <= MAX_KEY_CHARS and isinstance(entry, dict)):
            continue
        strategy, at = entry.get("strategy"), entry.get("at")
        if strategy in allowed and isinstance(at, int | float) and not isinstance(at, bool):
            kept[key] = (strategy, float(at))
    return kept


def remembered(key: str, allowed: tuple[str, ...]) -> str | None:
    """The strategy last seen to work for `key` (this process's, else the file's), or None."""
    global _loaded_from
    with _lock:
        path = record_path()
        if _loaded_from is False or _loaded_from != path:
            _known.clear()
            if path is not None:
                _known.update({k: s for k, (s, _) in _read(path, allowed).items()})
            _loaded_from = path
        strategy = _known.get(key)
    return strategy if strategy in allowed else None


def remember(key: str, strategy: str, allowed: tuple[str, ...]) -> None:
    """Record that `strategy` worked for `key`: in the process, and in the file when it changed there."""
    if strategy not in allowed:
        return
    with _lock:
        if _known.get(key) == strategy:
            return
        _known[key] = strategy
        path = record_path()
        if path is None:
            return
        entries = _read(path, allowed)
        entries[key] = (strategy, time.time())
        newest = sorted(entries.items(), key=lambda item: item[1][1], reverse=True)[:MAX_ENTRIES]
        data = {"servers": {k: {"strategy": s, "at": round(at, 3)} for k, (s, at) in newest}}
        try:
            _write_atomically(path, json.dumps(data, indent=1))
        except OSError as exc:  # a read-only home: the process still keeps what it learned
            logger.warning("structured-output record not written (%s): %s", path, exc)


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=".structured-output-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
