"""Run a suite through one or more graphs and record, per run, whether it succeeded and what it cost.

Every (graph, seed, task, repeat) run gets a fresh gateway (its own circuit breakers, its own fault draws)
and, for the noisy offline model, its own seed, all derived from the run's seed (`RunConfig.seed`, or
seed, seed+1, … with `seeds=N`), the task id and the repeat: the same seed gives the same numbers (wall
times aside), whatever else ran before. Every record carries its seed.

`recorded_comparison` is the notebooks' way in: with $REACTGRAPH_RESULTS_DIR set, each comparison keeps a
directory of its own there (named by the model and a hash of every setting that identifies it); the runs already
in its results.jsonl are read, not made again, and the rest are made and appended as `compare --resume` does, so
the notebooks' tables and figures come from results files (`python .ci/update-notebooks` re-makes them, running
nothing). Unset, it runs as `run_comparison` does.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langgraph.types import Command

from reactgraph.evals.bfcl import recorded_gateway
from reactgraph.evals.faults import FaultPlan, faulty_gateway
from reactgraph.evals.graphs import GraphEntry, resolve_graphs
from reactgraph.evals.metrics import failure_mode, step_counts
from reactgraph.evals.outcomes import infra_cause, mark_cut, mark_timed_out
from reactgraph.evals.results_file import (
    IDENTITY,
    RESULTS,
    SETTINGS,
    RunKey,
    open_results,
    ordered,
    record_key,
    rewrite_results,
    suite_fingerprint,
)
from reactgraph.evals.schedule import Outcome, PlannedRun, StartGate, execute, plan_runs
from reactgraph.evals.spend import RunWatch
from reactgraph.evals.tasks import Task, check, task_fields
from reactgraph.graph import load_chat_model, parse_spec, redact
from reactgraph.models import reply_tape
from reactgraph.nodes.approval import answer_with, is_approval_request, requested_calls


@dataclass(frozen=True)
class RunConfig:
    """One comparison: which graphs, which model, how many repeats and seeds, which faults."""

    graphs: tuple[str, ...] = ("react",)
    model: str = "offline"
    repeat: int = 1
    seed: int = 0
    seeds: int = 1  # runs the whole comparison for seed, seed+1, …, seed+seeds-1
    faults: FaultPlan = field(default_factory=FaultPlan)
    max_iterations: int = 5
    reflection: str = "llm"
    protocol: str = "tools"
    # Budgets of every run (None: no budget); see Context.
    max_tool_calls: int | None = None
    max_model_tokens: int | None = None
    max_cost_usd: float | None = None
    # Most tokens one model reply may have (None: Context's default); a small local model may ramble to it.
    max_output_tokens: int | None = None
    # How the runs are made (evals/schedule.py): runs at once, each run's time limit, the whole comparison's cost.
    concurrency: int = 1
    task_timeout_s: float | None = None
    max_total_cost_usd: float | None = None

    def __post_init__(self) -> None:
        if self.repeat < 1:
            raise ValueError(f"repeat must be at least 1, not {self.repeat}")
        if self.seeds < 1:
            raise ValueError(f"seeds must be at least 1, not {self.seeds}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {self.concurrency}")
        if self.task_timeout_s is not None and self.task_timeout_s <= 0:
            raise ValueError(f"task timeout must be more than 0 seconds, not {self.task_timeout_s:g}")
        if self.max_output_tokens is not None and self.max_output_tokens < 16:
            raise ValueError(f"max output tokens must be at least 16, not {self.max_output_tokens}")
        if self.max_total_cost_usd is not None and self.max_total_cost_usd < 0:
            raise ValueError(f"total cost cap must be 0 or more, not {self.max_total_cost_usd:g}")
        parse_spec(self.model)  # a bad spec is one line before anything runs

    def describe(self) -> dict[str, Any]:
        data = asdict(self)
        data["graphs"] = list(self.graphs)
        data["seed_values"] = list(self.seed_values)
        return data

    @property
    def seed_values(self) -> tuple[int, ...]:
        return tuple(range(self.seed, self.seed + self.seeds))


def model_label(spec: str, model: BaseChatModel) -> str:
    """The spec plus what it is, so no number is ever read as coming from another model."""
    provider, _ = parse_spec(spec)
    if provider == "offline":
        return f"{spec} (scripted offline model, not an LLM)"
    return spec


def tape_run(graph: str, key: str) -> str:
    """A run's name on a tape of replies: its graph and its key."""
    return f"{graph} {key}"


