"""Running a comparison's runs: several at once (`concurrency`), each within its time limit, none past the total
cost cap, none that a resumed run already has — and the records in the plan's order whatever order they finish in.

Each run is a thread of its own (a graph run is synchronous; the provider calls are I/O): at most `concurrency`
at a time. A run's result does not depend on what runs beside it (its gateway, fault draws and the noisy
model's seed come from its own key, evals/runner.py), so concurrency 4 gives the records concurrency 1 gives,
wall times aside.

**The time limit** (`--task-timeout`): a Python thread cannot be stopped from outside, so a callback on every
node, model and tool start raises `TaskTimedOut` once the deadline has passed (the run ends at its next step,
without another paid call), and the scheduler stops waiting for a run still busy a grace period later (one stuck
in a single long call): it is recorded as timed out, charged what its calls used so far (the prompt in flight
included, evals/spend.py), and its thread finishes on its own. Either way the record is an infrastructure
outcome (evals/outcomes.py).

**The total cost cap** (`--max-total-cost`): the spend is the finished runs' cost plus the running runs' so far
(`CostLedger`); once it reaches the cap no run starts, and no model call of a running run either (the run ends
`cut`, with what it spent): the cap is passed by at most what the requests in flight spend.

**A provider that refuses**: the model layer already retries each call (the SDK's retries, then the nodes'
RetryPolicy, models/gateway.py); a run whose call still fails ends `failed` and is recorded so, as an
infrastructure outcome, not run again (unless `--retry-infra` asks).
What the schedule adds is run-wide: after such a failure no new run starts for a while (2 s, doubling per failure
in a row up to 60 s; a run that ends otherwise resets it), so N concurrent runs do not all spend their retries
on a provider that is rate-limiting or down.

**Progress** goes to stderr only on a terminal (rich.progress: runs done of planned, elapsed, ETA, running cost,
the last run's outcome); a pipe, a CI log, `--json` and `--quiet` get none.
"""

from __future__ import annotations

import contextvars
import logging
import queue
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
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

from reactgraph.evals.graphs import GraphEntry
from reactgraph.evals.outcomes import CUT, mark_timed_out
from reactgraph.evals.results_file import RunKey, record_key
from reactgraph.evals.spend import CostLedger, RunWatch, record_cost, total_cost
from reactgraph.evals.tasks import Task

FIRST_PAUSE_S = 2.0
MAX_PAUSE_S = 60.0
# The causes the model layer words for a provider that refused or failed (models/loader.describe_model_error).
_PROVIDER_TROUBLE = re.compile(r"model provider error: (?:(?:408|409|429|5\d\d) |cannot connect|no reply)")


def provider_trouble(record: dict[str, Any]) -> bool:
    """The run failed because the provider refused or failed (after every retry of the model layer)."""
    return bool(_PROVIDER_TROUBLE.search(str(record.get("error") or "")))


class StartGate:
    """When the next run may start: at once, or after a pause that doubles with each provider failure in a row."""

    def __init__(self, first_s: float | None = None, max_s: float | None = None) -> None:
        self.first_s = FIRST_PAUSE_S if first_s is None else first_s  # read when a gate is made, not imported
        self.max_s = MAX_PAUSE_S if max_s is None else max_s
        self.failures = 0
        self.open_at = 0.0
        self._lock = threading.Lock()

    def observe(self, record: dict[str, Any]) -> None:
        with self._lock:
            if not provider_trouble(record):
                self.failures = 0
                return
            pause = min(self.first_s * 2 ** self.failures, self.max_s)
            self.failures += 1
            self.open_at = max(self.open_at, time.monotonic() + pause)

    def wait_s(self) -> float:
        """Seconds until a run may start (0: now)."""
        return max(0.0, self.open_at - time.monotonic())


