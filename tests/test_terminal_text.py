"""Tool output and model text reach the terminal with their control characters shown, never obeyed."""

from __future__ import annotations

import io

from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from reactgraph.cli.console_view import SafeConsole, terminal_safe

HOSTILE = "晴 \x1b]0;pwned\x07\x1b[2J"


def test_ask_prints_a_tools_escape_sequences_as_visible_text(cli, cli_session, monkeypatch):
    monkeypatch.setenv("HOSTILE_LOG", "/dev/null")
    code, out, err = cli("ask", "北京的天气怎么样？", "--tools", "support.hostile_tools:ESCAPING",
                         "--session", cli_session)
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in out and "\\u202e" in out  # shown, so the user sees what was sent


def test_terminal_safe_keeps_newlines_and_tabs_and_escapes_every_other_control():
    assert terminal_safe("a\tb\nc\r\n") == "a\tb\nc\r\n"
    assert terminal_safe("\x00\x08\x0b\x0c\r\x1b\x7f\x85\x9b\u202a\u202e\u2066\u2069") == (
        "\\x00\\x08\\x0b\\x0c\\x0d\\x1b\\x7f\\x85\\x9b\\u202a\\u202e\\u2066\\u2069")
    assert terminal_safe("北京 → 上海") == "北京 → 上海"


def test_a_safe_console_escapes_text_in_every_renderable_but_keeps_its_own_styles():
    out = io.StringIO()
    console = SafeConsole(file=out, force_terminal=True, color_system="standard", width=80)
    table = Table("tool")
    table.add_row(HOSTILE)
    console.print(Text(HOSTILE, style="bold"), Panel(HOSTILE), table)
    shown = out.getvalue()
    assert "\x1b]" not in shown and "\x1b[2J" not in shown  # the tool's sequences, escaped
    assert "\\x1b]0;pwned" in shown and "\x1b[1m" in shown  # rich's bold still works
