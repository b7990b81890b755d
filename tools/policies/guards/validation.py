"""The argument-validation guard: arguments must satisfy the tool's pydantic model or JSON schema; field errors
go back to the model."""

from __future__ import annotations

import functools
import json

from pydantic import BaseModel, ValidationError

from reactgraph.tools import json_schema, observations
from reactgraph.tools.meta import ToolMeta
from reactgraph.tools.policies.base import CallContext, Handler
from reactgraph.tools.policies.resilience.containment import tool_fault
from reactgraph.tools.result import ToolResult, ToolStatus


def coerce_args(args: object) -> object:
    """A call's arguments as a mapping when they can be one: some providers hand them over as a JSON string.

    The JSON string is parsed (empty: `{}`), None becomes `{}`, anything else is returned as it came, for
    validation to reject if it is not a mapping.
    """
    if isinstance(args, str):
        try:
            return json.loads(args) if args.strip() else {}
        except (ValueError, RecursionError):  # bad JSON, an int past Python's digit limit, absurd nesting
            return args
    return {} if args is None else args


def schema_hint(meta: ToolMeta) -> str:
    """A one-line summary of the expected arguments, e.g. `expression: string (required)`."""
    if meta.params_model is None:
        return _hint_from(meta.json_schema or {})
    return _schema_hint(meta.params_model)


@functools.lru_cache(maxsize=256)  # building a JSON schema costs ~1 ms, and models resend bad arguments often
def _schema_hint(params_model: type[BaseModel]) -> str:
    return _hint_from(params_model.model_json_schema())


def _hint_from(schema: dict) -> str:
    required = set(schema.get("required", ()))
    parts = []
    for field_name, spec in (schema.get("properties") or {}).items():
        spec = spec if isinstance(spec, dict) else {}
        kind = spec.get("type") or "/".join(str(a.get("type", "?")) if isinstance(a, dict) else "any"
                                            for a in spec.get("anyOf", [])) or "any"
        parts.append(f"{field_name}: {kind}{' (required)' if field_name in required else ''}")
    return ", ".join(parts) or "no arguments"


class ArgumentValidation:
    """Validates arguments before anything runs, so a malformed call never reaches the tool."""

    async def __call__(self, call: CallContext, proceed: Handler) -> ToolResult:
        refused = check_arguments(call)
        return refused if refused is not None else await proceed(call)


def check_arguments(call: CallContext) -> ToolResult | None:
    """Set `call.params` from valid arguments (None returned), or the `invalid_args` (or fault) result.

    Synchronous, so the approval check can ask it before a graph pauses: a call that would be refused
    anyway is not put to a person."""
    meta = call.tool
    args = coerce_args(call.args)
    if not isinstance(args, dict):
        return call.result(ToolStatus.INVALID_ARGS, observations.invalid_args(
            meta.name, f"arguments must be a JSON object, got {type(args).__name__}", schema_hint(meta)))
    if meta.params_model is None:
        errors = json_schema.field_errors(meta.validator, args)
        if errors:
            return call.result(ToolStatus.INVALID_ARGS, observations.invalid_args(
                meta.name, json_schema.describe(errors), schema_hint(meta)), field_errors=errors)
        call.params = args
        return None
    try:
        call.params = meta.params_model.model_validate(args)
    except ValidationError as exc:
        return call.result(ToolStatus.INVALID_ARGS,
                           observations.invalid_args(meta.name, exc, schema_hint(meta)),
                           field_errors=[{"loc": list(e["loc"]), "msg": e["msg"]} for e in exc.errors()])
    except BaseException as exc:  # noqa: BLE001 - the tool's own validators may raise anything (pydantic
        return tool_fault(call, exc)  # turns only ValueError and AssertionError into a ValidationError)
    return None
