"""What the suite's forked commands (tests/support/forked_commands.py) rely on, and what they give a test.

A forked command starts from a process that imported the product before the command's environment existed, so
no product module may read the environment when it is imported: each reads it when called, as the tests'
per-command environments need."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.forked_commands import ForkedCommand, forked_run
from test_layers import product_modules

ENVIRONMENT_READS = {"environ", "getenv", "environb", "getenvb"}


class _ImportTimeReads(ast.NodeVisitor):
    """`os.environ` / `os.getenv` reached while a module is imported: not inside a function or lambda body."""

    def __init__(self) -> None:
        self.lines: list[int] = []

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for part in (*node.decorator_list, *node.args.defaults, *node.args.kw_defaults):
            if part is not None:  # decorators and defaults run at import; the body does not
                self.visit(part)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self.visit_FunctionDef(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        return None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in ENVIRONMENT_READS:
            self.lines.append(node.lineno)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in ENVIRONMENT_READS:  # after `from os import environ`
            self.lines.append(node.lineno)


def test_no_product_module_reads_the_environment_when_imported():
    found = []
    for module, path in product_modules():
        reads = _ImportTimeReads()
        reads.visit(ast.parse(path.read_text(encoding="utf-8")))
        found += [f"{module}:{line}" for line in reads.lines]
    assert found == []


def show_environment_and_directory(argv: list[str]) -> int:
    print(os.environ.get("FORKED_TEST", "<unset>"), os.getcwd(), os.getpid(), sep="\n")
    print(" ".join(argv), file=sys.stderr)
    return int(argv[0])


def sleep_for_a_minute(argv: list[str]) -> int:
    print("sleeping", flush=True)
    time.sleep(60)
    return 0


def test_a_forked_command_has_its_own_environment_directory_output_and_exit_code(tmp_path, monkeypatch):
    monkeypatch.setenv("FORKED_TEST", "the test's")
    done = forked_run(["3", "args"], {"FORKED_TEST": "the command's"}, cwd=tmp_path, timeout=60,
                      entry="test_forked_commands:show_environment_and_directory")
    variable, directory, pid = done.stdout.splitlines()
    assert (variable, directory, done.stderr, done.returncode) == ("the command's", str(tmp_path), "3 args\n", 3)
    assert int(pid) != os.getpid()
    assert forked_run(["--version"], dict(os.environ), timeout=60).stdout.startswith("reactgraph ")


def test_a_forked_command_is_signalled_and_waited_for_as_a_popen_is(tmp_path):
    output = tmp_path / "out.txt"
    command = ForkedCommand([], {}, stdout=output, entry="test_forked_commands:sleep_for_a_minute")
    assert output.exists()  # there before the command runs, as Popen's files are
    deadline = time.monotonic() + 60
    while "sleeping" not in output.read_text() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert command.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        command.wait(timeout=0.1)
    command.send_signal(signal.SIGKILL)
    assert command.wait(timeout=30) == -signal.SIGKILL and command.returncode == -signal.SIGKILL
    command.kill()  # a finished command: nothing happens, as with Popen


def test_a_forked_command_goes_when_the_test_process_that_started_it_is_killed(tmp_path):
    """A pytest worker ended by a test's timeout must not leave its servers serving, orphaned, through the rest of
    the suite and after it (they held ports and Redis connections, and polled Redis, for hours)."""
    output = tmp_path / "out.txt"
    starter = ("import sys, time\n"
               f"sys.path[:0] = [{str(Path(__file__).parent)!r}]\n"
               "from support.forked_commands import ForkedCommand\n"
               f"command = ForkedCommand([], {{}}, stdout={str(output)!r}, "
               "entry='test_forked_commands:sleep_for_a_minute')\n"
               "print(command.pid, flush=True)\n"
               "time.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, "-c", starter], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(parent.stdout.readline())  # type: ignore[union-attr]
        deadline = time.monotonic() + 60
        while "sleeping" not in output.read_text() and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        parent.kill()
        parent.wait(timeout=30)
    deadline = time.monotonic() + 30
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(pid)


def _running(pid: int) -> bool:
    """The process exists and is not a zombie waiting for its new parent to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False
