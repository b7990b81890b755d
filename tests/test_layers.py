"""The architecture as a test: every import inside the product goes to its own layer or one below it.

    the shell (reactgraph.cli, .service, .studio, .ui) → evals → graph → nodes → models → tools → memory
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Highest layer first; each layer is one or more packages, none inside another.
LAYERS = [("reactgraph.cli", "reactgraph.service", "reactgraph.studio", "reactgraph.ui"), ("reactgraph.evals",),
          ("reactgraph.graph",), ("reactgraph.nodes",), ("reactgraph.models",), ("reactgraph.tools",),
          ("reactgraph.memory",)]
FOLDERS = {"reactgraph/cli": "reactgraph.cli", "reactgraph/service": "reactgraph.service",
           "reactgraph/studio": "reactgraph.studio", "reactgraph/ui": "reactgraph.ui", "graph": "reactgraph.graph",
           "nodes": "reactgraph.nodes",
           "models": "reactgraph.models", "tools": "reactgraph.tools", "memory": "reactgraph.memory",
           "evals": "reactgraph.evals"}
# The namespace's own plumbing (version, lazy attributes, the error root) sits beneath every layer.
PLUMBING = ("reactgraph._lazy", "reactgraph._version", "reactgraph.errors")


def layer_of(module: str) -> int | None:
    for rank, packages in enumerate(LAYERS):
        if any(module == package or module.startswith(package + ".") for package in packages):
            return rank
    return None


def product_modules():
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            dotted = ".".join([package, *parts]).removesuffix(".__init__")
            yield dotted, path


@functools.cache  # three tests walk every module's imports: parsed once
def imported_modules(path: Path, module: str) -> tuple[str, ...]:
    return tuple(_imported_modules(path, module))


def _imported_modules(path: Path, module: str):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import: resolve against the package
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                yield f"{base}.{node.module}" if node.module else base
            elif node.module:
                yield node.module
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("reactgraph."):
            yield node.value  # lazy-export tables name the modules they import later


def test_every_product_module_has_a_layer():
    modules = dict(product_modules())
    assert {"reactgraph.cli.app", "reactgraph.service.app", "reactgraph.studio.launcher", "reactgraph.graph.react",
            "reactgraph.memory.checkpointer"} <= set(modules)
    assert [module for module in modules if layer_of(module) is None] == []


def test_every_import_goes_to_its_own_layer_or_below():
    upward = []
    for module, path in product_modules():
        own = layer_of(module)
        for target in imported_modules(path, module):
            if not target.startswith("reactgraph.") or target.startswith(PLUMBING):
                continue
            rank = layer_of(target)
            if rank is not None and own is not None and rank < own:
                upward.append(f"{module} imports {target}")
    assert upward == []


def test_no_module_imports_the_old_top_level_names():
    old = {"graph", "nodes", "tools", "memory", "evals", "models"}
    found = []
    for module, path in product_modules():
        for target in imported_modules(path, module):
            if target.split(".")[0] in old:
                found.append(f"{module} imports {target}")
    assert found == []


OFFLINE_MODEL = "reactgraph.models.offline"
# The one product module that may know the scripted model: the loader builds it for the spec "offline".
MODEL_LOADER = "reactgraph.models.loader"


def test_no_product_module_but_the_loader_imports_the_offline_model():
    """The offline model is a model like any other: statuses, coverage, token counts and prompts never ask for it."""
    found = []
    for module, path in product_modules():
        if module in (MODEL_LOADER, OFFLINE_MODEL) or module.startswith(OFFLINE_MODEL + "."):
            continue
        found += [f"{module} imports {target}" for target in imported_modules(path, module)
                  if target == OFFLINE_MODEL or target.startswith(OFFLINE_MODEL + ".")]
    assert found == []
    loader = dict(product_modules())[MODEL_LOADER]
    assert any(target.startswith(OFFLINE_MODEL) for target in imported_modules(loader, MODEL_LOADER))
