"""Evaluation harness: task suites, a runner that compares graphs, fault injection, metrics, intervals and
paired tests, and reports.

    from reactgraph.evals import RunConfig, load_suite, run_comparison, write_report
    records = run_comparison(load_suite("default"), RunConfig(graphs=("react",)))
    write_report(records, "out/")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reactgraph._lazy import lazy_attributes

if TYPE_CHECKING:
    from reactgraph.evals.bfcl import load_bfcl
    from reactgraph.evals.faults import FaultPlan, faulty_gateway
    from reactgraph.evals.graphs import (
        GRAPHS,
        GraphEntry,
        UnknownGraphError,
        available_graphs,
        register_graph,
        resolve_graphs,
    )
    from reactgraph.evals.metrics import aggregate, summarize
    from reactgraph.evals.report import markdown, write_report
    from reactgraph.evals.runner import RunConfig, comparable, run_comparison, run_task
    from reactgraph.evals.stats import compare_pairs, mcnemar_exact, paired_test, success_interval, wilson_interval
    from reactgraph.evals.tasks import SuiteError, Task, check, load_suite, select

_EXPORTS = {
    "load_bfcl": "reactgraph.evals.bfcl",
    "FaultPlan": "reactgraph.evals.faults",
    "faulty_gateway": "reactgraph.evals.faults",
    "GRAPHS": "reactgraph.evals.graphs",
    "GraphEntry": "reactgraph.evals.graphs",
    "UnknownGraphError": "reactgraph.evals.graphs",
    "available_graphs": "reactgraph.evals.graphs",
    "register_graph": "reactgraph.evals.graphs",
    "resolve_graphs": "reactgraph.evals.graphs",
    "aggregate": "reactgraph.evals.metrics",
    "summarize": "reactgraph.evals.metrics",
    "markdown": "reactgraph.evals.report",
    "write_report": "reactgraph.evals.report",
    "RunConfig": "reactgraph.evals.runner",
    "comparable": "reactgraph.evals.runner",
    "run_comparison": "reactgraph.evals.runner",
    "run_task": "reactgraph.evals.runner",
    "compare_pairs": "reactgraph.evals.stats",
    "mcnemar_exact": "reactgraph.evals.stats",
    "paired_test": "reactgraph.evals.stats",
    "success_interval": "reactgraph.evals.stats",
    "wilson_interval": "reactgraph.evals.stats",
    "SuiteError": "reactgraph.evals.tasks",
    "Task": "reactgraph.evals.tasks",
    "check": "reactgraph.evals.tasks",
    "load_suite": "reactgraph.evals.tasks",
    "select": "reactgraph.evals.tasks",
}
__all__ = [*_EXPORTS]
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
