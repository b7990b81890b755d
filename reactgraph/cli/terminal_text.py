"""Text from outside (tool output, model replies, MCP servers' descriptions, stored sessions, log fields) made
safe for a terminal: control characters shown as visible escapes instead of acting on the terminal.

`terminal_safe` is the one function; `SafeConsole` applies it to everything a rich console prints (rich's
`Text` keeps ESC and most controls), so an OSC title, a clear-screen or a bidi override in a tool's output is
printed as `\\x1b]0;…`, never obeyed. Newlines and tabs are kept; rich's own styling is untouched.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rich.console import Console
from rich.segment import Segment

# C0 controls but tab and newline, DEL, C1 controls, a carriage return not ending a line, and the bidi
# embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069), which reorder what a reader sees.
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]|\r(?!\n)")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """`text` with every control character a terminal would act on written as a visible escape (`\\x1b`)."""
    return _UNSAFE.sub(_escaped, text) if _UNSAFE.search(text) else text


class SafeConsole(Console):
    """A rich `Console` that passes the text of every segment it writes through `terminal_safe` (its own
    control segments and the styles' escape codes are rich's and pass unchanged)."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else Segment(terminal_safe(segment.text), segment.style)
            for segment in buffer)
