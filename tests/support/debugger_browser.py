"""Running a script of tests/js that drives the debugger page in headless Chromium (Debian's, no download), with
tests/js/debugger_page.mjs beside it and the packages tests/js/prepare.py installs: for the browser tests, the
page's benchmark (benchmarks/ui_open.py) and its screenshots (.ci/update-ui-screenshots)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

JS = Path(__file__).resolve().parent.parent / "js"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


class BrowserUnavailable(RuntimeError):
    """No node or no Chromium on this machine (.ci/run installs both)."""


def run_page_script(script: str | Path, args: list[str], timeout: float) -> dict[str, Any]:
    """`node SCRIPT ARGS…` (a script of tests/js, or a path) run from a scratch folder; the JSON object its last
    line prints. A script that fails, or reports an `error`, raises AssertionError with its output's end."""
    if shutil.which("node") is None:
        raise BrowserUnavailable("node is not installed (apt-get install -y nodejs npm): .ci/run installs it")
    if not Path(CHROMIUM).exists():
        raise BrowserUnavailable(f"no Chromium at {CHROMIUM} (apt-get install -y chromium): .ci/run installs it")
    sys.path.insert(0, str(JS))
    from prepare import prepare  # tests/js is not a package

    with tempfile.TemporaryDirectory(prefix="debugger-page-") as scratch:
        run = Path(scratch)
        (run / "node_modules").symlink_to(prepare() / "node_modules", target_is_directory=True)
        source = Path(script) if Path(script).is_absolute() else JS / script
        for path in (source, JS / "debugger_page.mjs"):
            shutil.copy(path, run / path.name)
        done = subprocess.run(["node", source.name, *args], cwd=run, capture_output=True, text=True, timeout=timeout,
                              check=False, env={**os.environ, "CHROMIUM": CHROMIUM})
    assert done.returncode == 0, f"{source.name} failed: {done.stderr[-3000:]}"
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert "error" not in seen, seen.get("error")
    return seen