class _QuietStops(logging.Filter):
    """LangChain logs a warning for every error a callback raises, even one it raises on purpose: not for ours."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return "TaskTimedOut" not in message and "CostCapReached" not in message


logging.getLogger("langchain_core.callbacks.manager").addFilter(_QuietStops())


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


# How long past its limit a run stuck in one call is waited for before it is recorded as timed out.
GRACE_S = 5.0
POLL_S = 0.5  # the longest the scheduler sleeps between looks at deadlines and the start gate


@dataclass(frozen=True)
class PlannedRun:
    """One run of the plan: a graph, a seed, a task and a repeat, at its place in the report's order."""

    index: int
    entry: GraphEntry
    seed: int
    task: Task
    repeat: int

    @property
    def key(self) -> RunKey:
        return (self.entry.name, self.seed, self.task.id, self.repeat)


def plan_runs(entries: list[GraphEntry], tasks: list[Task], seeds: Iterable[int], repeat: int) -> list[PlannedRun]:
    """Graph-major (all of one graph, then the next), then seed, task and repeat: the order of the records."""
    combos = [(e, s, t, r) for e in entries for s in seeds for t in tasks for r in range(repeat)]
    return [PlannedRun(i, *combo) for i, combo in enumerate(combos)]


@dataclass
class Outcome:
    """What a run of the plan produced: every planned record there is (earlier ones too), in plan order."""

    records: list[dict[str, Any]]
    new: int = 0
    not_started: int = 0
    stopped: str | None = None  # why runs were left unstarted (the total cost cap), or None
    cost_usd: float | None = 0.0  # of every record; None when the model's price is unknown
    started_at: str = field(default_factory=lambda: utc_now())


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


Runner = Callable[[PlannedRun, RunWatch], dict[str, Any]]


@dataclass
class _Running:
    run: PlannedRun
    started: float
    watch: RunWatch


def kept_records(plan: list[PlannedRun], done: Iterable[dict[str, Any]],
                 only: set[RunKey] | None = None) -> dict[RunKey, dict[str, Any]]:
    """The records of `done` a run of the plan keeps: every planned one but a run the cost cap cut (made again);
    with `only` (`--retry-infra`), every planned one whose key is not in `only`."""
    keys = {p.key for p in plan}
    kept: dict[RunKey, dict[str, Any]] = {}
    for record in done:
        key = record_key(record)
        if key in keys and (key not in only if only is not None else record.get("status") != CUT):
            kept.setdefault(key, record)
    return kept


def execute(plan: list[PlannedRun], run_one: Runner, *, model: str, concurrency: int = 1,
            task_timeout_s: float | None = None, max_total_cost_usd: float | None = None,
            done: Iterable[dict[str, Any]] = (), on_result: Callable[[dict[str, Any]], None] | None = None,
            gate: StartGate | None = None, common: dict[str, Any] | None = None,
            only: set[RunKey] | None = None) -> Outcome:
    """Run every planned run `done` has no record of (with `only`: the runs of those keys, made again), at most
    `concurrency` at once; `on_result` sees each new record as it finishes (in finish order). Once the spend
    (finished and running runs') reaches the total cost cap no run starts and no model call of a running run
    either (those runs end `cut`). `common` holds the fields every record of this comparison has (model, fault
    rate…), for the records of runs that gave back nothing."""
    kept = kept_records(plan, done, only)
    todo = deque(p for p in plan if p.key not in kept and (only is None or p.key in only))
    records: dict[int, dict[str, Any]] = {p.index: kept[p.key] for p in plan if p.key in kept}
    gate = gate or StartGate()
    ledger = CostLedger(model, max_total_cost_usd, total_cost(records.values()))
    finished: queue.Queue[tuple[int, dict[str, Any] | BaseException]] = queue.Queue()
    running: dict[int, _Running] = {}
    outcome = Outcome(records=[])

    def finish(index: int, record: dict[str, Any], watch: RunWatch) -> None:
        record = {**record, "cost_usd": record_cost(record, model), "finished_at": utc_now()}
        ledger.settle(watch.meter, record["cost_usd"])
        records[index] = record
        outcome.new += 1
        gate.observe(record)
        if on_result:
            on_result(record)

    while (todo and outcome.stopped is None) or running:
        if ledger.reached() and (todo or running) and outcome.stopped is None:
            outcome.stopped = ledger.stop_line()
        while todo and outcome.stopped is None and len(running) < concurrency and gate.wait_s() == 0:
            run = todo.popleft()
            running[run.index] = _start(run, run_one, task_timeout_s, ledger, finished)
        for index, late in _overdue(running, task_timeout_s):
            finish(index, {**(common or {}), **late}, running.pop(index).watch)  # its thread is left to end
        try:
            index, result = finished.get(timeout=_pause(running, task_timeout_s, gate, bool(todo)))
        except queue.Empty:
            continue
        if index not in running:
            continue  # given up past its time limit: what it sends now is dropped
        if isinstance(result, BaseException):
            raise result
        finish(index, result, running.pop(index).watch)
    outcome.not_started = len(todo)
    outcome.records = [records[i] for i in sorted(records)]
    outcome.cost_usd = total_cost(outcome.records)
    return outcome


