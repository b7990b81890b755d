"""The README and every docs page render as written: each code fence is closed by its own closing fence (a stray
one turns the rest of a page, tables included, into a code block), and the README's documentation table is a
table; every image a page shows is in the repository (the debugger page's screenshots among them, each small);
the Quick start keeps its two commands and says how to open the page. Parsed by markdown-it-py (CommonMark, what
rich renders Markdown with)."""

from __future__ import annotations

from pathlib import Path

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _tokens(page: Path):
    return MarkdownIt("commonmark").enable("table").parse(page.read_text(encoding="utf-8"))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_code_fence_is_closed_by_its_own_closing_fence(page):
    lines = page.read_text(encoding="utf-8").splitlines()
    unclosed = []
    for token in _tokens(page):
        if token.type != "fence" or token.map is None:
            continue
        last = lines[token.map[1] - 1].strip() if token.map[1] <= len(lines) else ""
        # An unclosed fence runs to the end of the page: its last line is then not a closing fence.
        if not (last.startswith(token.markup) and last.strip("`~") == ""):
            unclosed.append(f"line {token.map[0] + 1}: {lines[token.map[0]]!r}")
    assert unclosed == []


def test_the_readme_documentation_table_is_a_table_linking_every_docs_page():
    tokens = _tokens(ROOT / "README.md")
    start = next(i for i, t in enumerate(tokens) if t.type == "inline" and t.content == "Documentation")
    table = next(i for i in range(start, len(tokens)) if tokens[i].type == "table_open")
    end = next(i for i in range(table, len(tokens)) if tokens[i].type == "table_close")
    linked = " ".join(t.content for t in tokens[table:end] if t.type == "inline")
    assert all(f"(docs/{page.name})" in linked for page in PAGES[1:]), linked


def _images(page: Path) -> list[str]:
    """Where each image the page shows comes from (as written)."""
    return [child.attrGet("src") for token in _tokens(page) if token.type == "inline"
            for child in token.children or [] if child.type == "image"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_image_a_page_shows_is_in_the_repository(page):
    missing = [src for src in _images(page) if not (page.parent / src).is_file()]
    assert missing == []


def test_the_debugger_pages_docs_show_each_main_view_in_a_small_png():
    """docs/ui.md's screenshots (taken by .ci/update-ui-screenshots): each main view, each PNG at most 150 KB."""
    shown = _images(ROOT / "docs" / "ui.md")
    views = ("run", "state", "approval", "time-travel", "side-by-side", "comparison", "phone")
    assert sorted(shown) == sorted(f"images/ui/{view}.png" for view in views)
    for src in shown:
        image = (ROOT / "docs" / src).read_bytes()
        assert image.startswith(b"\x89PNG\r\n\x1a\n") and len(image) <= 150 * 1024, (src, len(image))


def test_the_quick_start_has_two_commands_and_says_in_prose_how_to_open_the_page():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Quick start"):text.index("\n## ", text.index("## Quick start") + 1)]
    tokens = MarkdownIt("commonmark").parse(section)
    commands = [line for t in tokens if t.type == "fence" and t.info == "bash" for line in t.content.splitlines()]
    assert len(commands) == 2, commands
    prose = " ".join(t.content for t in tokens if t.type == "inline")
    assert "reactgraph ui --open" in prose and "in a browser" in prose
