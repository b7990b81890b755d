"""The ReAct graph's mermaid diagram shown in README.md and docs/architecture.md is the one the code draws, so
the pages cannot drift from the graph (`python .ci/update-diagram` rewrites them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reactgraph.graph import build_react_graph

ROOT = Path(__file__).resolve().parent.parent
MERMAID = re.compile(r"^```mermaid\n(.*?)^```$", re.M | re.S)


@pytest.mark.parametrize("page", ["README.md", "docs/architecture.md"])
def test_the_pages_diagram_is_the_graphs(page):
    shown = MERMAID.findall((ROOT / page).read_text(encoding="utf-8"))
    assert shown, f"{page} shows no mermaid diagram"
    drawn = build_react_graph().get_graph().draw_mermaid()
    for diagram in shown:
        assert diagram.strip() == drawn.strip(), f"{page}'s diagram differs from the code's: run .ci/update-diagram"
