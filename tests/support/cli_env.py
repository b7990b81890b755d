"""The environment a test gives a `reactgraph` subprocess: the developer's own settings removed, but the
test session's REACTGRAPH_HOME (and the test's structured-output record) kept, so no test ever starts a Redis or
builds an index in the real home."""

from __future__ import annotations

import os

CLEARED = ("REACTGRAPH_", "OPENAI_", "ANTHROPIC_")
KEPT = ("REACTGRAPH_HOME", "REACTGRAPH_STRATEGY_FILE")  # the test's own home and structured-output record


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED) or k in KEPT}
    env.update(extra)
    return env


def run_in_process(monkeypatch, capfd, argv: list[str], **env: str):
    """`reactgraph ARGV` through `main()` in this process, with the environment `clean_env(**env)` gives its
    subprocess, and what reached file descriptors 1 and 2 as its stdout and stderr (none without `capfd`): for the
    runs where the process is not the point. A `CompletedProcess`, as `subprocess.run` returns for the runs where
    it is."""
    import subprocess

    from reactgraph.cli.app import main

    with monkeypatch.context() as patch:
        for name in [n for n in os.environ if n.startswith(CLEARED) and n not in KEPT]:
            patch.delenv(name)
        for name, value in env.items():
            patch.setenv(name, value)
        if capfd is not None:
            capfd.readouterr()
        code = main(argv)
        out, err = capfd.readouterr() if capfd is not None else ("", "")
    return subprocess.CompletedProcess(["reactgraph", *argv], code, out, err)
