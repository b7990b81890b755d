"""Tools from the user's own code, named as `module:attribute` (e.g. REACTGRAPH_TOOLS=my_tools:TOOLS)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from typing import Any

from reactgraph.tools.errors import ToolRegistrationError

ENV_VAR = "REACTGRAPH_TOOLS"


def load_tools(specs: str | Iterable[str] | None = None) -> list[Any]:
    """Import each `module:attribute` (a tool, a function, or a list of them); None reads $REACTGRAPH_TOOLS."""
    if specs is None:
        specs = os.environ.get(ENV_VAR, "")
    if isinstance(specs, str):
        specs = [s.strip() for s in specs.split(",")]
    loaded: list[Any] = []
    for spec in filter(None, specs):
        module_name, _, attribute = spec.partition(":")
        if not module_name or not attribute:
            raise ToolRegistrationError(f"tool spec {spec!r} must look like 'module:attribute'")
        try:
            value = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as exc:
            raise ToolRegistrationError(f"cannot load tools from {spec!r}: {exc}") from exc
        loaded.extend(value if isinstance(value, (list, tuple)) else [value])
    return loaded
