"""Tools described by a JSON schema: the schema is checked once at registration and validates every call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator, SchemaError, validators
from jsonschema.protocols import Validator

from reactgraph.tools.call import ToolRegistrationError

_MAX_ERRORS = 5  # a model fixing its call needs the first few problems, not all of a hostile payload's
_MAX_MESSAGE_CHARS = 200  # jsonschema quotes the offending value, which may be huge


def compile_schema(name: str, schema: object) -> Validator:
    """A validator for `schema` (its `$schema` dialect, else Draft 2020-12); one line if the schema is invalid."""
    if not isinstance(schema, Mapping):
        raise ToolRegistrationError(f"tool {name!r}: the JSON schema must be an object, got {type(schema).__name__}")
    if schema.get("type", "object") != "object":
        raise ToolRegistrationError(f"tool {name!r}: the JSON schema must describe an object (tool arguments), "
                                    f"got type {schema.get('type')!r}")
    cls = validators.validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(top level)"
        raise ToolRegistrationError(f"tool {name!r}: invalid JSON schema at {where}: {_short(exc.message)}") from None
    return cls(dict(schema))


def field_errors(validator: Validator, args: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The arguments' problems as `{"loc", "msg"}` (the shape pydantic errors are reported in); empty if valid."""
    try:
        errors = sorted(validator.iter_errors(args), key=lambda e: list(map(str, e.absolute_path)))
    except RecursionError:  # arguments nested past what the validator can walk
        return [{"loc": [], "msg": "arguments are nested too deeply"}]
    return [{"loc": list(e.absolute_path), "msg": _short(e.message)} for e in errors[:_MAX_ERRORS]]


def describe(errors: list[dict[str, Any]]) -> str:
    """`field: message; ...`, the same wording `untrusted.invalid_args` uses for pydantic errors."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in errors)


def _short(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE_CHARS else text[:_MAX_MESSAGE_CHARS] + "…"
