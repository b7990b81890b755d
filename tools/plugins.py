"""Tools from the user's own code, named as `module:attribute` (e.g. REACTGRAPH_TOOLS=my_tools:TOOLS)."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable
from typing import Any

from reactgraph.tools.call import ToolRegistrationError
from reactgraph.tools.meta import ToolMeta

ENV_VAR = "REACTGRAPH_TOOLS"
RETRIEVER_ENV_VAR = "REACTGRAPH_RETRIEVER"


def load_tools(specs: str | Iterable[str] | None = None) -> list[Any]:
    """Import each `module:attribute` (a tool, a function, or a list of them); None reads $REACTGRAPH_TOOLS."""
    if specs is None:
        specs = os.environ.get(ENV_VAR, "")
    if isinstance(specs, str):
        specs = [s.strip() for s in specs.split(",")]
    loaded: list[Any] = []
    for spec in filter(None, specs):
        value = load_attribute(spec, "tools")
        loaded.extend(value if isinstance(value, (list, tuple)) else [value])
    return loaded


def load_retriever(spec: str | None = None) -> ToolMeta | None:
    """`rag_search` answered by the LangChain retriever or vector store at `module:attribute` (or returned by a
    function there, called with no arguments); None reads $REACTGRAPH_RETRIEVER, and neither means our index."""
    spec = (spec if spec is not None else os.environ.get(RETRIEVER_ENV_VAR, "")).strip()
    if not spec:
        return None
    from reactgraph.tools.builtin.rag import rag_search_tool
    from reactgraph.tools.builtin.rag_retriever import is_searchable

    value = load_attribute(spec, "a retriever")
    if callable(value) and not is_searchable(value):
        value = value()
    if not is_searchable(value):
        raise ToolRegistrationError(f"retriever {spec!r} is a {type(value).__name__}, not a LangChain "
                                    "BaseRetriever or VectorStore")
    return rag_search_tool(retriever=value)


def load_attribute(spec: str, what: str) -> Any:
    """The attribute `module:attribute` names (`what` it should be goes in the one-line error)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ToolRegistrationError(f"{what} spec {spec!r} must look like 'module:attribute'")
    try:
        return getattr(_import(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ToolRegistrationError(f"cannot load {what} from {spec!r}: {exc} (looked on the Python path and in "
                                    f"the current directory, {os.getcwd()})") from exc


def _import(module_name: str) -> Any:
    """The module, found on the Python path or else in the current directory: the console script's path does not
    hold the directory it runs in (as `python -m` and uvicorn's `--app-dir .` would), and a user's own tools are
    usually there. It is looked in last, so no installed module is shadowed."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        here = os.getcwd()
        if exc.name != module_name.split(".")[0] or here in sys.path:
            raise
        sys.path.append(here)
        return importlib.import_module(module_name)
