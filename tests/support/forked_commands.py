"""`reactgraph` commands (serve, worker, ask, compare) as processes forked from one that has already imported them.

Each such process spent ≈ 2 s of CPU importing LangGraph, LangChain and the service before its first line of work,
and the suite starts well over a hundred of them: that import was the largest single part of the suite's time.
multiprocessing's forkserver imports them once per pytest worker and forks a process per command. Each is still
a process of its own — its own pid, environment, file descriptors, signals and exit code — that serves real
HTTP and Redis, which is what these tests are about. What it skips is the console script's own start-up; the
tests whose point that is (tests/test_startup.py, tests/test_packaging.py, the CLI's) still exec `reactgraph`.

`ForkedCommand` is the part of `subprocess.Popen` the tests use (pid, poll, wait, communicate, send_signal,
terminate, kill), `forked_run` the part of `subprocess.run`; test_docs_snippets runs its pages the same way.
"""

from __future__ import annotations

import atexit
import importlib
import multiprocessing
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import weakref
from pathlib import Path

from support import outbound

# What the commands import on their way to their first line of work (a module missing here is imported by the
# forked process itself, as it would be anyway).
PRELOAD = ["reactgraph.cli.app", "reactgraph.cli.serve", "reactgraph.cli.ask", "reactgraph.cli.compare",
           "reactgraph.service.app", "reactgraph.service.worker", "reactgraph.graph.react",
           "reactgraph.graph.plan_solve", "reactgraph.models.offline.model", "reactgraph.tools.builtin", "rich",
           "uvicorn", "redis.asyncio", "httpx", "support.forkserver_ready"]  # last: it freezes what the others imported

_forkserver = multiprocessing.get_context("forkserver")
_forkserver.set_forkserver_preload(PRELOAD)


def _run_command(entry: str, argv: list[str], env: dict[str, str], stdout: str, stderr: str,
                 cwd: str | None, starter: int) -> None:
    """In the forked process: the command's environment, directory, output files and arguments, then `entry`."""
    _die_with(starter)
    outbound.refuse()  # a fresh interpreter's child: the test process's guard is not inherited
    if cwd is not None:
        os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for folder in reversed([p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]):
        if folder not in sys.path:  # what PYTHONPATH would have put there, had the interpreter started now
            sys.path.insert(0, folder)
    for fd, path in ((1, stdout), (2, stderr)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(target, fd)
        os.close(target)
    module, function = entry.split(":")
    sys.argv = [module, *argv]
    main = getattr(importlib.import_module(module), function)
    try:
        code = main(argv)
    finally:
        atexit._run_exitfuncs()  # multiprocessing ends its processes with os._exit, which skips them
    sys.exit(code)


def _die_with(starter: int) -> None:
    """SIGKILL this process once the test process that started it (`starter`) has gone, as when a test's timeout
    ends its pytest worker: its servers would otherwise serve on, orphaned, through the rest of the suite and after
    it. The forkserver in between cannot tell (every process it forked keeps it running), so a thread here waits
    on the starter's pidfd (Linux 5.3+; elsewhere nothing changes)."""
    try:
        watched = os.pidfd_open(starter)
    except ProcessLookupError:
        os._exit(1)  # gone before this process started
    except (AttributeError, OSError):
        return

    def watch() -> None:
        select.select([watched], [], [])
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="dies-with-its-test", daemon=True).start()


class ForkedCommand:
    """`reactgraph ARGV` in a forked process with environment `env`, its stdout and stderr appended to the files
    given, or captured (None) for `communicate()`. `entry` ("module:function", called with ARGV, returning the exit
    code) runs another program instead of the CLI."""

    def __init__(self, argv: list[str], env: dict[str, str], *, stdout: Path | str | None = os.devnull,
                 stderr: Path | str | None = os.devnull, cwd: Path | str | None = None,
                 entry: str = "reactgraph.cli.app:main") -> None:
        self.args = ["reactgraph", *argv]
        # stdout's and stderr's temporary files, where captured
        self._captured = [_temporary_file() if path is None else None for path in (stdout, stderr)]
        weakref.finalize(self, _remove, [path for path in self._captured if path is not None])  # never read
        outputs = [str(path) if captured is None else str(captured)
                   for path, captured in zip((stdout, stderr), self._captured, strict=True)]
        for output in outputs:  # there before this returns, as Popen's are: a test may read one at once
            if output != os.devnull:
                Path(output).touch()
        # daemon: a process a test leaves running is terminated when its pytest worker exits, not waited for
        self._process = _forkserver.Process(target=_run_command, daemon=True,
                                            args=(entry, argv, env, *outputs, None if cwd is None else str(cwd),
                                                  os.getpid()))
        self._process.start()
        self.pid: int = self._process.pid  # type: ignore[assignment]

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode  # like Popen's: negative for a signal

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Once it has exited: what it wrote to the captured stdout and stderr ("" for one not captured)."""
        self.wait(timeout)
        out, err = (_read_once(path) for path in self._captured)
        return out, err

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _temporary_file() -> Path:
    handle, name = tempfile.mkstemp(prefix="reactgraph-forked-", suffix=".out")
    os.close(handle)
    return Path(name)


def _remove(paths: list[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


def _read_once(path: Path | None) -> str:
    if path is None or not path.exists():
        return ""
    text = path.read_text(encoding="utf-8", errors="replace")
    path.unlink()
    return text


def forked_run(argv: list[str], env: dict[str, str], *, timeout: float, cwd: Path | str | None = None,
               entry: str = "reactgraph.cli.app:main") -> subprocess.CompletedProcess[str]:
    """`subprocess.run(["reactgraph", *argv], capture_output=True, text=True, ...)`, forked: killed past `timeout`."""
    command = ForkedCommand(argv, env, stdout=None, stderr=None, cwd=cwd, entry=entry)
    try:
        out, err = command.communicate(timeout)
    except subprocess.TimeoutExpired:
        command.kill()
        command.wait(10)
        raise
    return subprocess.CompletedProcess(command.args, command.wait(), out, err)
