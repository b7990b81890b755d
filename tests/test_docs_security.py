"""The worked auth example that docs/security.md shows is the file the auth
tests run (tests/support/auth_owner.py, under both `reactgraph serve` and `langgraph dev`): the same code, comments and
docstrings aside, so the page cannot drift from what was tested."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
EXAMPLE = Path(__file__).parent / "support" / "auth_owner.py"


def _code(source: str) -> str:
    """The module's AST without docstrings (comments are not in it)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
    return ast.dump(tree)


def _auth_block(page: Path) -> str:
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    found = [block for block in blocks if "@auth.authenticate" in block]
    assert len(found) == 1, f"{page.name} should show one auth example, shows {len(found)}"
    return found[0]


@pytest.mark.parametrize("page", ["docs/security.md"])
def test_the_pages_auth_example_is_the_tested_file(page):
    assert _code(_auth_block(ROOT / page)) == _code(EXAMPLE.read_text(encoding="utf-8"))
