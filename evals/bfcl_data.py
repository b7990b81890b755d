"""BFCL's data, read straight out of the `bfcl-eval` wheel (a zip), never installed.

bfcl-eval's own dependencies are heavy and pinned (numpy==1.26.4, sentence-transformers and with it torch, …), so
react-graph does not depend on it: the evals need only the JSON files inside its wheel. Where the wheel comes from:

1. `$REACTGRAPH_BFCL_WHEEL` (or the `wheel=` argument): a `bfcl_eval-*.whl` file, or a directory holding one;
2. else the per-user cache (`$XDG_CACHE_HOME/reactgraph/bfcl`, default `~/.cache/reactgraph/bfcl`), filled on
   first use by one `pip download --no-deps bfcl-eval==BFCL_VERSION` (said on stderr; ~2 MB).

The data is Apache-2.0 (Berkeley Function Calling Leaderboard); `notice()` names it, its version and licence, from
the wheel's own METADATA, for every report that uses it (see NOTICE.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from email.parser import HeaderParser
from email.utils import getaddresses
from pathlib import Path
from typing import Any

from reactgraph.evals.tasks import SuiteError

BFCL_VERSION = "2026.3.23"  # the data a run is compared on; pinned so that two machines score the same tasks
WHEEL_ENV = "REACTGRAPH_BFCL_WHEEL"
# Our category names → BFCL v4's file stems (in v4 "simple" is split by language; we use Python's).
CATEGORIES = {"simple": "simple_python", "multiple": "multiple", "parallel": "parallel",
              "parallel_multiple": "parallel_multiple"}
MAX_MEMBER_BYTES = 20_000_000  # the largest of these files is ~1 MB; a bigger one is not the wheel we know


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "reactgraph" / "bfcl"


def _wheel_in(folder: Path) -> Path | None:
    wheels = sorted(folder.glob("bfcl_eval-*.whl"))
    return wheels[-1] if wheels else None


def download_wheel(into: Path, say: Callable[[str], None]) -> Path:
    """One `pip download --no-deps` of the pinned wheel into `into` (no dependency is resolved or installed).

    Into a scratch folder first, then moved: two runs downloading at once never see half a wheel."""
    into.mkdir(parents=True, exist_ok=True)
    say(f"BFCL data: downloading the bfcl-eval {BFCL_VERSION} wheel (no dependencies, ~2 MB) into {into}; "
        f"set {WHEEL_ENV} to use a wheel you already have")
    with tempfile.TemporaryDirectory(dir=into) as scratch:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                   "-d", scratch, f"bfcl-eval=={BFCL_VERSION}"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SuiteError(f"cannot download the bfcl-eval wheel ({exc}); set {WHEEL_ENV} to one") from None
        found = _wheel_in(Path(scratch))
        if done.returncode != 0 or found is None:
            last = (done.stderr.strip().splitlines() or ["no wheel was written"])[-1][:300]
            raise SuiteError(f"pip download bfcl-eval=={BFCL_VERSION} failed: {last}; download it yourself "
                             f"(pip download --no-deps bfcl-eval=={BFCL_VERSION} -d DIR) and set {WHEEL_ENV}=DIR")
        target = into / found.name
        os.replace(found, target)
        return target


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def find_wheel(wheel: str | Path | None = None, say: Callable[[str], None] = _stderr) -> Path:
    """The bfcl-eval wheel: the one given, `$REACTGRAPH_BFCL_WHEEL`, the cached one, or a fresh download."""
    given = str(wheel or os.environ.get(WHEEL_ENV) or "")
    if given:
        path = Path(given).expanduser()
        found = _wheel_in(path) if path.is_dir() else path if path.is_file() else None
        if found is None:
            raise SuiteError(f"{WHEEL_ENV}={given}: no bfcl_eval-*.whl there (download one with "
                             f"pip download --no-deps --only-binary=:all: bfcl-eval=={BFCL_VERSION} -d DIR)")
        return found
    return _wheel_in(cache_dir()) or download_wheel(cache_dir(), say)


class BfclWheel:
    """The data files of one bfcl-eval wheel, opened as a zip."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            with zipfile.ZipFile(path) as archive:
                self._names = set(archive.namelist())
        except (OSError, zipfile.BadZipFile) as exc:
            raise SuiteError(f"{path} is not a readable wheel: {exc}") from None

    def _read(self, member: str) -> str:
        if member not in self._names:
            raise SuiteError(f"{self.path.name} has no {member} (is it a bfcl-eval v4 wheel?)")
        with zipfile.ZipFile(self.path) as archive:
            if archive.getinfo(member).file_size > MAX_MEMBER_BYTES:
                raise SuiteError(f"{self.path.name}: {member} is larger than {MAX_MEMBER_BYTES} bytes")
            return archive.read(member).decode("utf-8")

    def _jsonl(self, member: str) -> list[dict[str, Any]]:
        rows = []
        for number, line in enumerate(self._read(member).splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise SuiteError(f"{self.path.name}: {member}, line {number}: {exc}") from None
            if not isinstance(row, dict) or not isinstance(row.get("id"), str):
                raise SuiteError(f"{self.path.name}: {member}, line {number}: not an object with an id")
            rows.append(row)
        return rows

    def category(self, name: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(entry, possible answer) pairs of one category, in the file's order, joined by id."""
        stem = f"BFCL_v4_{CATEGORIES[name]}.json"
        entries = self._jsonl(f"bfcl_eval/data/{stem}")
        answers = {row["id"]: row for row in self._jsonl(f"bfcl_eval/data/possible_answer/{stem}")}
        missing = [e["id"] for e in entries if e["id"] not in answers]
        if missing:
            raise SuiteError(f"{self.path.name}: no possible answer for {', '.join(missing[:3])}")
        return [(entry, answers[entry["id"]]) for entry in entries]

    def metadata(self) -> dict[str, str]:
        member = next((n for n in self._names if n.endswith(".dist-info/METADATA")), None)
        if member is None:
            raise SuiteError(f"{self.path.name} has no dist-info METADATA")
        headers = HeaderParser().parsestr(self._read(member).split("\n\n", 1)[0])
        urls = headers.get_all("Project-URL") or []
        return {"name": headers.get("Name", "bfcl_eval"), "version": headers.get("Version", "?"),
                "license": headers.get("License", "?"),
                "authors": ", ".join(name or address
                                     for name, address in getaddresses(headers.get_all("Author-email") or [])),
                "url": urls[0].split(",", 1)[-1].strip() if urls else ""}

    def notice(self) -> str:
        """One line crediting the data: what it is, from which wheel, under which licence."""
        meta = self.metadata()
        return (f"BFCL data: Berkeley Function Calling Leaderboard, from the {meta['name']} {meta['version']} wheel "
                f"(licence: {meta['license']}; {meta['authors']}; {meta['url']}); see NOTICE.md")
