"""Text from outside (tool output, model replies, MCP servers' descriptions, stored sessions, log fields) made
safe for a terminal: control characters shown as visible escapes instead of acting on the terminal.

`terminal_safe` (reactgraph/tools/untrusted.py, which approval requests use too) is the one function;
`SafeConsole` applies it to everything a rich console prints (rich's
`Text` keeps ESC and most controls), so an OSC title, a clear-screen or a bidi override in a tool's output is
printed as `\\x1b]0;…`, never obeyed. Newlines and tabs are kept; rich's own styling is untouched.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.segment import Segment

from reactgraph.tools.untrusted import terminal_safe

__all__ = ["SafeConsole", "terminal_safe"]


class SafeConsole(Console):
    """A rich `Console` that passes the text of every segment it writes through `terminal_safe` (its own
    control segments and the styles' escape codes are rich's and pass unchanged)."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else Segment(terminal_safe(segment.text), segment.style)
            for segment in buffer)