def _start(run: PlannedRun, run_one: Runner, limit_s: float | None, ledger: CostLedger,
           finished: queue.Queue[tuple[int, dict[str, Any] | BaseException]]) -> _Running:
    started = time.monotonic()
    watch = RunWatch(started + limit_s if limit_s else None, limit_s, ledger)

    def work() -> None:
        try:
            finished.put((run.index, run_one(run, watch)))
        except BaseException as exc:  # noqa: BLE001 - handed to the scheduler, which raises it in the caller
            finished.put((run.index, exc))

    # A daemon thread: one left behind past its time limit must not keep the process alive at exit. It runs in a
    # copy of the caller's context, so what the caller set in context variables (tracing, run ids) reaches it.
    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(work,), name=f"eval-run-{run.index}", daemon=True).start()
    return _Running(run, started, watch)


def _overdue(running: dict[int, _Running], limit_s: float | None) -> list[tuple[int, dict[str, Any]]]:
    """The runs still busy a grace period past their time limit, as timed-out records charged what their calls
    used so far (the prompts still in flight included)."""
    if not limit_s:
        return []
    now = time.monotonic()
    return [(index, mark_timed_out({**empty_record(r.run), **r.watch.meter.counts(in_flight=True),
                                    "wall_s": round(now - r.started, 4)}, limit_s))
            for index, r in running.items() if now - r.started >= limit_s + GRACE_S]


def _pause(running: dict[int, _Running], limit_s: float | None, gate: StartGate, waiting: bool) -> float:
    """How long to wait for a result: until the next deadline or the start gate opens, at most POLL_S."""
    pause = POLL_S
    if limit_s and running:
        first = min(r.started for r in running.values())
        pause = min(pause, max(0.01, first + limit_s + GRACE_S - time.monotonic()))
    if waiting and gate.wait_s() > 0:
        pause = min(pause, max(0.01, gate.wait_s()))
    return pause


def empty_record(run: PlannedRun) -> dict[str, Any]:
    """The record of a run that gave back nothing (abandoned past its time limit): nothing counted yet."""
    task = run.task
    return {"graph": run.entry.name, "task": task.id, "tags": list(task.tags), "lang": task.lang,
            "repeat": run.repeat, "seed": run.seed, "question": task.question, "answer": "", "status": None,
            "success": False, "failure_mode": "error", "error": None, "infra": None, "model_calls": 0, "tool_calls": 0,
            "tool_failures": 0, "unknown_tool_calls": 0, "invalid_args_calls": 0, "tool_statuses": {},
            "injected_faults": {}, "tokens_in": 0, "tokens_out": 0, "tokens": 0, "wall_s": 0.0, "iterations": 0,
            "steps": 0}
