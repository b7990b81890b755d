"""`ask --response-format`: the schema of a structured answer, from the user's code or a JSON schema file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from reactgraph.cli.shared import UserError

HELP = ("Also answer in this structure (state's structured_response, --json's too): MODULE:ATTR (a pydantic model, "
        "TypedDict, dataclass or JSON schema dict) or a .json file holding a JSON schema.")
MAX_SCHEMA_BYTES = 256 * 1024
ResponseFormatOption = Annotated[str | None, typer.Option("--response-format", metavar="MODULE:ATTR|FILE",
                                                          help=HELP)]


def load_response_format(spec: str | None) -> Any:
    """The `ResponseFormat` a --response-format names (None: none); a UserError in one line when it is unusable."""
    if spec is None or not spec.strip():
        return None
    from reactgraph.models.response_format import response_format_of
    from reactgraph.tools.errors import ToolRegistrationError
    from reactgraph.tools.plugins import load_attribute

    spec = spec.strip()
    try:
        value = _schema_file(Path(spec)) if spec.endswith(".json") else load_attribute(spec, "a response format")
        return response_format_of(value)
    except (ToolRegistrationError, TypeError, ValueError, OSError) as exc:
        raise UserError(f"--response-format {spec!r}: {exc}") from None


def _schema_file(path: Path) -> Any:
    if path.stat().st_size > MAX_SCHEMA_BYTES:
        raise ValueError(f"a JSON schema file of at most {MAX_SCHEMA_BYTES // 1024} KB is read")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc})") from None