def run_key(seed: int, task_id: str, repeat: int) -> str:
    # Not the graph: every graph meets the same fault draws and model mistakes for the same task and repeat.
    return f"{seed}:{task_id}:{repeat}"


def run_task(entry: GraphEntry, task: Task, repeat: int, config: RunConfig, model: BaseChatModel,
             seed: int | None = None, guard: RunWatch | None = None) -> dict[str, Any]:
    """One run of one task through one graph under `seed` (default: the config's), as a flat JSON-able record;
    `guard` meters it and stops it at its time limit (the record then says `timed_out`) or at the comparison's
    cost cap (`cut`)."""
    seed = config.seed if seed is None else seed
    key = run_key(seed, task.id, repeat)
    # A task with its own function docs (e.g. BFCL's) offers those, schema-only, instead of the built-in tools.
    gateway, injector = faulty_gateway(config.faults, key, recorded_gateway(task.tools) if task.tools else None,
                                       task.faults)
    if hasattr(model, "reseeded"):  # the project's scripted models seed their own draws from the run's key
        run_model, provider_seed = model.reseeded(key), None
    else:
        run_model, provider_seed = with_provider_seed(model, key)
    graph = entry.build(gateway, run_model)
    context = entry.make_context(model=config.model, max_iterations=config.max_iterations,
                                 reflection=config.reflection, protocol=config.protocol,
                                 max_tool_calls=config.max_tool_calls, max_model_tokens=config.max_model_tokens,
                                 max_cost_usd=config.max_cost_usd, **_reply_limit(config))
    watch = guard or RunWatch()
    result: dict[str, Any] = {}
    error = None
    started = time.perf_counter()
    attempt = uuid.uuid4().hex[:12]  # this making of the run: its replies on a tape (models/reply_tape.py)
    try:  # the watch before the meter: a call it stops is neither sent nor counted
        with reply_tape.run_scope(tape_run(entry.name, key), attempt):
            result = _invoke_approving(graph, {"messages": [HumanMessage(task.question)]}, context,
                                       {"callbacks": [watch, watch.meter], "recursion_limit": 200,
                                        "configurable": {"thread_id": f"eval-{uuid.uuid4().hex[:8]}"}})
    except Exception as exc:  # noqa: BLE001 - a crashing graph is a measured failure, not the end of the eval
        error = redact(" ".join(f"{type(exc).__name__}: {exc}".split())[:500], run_model)
    outcome = {"seed": seed, "provider_seed": provider_seed, "temperature": getattr(run_model, "temperature", None),
               "model_label": model_label(config.model, model), "wall_s": round(time.perf_counter() - started, 4)}
    record = _record(entry, task, repeat, config, result, error, watch, outcome, dict(injector.injected))
    if reply_tape.active() is not None:
        record["replies"] = attempt
    if watch.expired:
        return mark_timed_out(record, watch.limit_s or 0)
    return mark_cut(record, watch.cut) if watch.cut else record


