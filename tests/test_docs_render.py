"""The README and every docs page render as written: each code fence is closed by its own closing fence (a stray
one turns the rest of a page, tables included, into a code block), and the README's documentation table is a
table. Parsed by markdown-it-py (CommonMark, what rich renders Markdown with)."""

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
