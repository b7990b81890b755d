"""Evaluation harness: task suites, a runner that compares graphs, fault injection, metrics and reports.

    from evals import RunConfig, load_suite, run_comparison, write_report
    records = run_comparison(load_suite("default"), RunConfig(graphs=("react",)))
    write_report(records, "out/")
"""

from evals.faults import FaultPlan, faulty_gateway
from evals.graphs import GRAPHS, GraphEntry, UnknownGraphError, available_graphs, register_graph, resolve_graphs
from evals.metrics import aggregate, summarize
from evals.report import markdown, write_report
from evals.runner import RunConfig, comparable, run_comparison, run_task
from evals.tasks import SuiteError, Task, check, load_suite, select

__all__ = [
    "GRAPHS", "FaultPlan", "GraphEntry", "RunConfig", "SuiteError", "Task", "UnknownGraphError", "aggregate",
    "available_graphs", "check", "comparable", "faulty_gateway", "load_suite", "markdown", "register_graph",
    "resolve_graphs", "run_comparison", "run_task", "select", "summarize", "write_report",
]