def _record(entry: GraphEntry, task: Task, repeat: int, config: RunConfig, result: dict[str, Any],
            error: str | None, watch: RunWatch, outcome: dict[str, Any], injected: dict[str, int]) -> dict[str, Any]:
    """The run's record from its final state (or the error it raised) and what its meter counted."""
    steps = list(result.get("steps") or [])
    answer = str(result.get("final_answer") or "")
    # A run that raised ended `failed` as one that ended so itself: the cause is its error line.
    status = result.get("status") or ("failed" if error else None)
    if error is None and status == "failed":
        error = answer[:500]  # the one line the graph ended with: the cause (a provider's error after its retries)
    success = error is None and check(task, answer, steps, status)
    counts = step_counts(steps)
    used = watch.meter.counts()
    return {
        "graph": entry.name, "task": task.id, "tags": list(task.tags), "lang": task.lang, "repeat": repeat,
        "seed": outcome["seed"], "model": config.model, "model_label": outcome["model_label"],
        "provider_seed": outcome["provider_seed"], "temperature": outcome["temperature"],
        "tool_failure_rate": config.faults.failure_rate, "tool_latency_ms": config.faults.latency_ms,
        "question": task.question, "answer": answer, "status": status, "success": success,
        # who judged the answer's coverage: "model", or "unchecked" when no check could be read (None: a baseline)
        "coverage_by": (result.get("coverage") or {}).get("by"),
        "failure_mode": failure_mode(success, status, steps, error), "error": error,
        # the provider's or the transport's failure (evals/outcomes.py): left out of the success rates
        "infra": infra_cause(error, status), "stop_reason": result.get("stop_reason"),
        "fallback_plans": counts["fallback_plans"], "format_errors": counts["format_errors"],
        "model_calls": used["model_calls"], "tool_calls": counts["tool_calls"],
        "tool_failures": counts["tool_failures"], "unknown_tool_calls": counts["unknown_tool_calls"],
        "invalid_args_calls": counts["invalid_args_calls"], "tool_statuses": counts["tool_statuses"],
        "injected_faults": injected, "tokens_in": used["tokens_in"], "tokens_out": used["tokens_out"],
        "tokens": used["tokens"] or counts["step_tokens"], "wall_s": outcome["wall_s"],
        "iterations": int(result.get("iteration") or 0), "steps": len(steps), **task_fields(task, steps),
    }


def with_provider_seed(model: BaseChatModel, key: str) -> tuple[BaseChatModel, int | None]:
    """The model with a sampling seed of the run's own, for a provider client that sends one (OpenAI's and the
    OpenAI-compatible servers': llama.cpp, vLLM, Ollama), and that seed; (model, None) for one that has none
    (Anthropic's API takes no seed). Derived from the run's key (seed, task, repeat), so a run asks the same each
    time and two repeats are two draws; the record keeps it, so a request can be made again."""
    if "seed" not in type(model).model_fields:
        return model, None
    seed = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % 2**31
    return model.model_copy(update={"seed": seed}), seed


def _reply_limit(config: RunConfig) -> dict[str, int]:
    """The run's max_output_tokens when the comparison sets one (else Context's default)."""
    return {"max_output_tokens": config.max_output_tokens} if config.max_output_tokens else {}


MAX_APPROVALS = 50  # approval pauses answered per run; more would mean a graph that asks in a loop


def _invoke_approving(graph: Any, graph_input: Any, context: Any, config: dict[str, Any]) -> dict[str, Any]:
    """Run to the end, approving every call a tool asks approval for: an eval measures the agent with its tools
    (no one is there to ask); `tool_statuses` still shows what ran. Checkpointed only where the run pauses or ends
    (`durability="exit"`): the resume needs no more, and a checkpoint per step cost ≈ a fifth of a run's CPU."""
    result = graph.invoke(graph_input, context=context, config=config, durability="exit")
    for _ in range(MAX_APPROVALS):
        pauses = [p.value for p in result.get("__interrupt__") or () if is_approval_request(p.value)]
        if not pauses:
            break
        approve = answer_with(pauses[0], [{"type": "approve"}] * len(requested_calls(pauses[0])))
        result = graph.invoke(Command(resume=approve), context=context, config=config, durability="exit")
    return result


Progress = Callable[[dict[str, Any]], None]


