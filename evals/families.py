"""Task families: groups of tasks chosen because the paradigms' control flow treats them differently.

The default suite labels each family's tasks `family:<name>` (evals/suites/default.jsonl). For every family this
module measures how two graphs differ on the *same* runs (same task, seed and repeat, so the same injected faults
and model mistakes): success, iterations, model calls, tokens and wall time, each as the mean per-run difference with
a 95 % interval. The interval is a bootstrap over tasks (a task is resampled with all its runs: runs of one task
share its difficulty), with a fixed seed, so the same records always give the same numbers.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from reactgraph.evals.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from reactgraph.evals.tasks import Task

FAMILY_PREFIX = "family:"
# What each family is for: the control-flow question it asks of the paradigms.
FAMILIES: dict[str, str] = {
    "depends_on_result": "the next look-up needs what the previous one found (known only at run time)",
    "independent_lookups": "many look-ups that do not depend on each other",
    "first_tool_fails": "the first call of the tool the question needs fails (a passing fault)",
    "tool_goes_down": "a tool the plan counts on is down for the whole run: the plan made up front goes stale",
    "unanswerable": "no tool can answer; the right answer says so",
}
# The measures compared, as (record field, label); success is a 0/1 per run, the rest are per-run amounts.
# Iterations are ReAct's think→act rounds, Plan-and-Solve's plan steps carried out, Reflexion's rounds over its trials.
MEASURES = (("success", "success"), ("iterations", "iterations"), ("model_calls", "model calls"),
            ("tokens", "tokens"), ("wall_s", "wall s"))


def family_of(record: dict[str, Any]) -> str | None:
    """The family a run's task belongs to (its `family:` label), or None."""
    return next((t[len(FAMILY_PREFIX):] for t in record.get("tags") or () if t.startswith(FAMILY_PREFIX)), None)


