"""The root of react-graph's exceptions: `except ReactGraphError` catches every error the project raises.

Each exception class of ours derives from `ReactGraphError` and keeps its builtin base (`ValueError`,
`RuntimeError`, `ConnectionError`, `LookupError`, `UserWarning`, …) beside it, so callers that catch the builtin
go on catching it:

    class ModelConfigError(ReactGraphError, ValueError): ...

The classes stay in the modules that raise them; this module is plumbing beneath every layer (like `_lazy`)
and imports nothing of the project.
"""

from __future__ import annotations

__all__ = ["ReactGraphError"]


class ReactGraphError(Exception):
    """Base class of every exception react-graph defines."""
