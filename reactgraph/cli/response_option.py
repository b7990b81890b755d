"""`ask --response-format` (the schema of a structured answer, from the user's code or a JSON schema file) and
`ask --fallback-model` (Context.fallback_models)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from reactgraph.cli.shared import UserError

HELP = ("Also answer in this structure (state's structured_response, --json's too): MODULE:ATTR (a pydantic model, "
        "TypedDict, dataclass or JSON schema dict) or a .json file holding a JSON schema.")
MAX_SCHEMA_BYTES = 256 * 1024


def _model_specs(specs: list[str] | None) -> list[str] | None:
    """--fallback-model's specs, each checked as --model's is (a bad one: typer's usage error naming the flag)."""
    if specs:
        from reactgraph.models.loader import ModelConfigError, parse_spec

        for spec in specs:
            try:
                parse_spec(spec)
            except ModelConfigError as exc:
                raise typer.BadParameter(str(exc)) from None
    return specs


FALLBACK_HELP = ("A model to answer when --model fails for good (after its retries); repeat for more, tried in "
                 "order (Context.fallback_models).")
FallbackModelOption = Annotated[list[str], typer.Option("--fallback-model", metavar="SPEC", callback=_model_specs,
                                                        help=FALLBACK_HELP)]
ResponseFormatOption = Annotated[str | None, typer.Option("--response-format", metavar="MODULE:ATTR|FILE",
                                                          help=HELP)]


def load_response_format(spec: str | None) -> Any:
    """The `ResponseFormat` a --response-format names (None: none); a UserError in one line when it is unusable."""
    if spec is None or not spec.strip():
        return None
    from reactgraph.models.response_format import response_format_of
    from reactgraph.tools.call import ToolRegistrationError
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
