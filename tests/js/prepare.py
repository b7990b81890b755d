"""The JS clients' packages (tests/js/package-lock.json), installed once per lockfile with `npm ci` under
~/.cache/reactgraph/js-clients/<lockfile hash>/ — what tests/test_js_clients.py runs its scripts with. .ci/run runs
this before the tests (the registry is reached here only); `python tests/js/prepare.py` prints the folder.
No browser is downloaded: the browser test drives the machine's Chromium ($CHROMIUM or /usr/bin/chromium)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
NPM_TIMEOUT_S = 900


def modules_dir() -> Path:
    """The folder whose node_modules holds the packages of this lockfile (not yet installed, maybe)."""
    digest = hashlib.sha256((HERE / "package-lock.json").read_bytes()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "reactgraph" / "js-clients" / digest


def prepare() -> Path:
    """Install the packages if this lockfile's are not there yet; the folder. Raises RuntimeError in one line."""
    target = modules_dir()
    if (target / "node_modules" / ".package-lock.json").exists():
        return target
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed (apt-get install -y nodejs npm): the JS client tests need it")
    staging = target.with_name(f"{target.name}.partial-{os.getpid()}")  # one per process: pytest-xdist workers
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy(HERE / name, staging / name)
    done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=staging,
                          capture_output=True, text=True, timeout=NPM_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"npm ci failed in {staging}: {(done.stderr or done.stdout).strip()[-500:]}")
    if target.exists() and not (target / "node_modules" / ".package-lock.json").exists():
        shutil.rmtree(target, ignore_errors=True)  # a broken install left by hand
    try:
        staging.rename(target)  # whole or not at all: an interrupted install is never taken for a finished one
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)  # another process finished first: its install is the same
        if not (target / "node_modules" / ".package-lock.json").exists():
            raise
    return target


if __name__ == "__main__":
    try:
        print(prepare())
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        sys.exit(f"tests/js/prepare.py: {error}")
