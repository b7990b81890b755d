"""Text from outside (tool output, model replies and the tool arguments a model wrote, MCP servers' descriptions,
stored sessions) made safe to show a person: control characters written as visible escapes instead of acting on
the terminal or page that shows them.

`terminal_safe` is the one function: the CLI applies it to everything it prints (reactgraph/cli/console_view.py),
and an approval request's `description` — the text an approval screen shows — is made with it, so a bidi override
in a model-written argument cannot reorder what the person approves, on a terminal or a web page alike.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, a carriage return not ending a line, and the bidi
# embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069), which reorder what a reader sees.
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]|\r(?!\n)")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """`text` with every control character a terminal would act on written as a visible escape (`\\x1b`)."""
    return _UNSAFE.sub(_escaped, text) if _UNSAFE.search(text) else text
