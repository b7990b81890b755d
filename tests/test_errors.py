"""One error root: every exception class the product defines derives from `reactgraph.errors.ReactGraphError`.

The walk imports every module of the namespace (graph, nodes, models, tools, memory, evals and the shell in
reactgraph/) and looks at the exception classes defined there; an AST pass makes sure none is hidden from it
(defined inside a function, where the walk cannot see it).
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from reactgraph.errors import ReactGraphError

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"graph": "reactgraph.graph", "nodes": "reactgraph.nodes", "models": "reactgraph.models",
           "tools": "reactgraph.tools", "memory": "reactgraph.memory", "evals": "reactgraph.evals",
           "reactgraph": "reactgraph"}
# Exception classes of ours that cannot derive from ReactGraphError, each with the reason. Empty today: none of
# ours must be a third-party exception (LangGraph's control flow, GraphInterrupt and friends, is raised as
# LangGraph's own class, never subclassed here).
NOT_ROOTED: dict[str, str] = {}


def modules():
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            yield ".".join([package, *parts]).removesuffix(".__init__"), path


def exception_classes(owner: object, module: str):
    for value in vars(owner).values():
        if inspect.isclass(value) and value.__module__ == module:
            if issubclass(value, BaseException):
                yield value
            yield from exception_classes(value, module)  # classes nested in a class body


def defined_exceptions() -> list[type[BaseException]]:
    found = []
    for module, _path in modules():
        found.extend(exception_classes(importlib.import_module(module), module))
    return found


def test_every_exception_class_of_ours_derives_from_the_root():
    found = defined_exceptions()
    assert len(found) >= 40  # the walk saw them (48 when this was written)
    unrooted = sorted(f"{cls.__module__}.{cls.__qualname__}" for cls in found if not issubclass(cls, ReactGraphError))
    assert unrooted == sorted(NOT_ROOTED)


def test_no_exception_class_is_defined_where_the_walk_cannot_see_it():
    hidden = []
    for module, path in modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                hidden += [f"{module}.{node.name}: class {inner.name}" for inner in ast.walk(node)
                           if isinstance(inner, ast.ClassDef)
                           and any(ast.unparse(base).endswith(("Error", "Exception", "Warning", "Interrupt"))
                                   for base in inner.bases)]
    assert hidden == []


def test_the_builtin_bases_are_kept():
    from reactgraph.graph import InvalidSessionId, ModelConfigError
    from reactgraph.memory.redis_checkpoint.settings import CheckpointStoreUnavailable
    from reactgraph.tools import ToolError, ToolRegistrationError, TransientToolError

    assert issubclass(ModelConfigError, ValueError) and issubclass(InvalidSessionId, ValueError)
    assert issubclass(ToolRegistrationError, ValueError)
    assert issubclass(CheckpointStoreUnavailable, ConnectionError)
    assert issubclass(TransientToolError, ToolError) and issubclass(ToolError, ReactGraphError)


def test_the_root_is_exported_from_the_namespace():
    import reactgraph

    assert reactgraph.ReactGraphError is ReactGraphError
    assert "ReactGraphError" in reactgraph.__all__


def test_except_the_root_catches_a_bad_model_spec():
    from reactgraph.graph import parse_spec

    with pytest.raises(ValueError):  # callers that catch the builtin go on catching it
        parse_spec("no-provider-here")
    try:
        parse_spec("no-provider-here")
    except ReactGraphError as exc:
        assert "no-provider-here" in str(exc)
    else:
        pytest.fail("a bad model spec raised nothing")


def test_except_the_root_catches_a_bad_session_id():
    from reactgraph.graph import check_session_id

    with pytest.raises(ReactGraphError, match="session id"):
        check_session_id("")