def run_comparison(tasks: list[Task], config: RunConfig, on_result: Progress | None = None,
                   model: BaseChatModel | None = None,
                   done: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Every seed × task × repeat through every graph of `config`; `on_result` sees each record as it is made.

    The records come in graph-major order (all of one graph, then the next) whatever order the runs finish in
    (`config.concurrency` at once); a run whose record is in `done` (a resumed comparison's) is not made again.
    """
    return compare_runs(tasks, config, on_result, model, done).records


def compare_runs(tasks: list[Task], config: RunConfig, on_result: Progress | None = None,
                 model: BaseChatModel | None = None, done: list[dict[str, Any]] | None = None,
                 only: set[RunKey] | None = None, gate: StartGate | None = None) -> Outcome:
    """`run_comparison` with what else happened: how many runs were new, left unstarted, and why; with `only`,
    the runs of those keys alone, made again (`compare --retry-infra`); `gate`: when runs may start after a
    provider failure (default: a pause doubling with each failure in a row)."""
    entries = resolve_graphs(list(config.graphs))
    chat_model = model or load_chat_model(config.model)
    plan = plan_runs(entries, tasks, config.seed_values, config.repeat)
    common = {"model": config.model, "model_label": model_label(config.model, chat_model),
              "tool_failure_rate": config.faults.failure_rate, "tool_latency_ms": config.faults.latency_ms}

    def run_one(run: PlannedRun, guard: RunWatch) -> dict[str, Any]:
        return run_task(run.entry, run.task, run.repeat, config, chat_model, run.seed, guard)

    return execute(plan, run_one, model=config.model, concurrency=config.concurrency,
                   task_timeout_s=config.task_timeout_s, max_total_cost_usd=config.max_total_cost_usd,
                   done=done or (), on_result=on_result, common=common, only=only, gate=gate)


DETERMINISTIC_FIELDS = ("graph", "task", "seed", "repeat", "answer", "status", "success", "failure_mode", "model_calls",
                        "tool_calls", "tool_failures", "unknown_tool_calls", "invalid_args_calls", "tool_statuses",
                        "injected_faults", "tokens_in", "tokens_out", "iterations")


def comparable(records: list[dict[str, Any]], fields: tuple[str, ...] = DETERMINISTIC_FIELDS) -> list[dict[str, Any]]:
    """The records without what legitimately varies between identical runs (wall time)."""
    return [{k: r[k] for k in fields} for r in records]


RESULTS_DIR_ENV = "REACTGRAPH_RESULTS_DIR"
# Settings that joined the identity after results were committed: named in the hash only when set, so the
# directories made before them keep their names.
SET_ONLY = ("max_output_tokens", "endpoint")  # in a directory's identity only when set (older names stay)


def results_directory(tasks: list[Task], config: RunConfig, root: Path) -> tuple[Path, dict[str, Any]]:
    """The directory of this comparison under `root`, and the settings its run.json holds."""
    settings = {**config.describe(), "suite": f"{len(tasks)} selected tasks", "suite_sha": suite_fingerprint(tasks)}
    identity = {key: settings.get(key) for key in (*IDENTITY, "seed_values", "repeat")
                if key not in SET_ONLY or settings.get(key) is not None}
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return root / f"{re.sub(r'[^A-Za-z0-9._-]+', '_', config.model)}-{digest}", settings


def recorded_comparison(tasks: list[Task], config: RunConfig, model: BaseChatModel | None = None,
                        root: str | Path | None = None) -> list[dict[str, Any]]:
    """`run_comparison`, kept in (and read from) a results directory under `root` ($REACTGRAPH_RESULTS_DIR)."""
    root = root or os.environ.get(RESULTS_DIR_ENV, "").strip()
    if not root:
        return run_comparison(tasks, config, model=model)
    out, settings = results_directory(tasks, config, Path(root))
    writer, done = open_results(out, settings, resume=(out / SETTINGS).is_file())
    (out / SETTINGS).touch()  # used now: .ci/update-notebooks removes the directories no notebook uses any more
    with writer:
        outcome = compare_runs(tasks, config, writer.append, model, done)
    if outcome.new:  # in report order, so the committed file does not change with the order runs finished in
        kept = {record_key(r): r for r in done} | {record_key(r): r for r in outcome.records}
        rewrite_results(out / RESULTS, ordered(kept.values(), list(config.graphs)))
    return outcome.records
