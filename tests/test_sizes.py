"""The size rule as a test: a product module holds one concept, as long as the concept needs, up to 600 lines;
no function over 60 lines (its `def` line to its last)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("graph", "nodes", "models", "tools", "memory", "evals", "reactgraph", "benchmarks")
# Rooms by concept, not fragments of one: a cap of 300 split approval into six files and the breaker into three.
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60


def product_files():
    for folder in PRODUCT:
        yield from sorted((ROOT / folder).rglob("*.py"))


def test_no_module_is_over_600_lines():
    over = {}
    for path in product_files():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            over[str(path.relative_to(ROOT))] = lines
    assert over == {}


def test_no_function_is_over_60_lines():
    over = {}
    for path in product_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    over[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = length
    assert over == {}


def test_the_product_is_at_most_200_modules():
    """Rooms, not fragments: the library and the application shell (benchmarks aside) in at most 200 modules."""
    modules = [path for path in product_files() if path.relative_to(ROOT).parts[0] != "benchmarks"]
    assert len(modules) <= 200, len(modules)