def by_family(records: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The records of each family, families in FAMILIES' order (others after, by name)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        if (family := family_of(record)) is not None:
            groups[family].append(record)
    order = [f for f in FAMILIES if f in groups] + sorted(set(groups) - set(FAMILIES))
    return {f: groups[f] for f in order}


@dataclass(frozen=True)
class Difference:
    """b minus a over the runs both made: the mean per-run difference and its 95 % interval."""

    measure: str
    mean: float
    low: float
    high: float
    runs: int

    @property
    def clear(self) -> bool:
        """The interval leaves out zero: a difference these runs show, not one they could be hiding by chance."""
        return self.low > 0 or self.high < 0


def _key(record: dict[str, Any]) -> tuple[str, int, int]:
    return record["task"], int(record.get("seed") or 0), int(record.get("repeat") or 0)


def _value(record: dict[str, Any], field: str) -> float:
    value = record.get(field)
    return float(bool(value)) if field == "success" else float(value or 0)


def differences(records: list[dict[str, Any]], a: str, b: str) -> list[Difference]:
    """Graph b against graph a on the runs both made, one Difference per measure (empty if they share none)."""
    runs_a = {_key(r): r for r in records if r["graph"] == a}
    runs_b = {_key(r): r for r in records if r["graph"] == b}
    shared = sorted(runs_a.keys() & runs_b.keys())
    if not shared:
        return []
    out = []
    for field, label in MEASURES:
        per_task: dict[str, list[float]] = defaultdict(list)
        for key in shared:
            per_task[key[0]].append(_value(runs_b[key], field) - _value(runs_a[key], field))
        tasks = [per_task[t] for t in sorted(per_task)]
        mean = sum(map(sum, tasks)) / len(shared)
        low, high = _bootstrap(tasks)
        out.append(Difference(label, mean, low, high, len(shared)))
    return out


def _bootstrap(tasks: list[list[float]]) -> tuple[float, float]:
    """Percentile 95 % interval of the mean per-run difference, resampling tasks with all their runs."""
    rng = random.Random(BOOTSTRAP_SEED)
    means = []
    for _ in range(BOOTSTRAP_RESAMPLES):
        drawn = rng.choices(tasks, k=len(tasks))
        means.append(sum(map(sum, drawn)) / sum(map(len, drawn)))
    means.sort()
    return means[int(0.025 * BOOTSTRAP_RESAMPLES)], means[min(len(means) - 1, int(0.975 * BOOTSTRAP_RESAMPLES))]


def _number(measure: str, value: float, signed: bool = True) -> str:
    if measure == "success":
        return f"{value * 100:+.0f} pts" if signed else f"{value * 100:.0f}%"
    digits = 2 if measure == "wall s" else 0 if measure == "tokens" else 1
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _cell(d: Difference) -> str:
    """"+12 pts (4 to 20)", bold when the interval leaves out zero."""
    text = f"{_number(d.measure, d.mean)} ({_number(d.measure, d.low)} to {_number(d.measure, d.high)})"
    return f"**{text}**" if d.clear else text


def family_section(records: list[dict[str, Any]]) -> list[str]:
    """The report's lines on task families (none when no run is of one): the means, then each graph against the
    first graph compared."""
    if not any(family_of(r) for r in records):
        return []
    reference = records[0]["graph"]
    return ["## Per task family (means per run)", "", family_table(records), "",
            f"### Against {reference} (same runs; 95% interval, bootstrap over tasks; bold: the interval leaves out 0)",
            "", difference_table(records, reference), ""]


def difference_table(records: list[dict[str, Any]], reference: str = "react") -> str:
    """Per family and graph, the difference from `reference` on the same runs (graph minus reference), with
    95 % intervals; bold where the interval leaves out zero. A graph that made none of the reference's runs has no
    row."""
    graphs = [g for g in dict.fromkeys(r["graph"] for r in records) if g != reference]
    header = "| family | graph | runs | " + " | ".join(label for _, label in MEASURES) + " |"
    lines = [header, "| --- | --- | ---: |" + " ---: |" * len(MEASURES)]
    for family, rs in by_family(records).items():
        for graph in graphs:
            found = differences(rs, reference, graph)
            if found:
                lines.append(f"| {family} | {graph} vs {reference} | {found[0].runs} | "
                             + " | ".join(_cell(d) for d in found) + " |")
    return "\n".join(lines)


def family_table(records: list[dict[str, Any]]) -> str:
    """Per family and graph: the success rate and the mean iterations, model calls, tokens and wall time per run."""
    lines = ["| family | graph | runs | " + " | ".join(label for _, label in MEASURES) + " |",
             "| --- | --- | ---: |" + " ---: |" * len(MEASURES)]
    for family, rs in by_family(records).items():
        per_graph: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in rs:
            per_graph[r["graph"]].append(r)
        for graph, runs in per_graph.items():
            means = [sum(_value(r, field) for r in runs) / len(runs) for field, _ in MEASURES]
            lines.append(f"| {family} | {graph} | {len(runs)} | "
                         + " | ".join(_number(label, m, signed=False) for (_, label), m in zip(MEASURES, means,
                                                                                             strict=True)) + " |")
    return "\n".join(lines)


def trace_of(task: Task, graph: str, model: str = "offline") -> list[str]:
    """One run of `task` through `graph` (the task's own faults, no others) as lines: iteration, node, the call or
    the thought, and its status — how the control flow went, for a notebook to show beside another graph's."""
    from langchain_core.messages import HumanMessage

    from reactgraph.evals.faults import FaultPlan, faulty_gateway
    from reactgraph.evals.graphs import resolve_graphs
    from reactgraph.graph import load_chat_model

    (entry,) = resolve_graphs([graph])
    gateway, _ = faulty_gateway(FaultPlan(), f"trace:{task.id}", scripted=task.faults)
    compiled = entry.build(gateway, load_chat_model(model))
    result = compiled.invoke({"messages": [HumanMessage(task.question)]},
                             {"configurable": {"thread_id": f"trace-{graph}-{task.id}"}},
                             context=entry.make_context(model=model))
    lines = []
    for step in result.get("steps") or []:
        what = step.get("action") or " ".join(str(step.get("thought") or "").split())[:70]
        lines.append(f"{step['step']:>2} {step['node']:<13} {what[:70]:<70} {step['status']}")
    lines.append(f"-> {result.get('status')} · {len(lines)} records")
    return lines


def side_by_side(task: Task, graphs: Sequence[str], model: str = "offline") -> str:
    """The traces of one task through each graph, one after the other under a heading naming the graph."""
    blocks = [f"== {graph}\n" + "\n".join(trace_of(task, graph, model)) for graph in graphs]
    return f"{task.id}: {task.question}\n\n" + "\n\n".join(blocks)
