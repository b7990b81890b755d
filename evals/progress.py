"""The comparison's progress bar on stderr: runs done of planned, elapsed, ETA, the running cost and the last
run's outcome. Shown only on a terminal (rich.progress); a pipe, a CI log, `--json` and `--quiet` get none."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class RunProgress(AbstractContextManager["RunProgress"]):
    """`with RunProgress(console, total, done=already) as bar: bar.advance(record)` — silent when `enabled` is
    false; the running cost counts the records given at the start (a resumed run's) too."""

    def __init__(self, console: Console, total: int, *, done: list[dict[str, Any]] | None = None,
                 enabled: bool = True) -> None:
        done = done or []
        self.enabled = enabled and console.is_terminal
        self.cost: float | None = _add(0.0, done)
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                                  TextColumn("{task.fields[cost]}"), TextColumn("{task.fields[last]}"),
                                  console=console, transient=True, disable=not self.enabled)
        self._bar = self._progress.add_task("comparing", total=total, completed=len(done), cost=self._cost(),
                                            last="")

    def _cost(self) -> str:
        return "cost ?" if self.cost is None else f"${self.cost:.4f}"

    def advance(self, record: dict[str, Any]) -> None:
        self.cost = _add(self.cost, [record])
        mark = "ok" if record.get("success") else record.get("failure_mode")
        self._progress.update(self._bar, advance=1, description=f"{record['graph']:<18}", cost=self._cost(),
                              last=f"{record['task']}: {mark}")

    def __enter__(self) -> RunProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()


def _add(total: float | None, records: list[dict[str, Any]]) -> float | None:
    """The cost so far plus the records' (None once any cost is unknown)."""
    for record in records:
        cost = record.get("cost_usd", 0.0)
        if total is None or cost is None:
            return None
        total += float(cost)
    return total
